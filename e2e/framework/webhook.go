package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/certs"
)

// LocalWebhook is a webhook server address on this machine and the serving
// certificate it uses.
type LocalWebhook struct {
	Host    string
	Port    int
	CertDir string
	CA      []byte
}

// NewLocalWebhook picks a free port on 127.0.0.1 and writes a self-signed
// serving certificate for it into a new directory under dir.
func NewLocalWebhook(dir string) (*LocalWebhook, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	certDir, err := os.MkdirTemp(dir, "webhook-certs-")
	if err != nil {
		return nil, err
	}
	ss, err := certs.GenerateSelfSigned([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	if err := ss.WriteDir(certDir); err != nil {
		return nil, err
	}
	return &LocalWebhook{Host: "127.0.0.1", Port: port, CertDir: certDir, CA: ss.CACert}, nil
}

// Address returns host:port.
func (w *LocalWebhook) Address() string {
	return net.JoinHostPort(w.Host, strconv.Itoa(w.Port))
}

// ReadWebhookConfiguration reads a ValidatingWebhookConfiguration manifest.
func ReadWebhookConfiguration(path string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&vwc); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return &vwc, nil
}

// PointAt rewrites every webhook of vwc to call w at the path of its
// service reference, trusting w's CA: what changes when a webhook server
// runs out of cluster. Everything else stays as written.
func (w *LocalWebhook) PointAt(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		path := ""
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		url := "https://" + w.Address() + path
		cc.URL, cc.Service, cc.CABundle = &url, nil, w.CA
	}
}

// InstallWebhook reads the ValidatingWebhookConfiguration at path, points
// it at w and creates it, replacing any with the same name.
func (w *LocalWebhook) InstallWebhook(ctx context.Context, c client.Client, path string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc, err := ReadWebhookConfiguration(path)
	if err != nil {
		return nil, err
	}
	w.PointAt(vwc)
	if err := client.IgnoreNotFound(c.Delete(ctx, vwc.DeepCopy())); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, vwc); err != nil {
		return nil, fmt.Errorf("creating ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return vwc, nil
}
