package measure

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// What the admission-modes benchmark (modes.go) sets up: the policy and
// a webhook configuration per mode, the namespaces, a background write
// load.

// APIServerFlagsFor returns the kube-apiserver flags the admission-modes
// benchmark needs on version: on 1.29 the ValidatingAdmissionPolicy API is
// beta and off by default.
func APIServerFlagsFor(version string) map[string]string {
	if minor(version) < 30 {
		return map[string]string{
			"feature-gates":  "ValidatingAdmissionPolicy=true",
			"runtime-config": "admissionregistration.k8s.io/v1beta1=true",
		}
	}
	return nil
}

// minor returns the minor of version "1.M.P" (0 when it does not parse).
func minor(version string) int {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if len(parts) < 2 {
		return 0
	}
	m, _ := strconv.Atoi(parts[1])
	return m
}

// policyAPI returns the served ValidatingAdmissionPolicy version: "v1",
// "v1beta1" or "".
func (c *Cluster) policyAPI() (string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return "", err
	}
	for _, v := range []string{"v1", "v1beta1"} {
		rl, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/" + v)
		if err != nil {
			continue
		}
		for _, r := range rl.APIResources {
			if r.Name == "validatingadmissionpolicies" {
				return v, nil
			}
		}
	}
	return "", nil
}

// createPolicy creates the seed's policy and binding for the namespaces
// nsSelector selects, in API version v.
func (c *Cluster) createPolicy(ctx context.Context, v string, nsSelector *metav1.LabelSelector) error {
	policy, binding := LockedPolicy(nsSelector)
	for _, obj := range []runtime.Object{policy, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("admissionregistration.k8s.io/" + v)
		u.SetKind(strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1."))
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, u)); err != nil {
			return fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), v, u.GetName(), err)
		}
	}
	return nil
}

// installWebhookFor creates a ValidatingWebhookConfiguration bench-<mode>
// from lockguard's, calling the lockguard serving on wh, for the
// namespaces of mode.
func (c *Cluster) installWebhookFor(ctx context.Context, mode string, wh *framework.LocalWebhook) error {
	vwc, err := c.Webhook.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		return err
	}
	vwc.Name = "bench-" + mode
	vwc.Annotations = nil
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		u := "https://" + wh.Address() + webhook.Path
		if cc.URL != nil && strings.HasSuffix(*cc.URL, webhook.CreatePath) {
			u = "https://" + wh.Address() + webhook.CreatePath
		}
		cc.URL, cc.Service, cc.CABundle = &u, nil, wh.CA
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: mode}}
	}
	if err := client.IgnoreNotFound(c.Client.Delete(ctx, vwc.DeepCopy())); err != nil {
		return err
	}
	return c.Client.Create(ctx, vwc)
}

// installCreateEntry installs the chart's webhook configuration with its
// Lock-create entry alone (pointed at c.Webhook), unless the configuration
// is installed already, and returns what removes it again.
func (c *Cluster) installCreateEntry(ctx context.Context) (func(), error) {
	vwc, err := c.CreateEntryConfiguration(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, vwc); apierrors.IsAlreadyExists(err) {
		return func() {}, nil
	} else if err != nil {
		return nil, err
	}
	return func() { _ = c.Client.Delete(context.Background(), vwc) }, nil
}

// modeNS is the namespace of mode at l other Locks.
func modeNS(mode string, l int) string { return fmt.Sprintf("bd-%s-%d", mode, l) }

// windowNS is the namespace of mode's window test.
func windowNS(mode string) string { return "bw-" + mode }

// BackgroundLoad patches ConfigMaps of namespace bench-load at rate per
// second until stop is called, which returns the achieved rate and the
// number of failed writes.
func (c *Cluster) BackgroundLoad(ctx context.Context, rate float64) (stop func() (float64, int64), err error) {
	const ns, n = "bench-load", 16
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	if err := c.CreateAll(ctx, n, n, func(i int) client.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("load-%d", i)}}
	}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	const workers = 4
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval * workers)
			defer t.Stop()
			for i := w; ; i += workers {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("load-%d", i%n)}}
				patch := fmt.Appendf(nil, `{"data":{"n":"%d"}}`, i)
				if err := c.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch)); err != nil {
					if ctx.Err() != nil {
						return
					}
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		}()
	}
	return func() (float64, int64) {
		cancel()
		wg.Wait()
		return float64(done.Load()) / time.Since(start).Seconds(), failed.Load()
	}, nil
}
