package framework

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	// SetJSON are helm --set-json values every RenderChart adds: the
	// chart values of the manager's options (ProtectSet).
	SetJSON []string
}

// NewLocalWebhook picks a free port on 127.0.0.1 and writes a self-signed
// serving certificate for it into a new directory under dir.
func NewLocalWebhook(dir string) (*LocalWebhook, error) {
	port, err := FreePort()
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

// PointAt rewrites every webhook of vwc to call w at the path of its
// service reference, trusting w's CA: what changes when a webhook server
// runs out of cluster. Everything else stays as the chart renders it.
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

// localKinds are the chart's objects a local control plane runs: no
// kubelet (the tests run lockguard themselves), no cluster network, no
// cert-manager.
var localKinds = []string{
	"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
	"FlowSchema", "ValidatingWebhookConfiguration",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}

// RenderChart renders lockguard's chart (release ReleaseName in
// ServiceAccountNamespace, default values and set) for a local control
// plane, and returns the objects such a control plane runs: the
// ServiceAccount and RBAC, the FlowSchema and the webhook configuration,
// whose webhooks call w (the URL swapped in for the chart's Service, w's
// CA for cert-manager's). The Lock CRD is the chart's crds/ directory,
// which Start installs (CRDDirs); the Deployment, Services and
// PodDisruptionBudget are left out.
func (w *LocalWebhook) RenderChart(ctx context.Context, set ...string) ([]*unstructured.Unstructured, error) {
	if len(w.CA) == 0 {
		return nil, fmt.Errorf("the local webhook at %s has no CA", w.Address())
	}
	objs, err := Render(ctx, Release{
		Name: ReleaseName, Namespace: ServiceAccountNamespace,
		Set: append([]string{"certManager.enabled=false", "webhook.tls.existingSecret=local-serving-cert"}, set...),
		// The caBundle is swapped for w's CA below; the chart requires one.
		SetString: []string{"webhook.tls.caBundle=" + base64.StdEncoding.EncodeToString(w.CA)},
		SetJSON:   w.SetJSON,
	})
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !slices.Contains(localKinds, o.GetKind()) {
			continue
		}
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			vwc, err := toWebhookConfiguration(o)
			if err != nil {
				return nil, err
			}
			w.PointAt(vwc)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vwc)
			if err != nil {
				return nil, err
			}
			o = &unstructured.Unstructured{Object: m}
			o.SetAPIVersion("admissionregistration.k8s.io/v1")
			o.SetKind("ValidatingWebhookConfiguration")
		}
		out = append(out, o)
	}
	return out, nil
}

// WebhookConfiguration returns the chart's webhook configuration pointed
// at w (RenderChart), not installed: for tests that install a renamed or
// narrowed copy next to the suite's.
func (w *LocalWebhook) WebhookConfiguration(ctx context.Context, set ...string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	objs, err := w.RenderChart(ctx, set...)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			return toWebhookConfiguration(o)
		}
	}
	return nil, errors.New("the chart rendered no ValidatingWebhookConfiguration")
}

// InstallChart creates the release namespace if it is missing and applies
// RenderChart's objects: lockguard's ServiceAccount (whose identity
// ServiceAccountConfig gives) gets exactly the chart's RBAC, and the API
// server calls w for every delete the chart's webhook selects. It returns
// the installed webhook configuration.
func (w *LocalWebhook) InstallChart(ctx context.Context, c client.Client, set ...string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	objs, err := w.RenderChart(ctx, set...)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountNamespace}}
	if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
		return nil, err
	}
	if err := Apply(ctx, c, objs...); err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			return toWebhookConfiguration(o)
		}
	}
	return nil, errors.New("the chart rendered no ValidatingWebhookConfiguration")
}

func toWebhookConfiguration(u *unstructured.Unstructured) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vwc); err != nil {
		return nil, fmt.Errorf("decoding the chart's ValidatingWebhookConfiguration: %w", err)
	}
	return &vwc, nil
}
