package framework

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig serializes cfg (server, CA, client certificate or token) as a
// kubeconfig file.
func kubeconfig(cfg *rest.Config) ([]byte, error) {
	c := clientcmdapi.NewConfig()
	c.Clusters["lockguard-test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
	}
	c.AuthInfos["user"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		Token:                 cfg.BearerToken,
	}
	c.Contexts["lockguard-test"] = &clientcmdapi.Context{Cluster: "lockguard-test", AuthInfo: "user", Namespace: "default"}
	c.CurrentContext = "lockguard-test"
	return clientcmd.Write(*c)
}
