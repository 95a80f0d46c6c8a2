package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/peers"
)

// Logs sets up logging for a test binary: with LOCKGUARD_KUBE_LOGS=1,
// controller-runtime logs in development mode and the returned writer (for
// Options.Logs) is standard error; otherwise both are silent.
func Logs() io.Writer {
	if os.Getenv("LOCKGUARD_KUBE_LOGS") == "1" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
		return os.Stderr
	}
	ctrl.SetLogger(logr.Discard())
	return nil
}

// Manager is lockguard's manager (cmd/lockguard/manager.New) running in this
// process against an Env: its webhook server on a LocalWebhook, its HTTPS
// metrics endpoint on a free loopback port.
type Manager struct {
	ctrl.Manager
	// Webhook is where the webhook server listens, with its certificate.
	Webhook *LocalWebhook
	// Metrics is host:port of the HTTPS metrics endpoint.
	Metrics string

	cancel context.CancelFunc
	done   chan error
}

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// Wrap, if set, wraps the transport of lockguard's API client, e.g. to
	// hold back watch events.
	Wrap transport.WrapperFunc
	// Controller are the reconcilers' options.
	Controller controller.Options
	// DisableReadOnlyGuard serves no update guard, as --read-only-guard=false
	// (the chart's mode policy, or guards.readOnly.enabled=false) does.
	DisableReadOnlyGuard bool
	// ProtectResources are the resources of other groups Locks can protect,
	// as --protect-resource (docs/contract.md rule 21); render the chart
	// with the same protect.resources (ProtectSet: the Manager's Webhook
	// renders it so).
	ProtectResources []schema.GroupResource
}

// ProtectSet returns the chart values (helm --set-json) that list grs in
// protect.resources, one entry per resource.
func ProtectSet(grs []schema.GroupResource) string {
	var entries []string
	for _, gr := range grs {
		entries = append(entries, fmt.Sprintf(`{"group":%q,"resources":[%q]}`, gr.Group, gr.Resource))
	}
	return "protect.resources=[" + strings.Join(entries, ",") + "]"
}

// StartManager starts lockguard's manager in-process and returns once its
// cache has synced and its webhook and metrics servers answer. It does not
// register the webhook with the API server (LocalWebhook.InstallChart
// does).
func (e *Env) StartManager(o ManagerOptions) (*Manager, error) {
	wh, err := NewLocalWebhook(e.Dir)
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	if len(o.ProtectResources) > 0 {
		wh.SetJSON = append(wh.SetJSON, ProtectSet(o.ProtectResources))
	}
	m := &Manager{Webhook: wh, Metrics: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan error, 1)}
	cfg := rest.CopyConfig(e.Config)
	// As the binary runs by default, not as the tests' clients do.
	cfg.QPS, cfg.Burst = manager.DefaultQPS, manager.DefaultBurst
	if o.Wrap != nil {
		cfg.Wrap(o.Wrap)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	if m.Manager, err = manager.New(ctx, cfg, manager.Options{
		WebhookHost:   wh.Host,
		WebhookPort:   wh.Port,
		CertDir:       wh.CertDir,
		MetricsAddr:   m.Metrics,
		MetricsSecure: true,
		Controller:    o.Controller,
		// As cmd/lockguard maps --read-only-guard.
		DisableReadOnlyGuard: o.DisableReadOnlyGuard,
		ProtectResources:     o.ProtectResources,
		// The only replica: the peer protocol's standalone mode.
		Peers: manager.PeerOptions{Standalone: true},
		// The webhook configuration of InstallChart, pointed at wh.
		CreateEntry: manager.CreateEntryOptions{Configuration: WebhookConfigurationName, Want: peers.Expectation{URL: "https://" + wh.Address()}},
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("building the manager: %w", err)
	}
	go func() { m.done <- m.Start(ctx) }()
	if err := m.waitServing(ctx); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

// waitServing waits for the cache and both servers.
func (m *Manager) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !m.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the manager's cache did not sync")
	}
	metrics := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer metrics.CloseIdleConnections()
	for _, check := range []struct {
		what string
		ok   func() error
	}{
		{"the webhook server", func() error { return m.GetWebhookServer().StartedChecker()(&http.Request{}) }},
		{"the metrics server", func() error {
			resp, err := metrics.Get("https://" + m.Metrics + "/metrics")
			if err == nil {
				resp.Body.Close()
			}
			return err
		}},
	} {
		for err := check.ok(); err != nil; err = check.ok() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s did not start: %w", check.what, err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Stop stops the manager and returns what its Start returned.
func (m *Manager) Stop() error {
	m.cancel()
	return <-m.done
}
