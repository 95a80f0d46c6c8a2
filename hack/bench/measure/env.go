package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// StackGVK is the target kind of the benchmarks (a sample CRD from
// e2e/testdata/crds).
var StackGVK = framework.StackGVK

// Cluster is a control plane set up for lockguard: the Lock and test CRDs,
// lockguard's RBAC, and a kubeconfig for its ServiceAccount.
type Cluster struct {
	Env    *framework.Env
	Root   string
	Scheme *runtime.Scheme
	// Config is an admin configuration without client-side rate limits.
	Config *rest.Config
	// Client uses Config.
	Client client.Client
	// LockguardKubeconfig authenticates as lockguard's ServiceAccount.
	LockguardKubeconfig string
	// Webhook is the address and certificate lockguard serves on, kept
	// across restarts so that the webhook configuration stays valid.
	Webhook *framework.LocalWebhook
	// Logs receives the control plane's and lockguard's output.
	Logs io.Writer
	// LockguardArgs are extra flags for every lockguard started.
	LockguardArgs []string
	// LockguardEnv are extra environment variables of every lockguard
	// started ("NAME=value").
	LockguardEnv []string
}

// StartCluster starts etcd and kube-apiserver and installs what lockguard
// needs. Stop it with Stop.
func StartCluster(ctx context.Context, logs io.Writer) (*Cluster, error) {
	return StartClusterWith(ctx, logs, "", nil)
}

// StartClusterWith is StartCluster for Kubernetes version (empty:
// framework.Version()) with extra kube-apiserver flags (name without the
// dashes, value).
func StartClusterWith(ctx context.Context, logs io.Writer, version string, apiServerFlags map[string]string) (*Cluster, error) {
	return StartClusterOptions(ctx, framework.Options{Version: version, Logs: logs, APIServerFlags: apiServerFlags})
}

// StartClusterOptions is StartCluster with the control plane o says (its
// CRDDirs are the repository's).
func StartClusterOptions(ctx context.Context, o framework.Options) (*Cluster, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, err
	}
	logs := o.Logs
	o.CRDDirs = framework.CRDDirs(root)
	env, err := framework.Start(o)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env, Root: root, Logs: logs}
	if err := c.setup(ctx); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) setup(ctx context.Context) error {
	var err error
	if c.Scheme, err = manager.NewScheme(); err != nil {
		return err
	}
	c.Config = Unthrottled(c.Env.Config)
	if c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme}); err != nil {
		return err
	}
	if c.Webhook, err = framework.NewLocalWebhook(c.Env.Dir); err != nil {
		return err
	}
	// The chart's RBAC (and its webhook configuration, removed until a
	// benchmark installs it).
	if _, err := c.Webhook.InstallChart(ctx, c.Client); err != nil {
		return err
	}
	if err := c.UninstallWebhook(ctx); err != nil {
		return err
	}
	sa, err := c.Env.ServiceAccountConfig()
	if err != nil {
		return err
	}
	c.LockguardKubeconfig = filepath.Join(c.Env.Dir, "lockguard.kubeconfig")
	return framework.WriteKubeconfig(sa, c.LockguardKubeconfig)
}

// Stop stops the control plane.
func (c *Cluster) Stop() error { return c.Env.Stop() }

// Unthrottled returns a copy of cfg without client-side rate limiting: the
// benchmarks' own clients must not be the bottleneck.
func Unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.RateLimiter = nil
	return cfg
}

// InstallWebhook installs the chart's ValidatingWebhookConfiguration,
// pointing at c.Webhook.
func (c *Cluster) InstallWebhook(ctx context.Context) error {
	_, err := c.Webhook.InstallChart(ctx, c.Client)
	return err
}

// UninstallWebhook deletes lockguard's ValidatingWebhookConfiguration.
func (c *Cluster) UninstallWebhook(ctx context.Context) error {
	vwc, err := c.Webhook.WebhookConfiguration(ctx)
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Client.Delete(ctx, vwc))
}

// ReplaceWebhook puts vwc in place of lockguard's
// ValidatingWebhookConfiguration (vwc has its name): an update of the one
// installed, or a create when there is none, never a delete, so that a
// Lock-create entry both carry as the chart renders it never goes
// missing. A replica in the default mode is warm only while that entry
// is as the chart renders it, and cold for its pending TTL (2 min) after
// it comes back (internal/peers' entry watch): a section that deleted the
// configuration measured a replica confirming every allowed delete (make
// bench at ebc4186, section 3: p50 138.6 ms).
func (c *Cluster) ReplaceWebhook(ctx context.Context, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	var cur admissionregistrationv1.ValidatingWebhookConfiguration
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(vwc), &cur)
	if apierrors.IsNotFound(err) {
		return c.Client.Create(ctx, vwc)
	}
	if err != nil {
		return err
	}
	vwc.ResourceVersion = cur.ResourceVersion
	return c.Client.Update(ctx, vwc)
}

// CreateEntryConfiguration is lockguard's ValidatingWebhookConfiguration
// with its Lock-create entry alone: what keeps a default-mode replica warm
// while no other entry calls it.
func (c *Cluster) CreateEntryConfiguration(ctx context.Context) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	vwc, err := c.Webhook.WebhookConfiguration(ctx)
	if err != nil {
		return nil, err
	}
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name != peers.CreateEntryName })
	return vwc, nil
}

// CreateNamespace creates a namespace (if it does not exist).
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	return client.IgnoreAlreadyExists(c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
}

// Stack returns a Stack ns/name with a spec of about payload bytes.
func Stack(ns, name string, payload int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(StackGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.Object["spec"] = map[string]any{"environment": "production", "payload": fmt.Sprintf("%0*d", payload, 0)}
	return u
}

// LockOn returns a Lock ns/name on Stack target.
func LockOn(ns, name, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lockv1alpha1.LockSpec{
			TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: target},
			Reason:    "Production environment - remove this Lock deliberately before deleting.",
		},
	}
}

// Parallel calls fn(i) for i in [0, n) on workers goroutines, and returns
// the first error (after every started call has returned).
func Parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// Paced calls fn(i) for i in [0, n) on workers goroutines, starting call
// i at i/rate seconds (or as soon as a worker is free, when behind);
// rate 0 means as fast as the workers go.
func Paced(ctx context.Context, n, workers int, rate float64, fn func(ctx context.Context, i int) error) error {
	if rate <= 0 {
		return Parallel(ctx, n, workers, fn)
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	return Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		return fn(ctx, i)
	})
}

// retry calls fn until it succeeds, for errors the API server may return
// under load (timeouts, throttling, conflicts), at most 10 times.
func retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range 10 {
		if err = fn(); err == nil {
			return nil
		}
		if !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) && !apierrors.IsTooManyRequests(err) &&
			!apierrors.IsConflict(err) && !apierrors.IsInternalError(err) && !apierrors.IsServiceUnavailable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 50 * time.Millisecond):
		}
	}
	return err
}

// CreateAll creates n objects made by obj(i), on workers goroutines,
// ignoring AlreadyExists.
func (c *Cluster) CreateAll(ctx context.Context, n, workers int, obj func(i int) client.Object) error {
	return Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		o := obj(i)
		return retry(ctx, func() error { return client.IgnoreAlreadyExists(c.Client.Create(ctx, o)) })
	})
}

// DeleteAll deletes n objects made by obj(i), ignoring NotFound.
func (c *Cluster) DeleteAll(ctx context.Context, n, workers int, obj func(i int) client.Object) error {
	return Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		o := obj(i)
		return retry(ctx, func() error { return client.IgnoreNotFound(c.Client.Delete(ctx, o)) })
	})
}
