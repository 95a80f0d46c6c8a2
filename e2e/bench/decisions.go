package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/webhook"
)

// Modes of the decisions benchmark (issue 13), besides ModeNone and
// ModePolicy: the lockguard binary with its default flags and with
// --cache-only-decisions, and each candidate of the candidate server as
// "c-<candidate>".
const (
	ModeLockguard          = "lockguard"
	ModeLockguardCacheOnly = "lockguard-cache-only"
)

// CandidateMode is the decisions mode of candidate name.
func CandidateMode(name string) string { return "c-" + name }

// decideLabel labels the namespaces of the decisions benchmark with their
// mode; each webhook configuration and the policy select on it.
const decideLabel = "bench.lockguard.navique.com/decide"

// DecisionOptions size the decisions benchmark.
type DecisionOptions struct {
	// Ls are the numbers of other Locks in a namespace (issue 13: 0, 100,
	// 1000).
	Ls []int
	// Rounds of every (mode, L) cell; the order of modes rotates.
	Rounds int
	// Deletes per cell and round, by Clients closed-loop clients.
	Deletes int
	Clients int
	// Payload is the spec size of each Stack.
	Payload int
	// LoadRate is the background write rate (ConfigMap patches per
	// second in a namespace of their own), so that the Lock watch cache is
	// not trivially fresh.
	LoadRate float64
	// WindowIterations per mode of the window test (0: none).
	WindowIterations int
	// PacedRounds of the paced variant (0: none): every mode of PacedModes
	// at every L at once, requests cycling through the (mode, L) cells, at
	// PacedRate deletes per second in all, PacedDeletes per cell and round,
	// on PacedWorkers clients: latency at a load well below saturation,
	// with the noise hitting every mode alike.
	PacedRounds, PacedDeletes, PacedWorkers int
	PacedRate                               float64
	// PacedModes are the modes of the paced variant (those served).
	PacedModes []string
	// SkipServer skips the webhook-server load on the candidate server.
	SkipServer bool
	// Candidates served by the candidate server (list-fields is dropped
	// where selectableFields are not served); none: no candidate server.
	Candidates []string
	// WindowModes restricts the window test to these modes (default:
	// every webhook mode).
	WindowModes []string
	// NamespaceGuardLocks, when positive, also measures the namespace
	// guard of the default lockguard at that many Locks in a namespace
	// (nsguard.go), NamespaceGuardDeletes dry-run deletes of each case.
	NamespaceGuardLocks, NamespaceGuardDeletes int
}

// DecisionCell is one mode at one L.
type DecisionCell struct {
	Latency Latencies // every allowed delete of every round
	// Paced is the paced variant's latency (all rounds), PacedP99s and
	// PacedP50s its per-round quantiles, PacedErrors its refusals.
	Paced                Latencies
	PacedP99s, PacedP50s []time.Duration
	PacedErrors          int
	// Errors counts deletes of unlocked Stacks that were refused (the
	// webhook failed closed, or a timeout); FirstError is the first.
	Errors     int
	FirstError string
	Rates      []float64       // deletes per second, per round
	P99s       []time.Duration // p99, per round
	P50s       []time.Duration // p50, per round
}

// WindowCount is the outcome of a window test of one mode.
type WindowCount struct {
	// Denied counts denials naming the Lock, Errored refusals for another
	// reason (the webhook could not verify, a timeout).
	Iterations, Slipped, Denied, Errored int
	Latency                              Latencies // of the immediate deletes
	Create                               Latencies // of the Lock creates
}

// DecisionsResult is one run of the decisions benchmark on one version.
type DecisionsResult struct {
	Version string
	Options DecisionOptions
	// Modes in report order.
	Modes []string
	// Cells by mode and L.
	Cells map[string]map[int]*DecisionCell
	// SelectableFields tells whether the API server kept the Lock CRD's
	// selectableFields (1.31+ beta, 1.32 GA).
	SelectableFields bool
	// PolicyAPI is the ValidatingAdmissionPolicy version used: v1, or
	// v1beta1 behind its feature gate (1.29).
	PolicyAPI string
	// LoadRate is the background write rate achieved, LoadErrors its
	// failed writes.
	LoadRate   float64
	LoadErrors int64
	// Windows by mode.
	Windows map[string]*WindowCount
	// WindowModes in report order.
	WindowModes []string
	// PacedModes are the modes of the paced variant, in report order.
	PacedModes []string
	// Server is the webhook-server benchmark of the candidate server.
	Server *ServerRatios
	// NamespaceGuard is the namespace guard's decision time, if measured.
	NamespaceGuard *NamespaceGuardResult
	Took           time.Duration
}

// ServerRatios is the webhook-server benchmark (section 2's load) on the
// candidate server's paths, against a bare Go TLS server, round by round.
type ServerRatios struct {
	Paths []string
	// RPS by path (and "bare"), per round.
	RPS map[string][]float64
	// Errors by path.
	Errors map[string]int
}

// Ratio is the median over rounds of path's throughput over the bare
// server's in the same round.
func (s *ServerRatios) Ratio(path string) float64 {
	var xs []float64
	for i, r := range s.RPS[path] {
		if b := s.RPS["bare"][i]; b > 0 {
			xs = append(xs, r/b)
		}
	}
	return median(xs)
}

// Ratio returns the median over rounds of the per-round ratio of mode a's
// and mode b's p99 at L (same round, same L).
func (r *DecisionsResult) Ratio(a, b string, l int, stat func(c *DecisionCell, round int) float64) float64 {
	ca, cb := r.Cells[a][l], r.Cells[b][l]
	if ca == nil || cb == nil {
		return 0
	}
	var xs []float64
	for i := range min(len(ca.Rates), len(cb.Rates)) {
		if d := stat(cb, i); d > 0 {
			xs = append(xs, stat(ca, i)/d)
		}
	}
	return median(xs)
}

// P99Stat is a Ratio statistic: the cell's p99 in round.
func P99Stat(c *DecisionCell, round int) float64 { return float64(c.P99s[round]) }

// RateStat is a Ratio statistic: the cell's deletes per second in round.
func RateStat(c *DecisionCell, round int) float64 { return c.Rates[round] }

// MedianRate is the median over rounds of c's throughput.
func (c *DecisionCell) MedianRate() float64 { return median(slices.Clone(c.Rates)) }

// APIServerFlagsFor returns the kube-apiserver flags the decisions
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

// EnableSelectableFields adds SelectableFields to the Lock CRD and reports
// whether the API server kept them (it drops the field before 1.31, or
// with the CustomResourceFieldSelectors gate off), waiting until a list
// with such a field selector is served.
func (c *Cluster) EnableSelectableFields(ctx context.Context) (bool, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Client.Get(ctx, types.NamespacedName{Name: "locks.core.navique.com"}, crd); err != nil {
		return false, err
	}
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil {
		return false, err
	}
	var fields []any
	for _, p := range SelectableFields {
		fields = append(fields, map[string]any{"jsonPath": p})
	}
	for i := range versions {
		versions[i].(map[string]any)["selectableFields"] = fields
	}
	if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
		return false, err
	}
	if err := c.Client.Update(ctx, crd); err != nil {
		return false, err
	}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: "locks.core.navique.com"}, crd); err != nil {
		return false, err
	}
	versions, _, _ = unstructured.NestedSlice(crd.Object, "spec", "versions")
	if _, kept := versions[0].(map[string]any)["selectableFields"]; !kept {
		return false, nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var locks lockv1alpha1.LockList
		err := c.Client.List(ctx, &locks, client.InNamespace("default"), client.MatchingFields{"spec.targetRef.kind": "Stack", "spec.targetRef.name": "x"})
		if err == nil {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("selectableFields kept in the CRD but not served after a minute: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
// from lockguard's, calling url with CA ca, for the namespaces of mode.
func (c *Cluster) installWebhookFor(ctx context.Context, mode, url string, ca []byte) error {
	vwc, err := c.Webhook.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		return err
	}
	vwc.Name = "bench-" + mode
	vwc.Annotations = nil
	// The Lock CREATE entry (peers.AdmitPath) goes to a lockguard's own
	// path; the candidate server has none, and its modes keep theirs.
	lockguardMode := strings.HasSuffix(url, webhook.Path)
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return !lockguardMode && w.ClientConfig.URL != nil && strings.HasSuffix(*w.ClientConfig.URL, peers.AdmitPath)
	})
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		u := url
		if cc.URL != nil && strings.HasSuffix(*cc.URL, peers.AdmitPath) {
			u = strings.TrimSuffix(url, webhook.Path) + peers.AdmitPath
		}
		cc.URL, cc.Service, cc.CABundle = &u, nil, ca
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{decideLabel: mode}}
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
	vwc, err := c.Webhook.WebhookConfiguration(ctx)
	if err != nil {
		return nil, err
	}
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name != peers.CreateEntryName })
	if err := c.Client.Create(ctx, vwc); apierrors.IsAlreadyExists(err) {
		return func() {}, nil
	} else if err != nil {
		return nil, err
	}
	return func() { _ = c.Client.Delete(context.Background(), vwc) }, nil
}

// installIndexWebhook grants lockguard's ServiceAccount what CandIndex's
// record needs (ConfigMaps) and sends the Lock CREATEs of CandIndex's
// namespaces to the candidate server: failurePolicy Fail (a Lock that
// could not be recorded is not created), sideEffects NoneOnDryRun.
func (c *Cluster) installIndexWebhook(ctx context.Context, cs *CandidateServer) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-lockindex"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch"},
	}}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-lockindex"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: framework.ServiceAccountNamespace, Name: framework.ServiceAccountName}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, obj)); err != nil {
			return err
		}
	}
	url := cs.IndexURL()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-lockindex"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "create.lockindex.bench.lockguard.navique.com",
			AdmissionReviewVersions: []string{"v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: cs.Webhook.CA},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          ptr.To[int32](5),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{decideLabel: CandidateMode(CandIndex)}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{lockv1alpha1.Group}, APIVersions: []string{"*"},
					Resources: []string{"locks"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
		}},
	}
	return c.Client.Create(ctx, vwc)
}

// decideNS is the namespace of mode at l other Locks.
func decideNS(mode string, l int) string { return fmt.Sprintf("bd-%s-%d", mode, l) }

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

// BenchDecisions measures, side by side on one control plane, the latency
// and throughput of allowed DELETEs with no admission, the seed's policy,
// the lockguard binary (default flags and cache-only) and each candidate
// confirmation, in namespaces holding each of o.Ls other Locks, under a
// background write load; then the protection window of each webhook mode.
// lockguard is the path of the lockguard binary.
func (c *Cluster) BenchDecisions(ctx context.Context, lockguard string, o DecisionOptions, progress func(format string, args ...any)) (*DecisionsResult, error) {
	started := time.Now()
	res := &DecisionsResult{Version: c.Env.Version, Options: o, Cells: map[string]map[int]*DecisionCell{}, Windows: map[string]*WindowCount{}}
	var err error
	if res.SelectableFields, err = c.EnableSelectableFields(ctx); err != nil {
		return nil, err
	}
	cands := slices.DeleteFunc(slices.Clone(o.Candidates), func(n string) bool { return n == CandListFields && !res.SelectableFields })
	if res.PolicyAPI, err = c.policyAPI(); err != nil {
		return nil, err
	}

	what := "lockguard (default flags and --cache-only-decisions)"
	if len(cands) > 0 {
		what += " and the candidate server"
	}
	progress("starting %s", what)
	// Two replicas share the Lease; with the harness's short lease (4s)
	// a leader starved of CPU for seconds loses it and exits, so these
	// take longer ones.
	lease := []string{"--leader-election-lease-duration=60s", "--leader-election-renew-deadline=45s", "--leader-election-retry-period=5s"}
	alive := func() error { return nil }
	def, err := c.StartLockguardOn(c.Webhook, lockguard, lease...)
	if err != nil {
		return nil, err
	}
	defer def.Stop()
	cacheOnlyWH, err := framework.NewLocalWebhook(c.Env.Dir)
	if err != nil {
		return nil, err
	}
	cacheOnly, err := c.StartLockguardOn(cacheOnlyWH, lockguard, append(lease, "--cache-only-decisions=true")...)
	if err != nil {
		return nil, err
	}
	defer cacheOnly.Stop()
	// def is warm only while the Lock-create entry of the chart's
	// configuration calls it (internal/peers); the chart's configuration
	// is not installed here, so the bench installs that entry alone.
	removeEntry, err := c.installCreateEntry(ctx)
	if err != nil {
		return nil, err
	}
	defer removeEntry()
	alive = func() error {
		for _, lg := range []*Lockguard{def, cacheOnly} {
			if err := lg.ExitError(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, lg := range []*Lockguard{def, cacheOnly} {
		if _, err := lg.WaitReady(ctx); err != nil {
			return nil, err
		}
		if err := lg.WaitWarm(ctx); err != nil {
			return nil, err
		}
	}
	var cs *CandidateServer
	if len(cands) > 0 {
		if cs, err = c.StartCandidates(ctx, cands); err != nil {
			return nil, err
		}
		defer cs.Stop()
	}

	res.Modes = []string{ModeNone}
	if res.PolicyAPI != "" {
		res.Modes = append(res.Modes, ModePolicy)
	}
	res.Modes = append(res.Modes, ModeLockguard, ModeLockguardCacheOnly)
	for _, n := range cands {
		res.Modes = append(res.Modes, CandidateMode(n))
	}
	webhookModes := slices.DeleteFunc(slices.Clone(res.Modes), func(m string) bool { return m == ModeNone || m == ModePolicy })
	for _, m := range webhookModes {
		var url string
		var ca []byte
		switch m {
		case ModeLockguard:
			url, ca = "https://"+c.Webhook.Address()+"/validate-delete", c.Webhook.CA
		case ModeLockguardCacheOnly:
			url, ca = "https://"+cacheOnlyWH.Address()+"/validate-delete", cacheOnlyWH.CA
		default:
			url, ca = cs.URL(strings.TrimPrefix(m, "c-")), cs.Webhook.CA
		}
		if err := c.installWebhookFor(ctx, m, url, ca); err != nil {
			return nil, err
		}
	}
	if slices.Contains(cands, CandIndex) {
		if err := c.installIndexWebhook(ctx, cs); err != nil {
			return nil, err
		}
	}
	if res.PolicyAPI != "" {
		if err := c.createPolicy(ctx, res.PolicyAPI, &metav1.LabelSelector{MatchLabels: map[string]string{decideLabel: ModePolicy}}); err != nil {
			return nil, err
		}
	}

	// Namespaces: L other Locks (targets that do not exist) and a locked
	// sentinel Stack each, to check the mode is in effect.
	progress("creating %d namespaces and their Locks", len(res.Modes)*len(o.Ls))
	total := 0
	for _, m := range res.Modes {
		res.Cells[m] = map[int]*DecisionCell{}
		for _, l := range o.Ls {
			res.Cells[m][l] = &DecisionCell{}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: decideNS(m, l), Labels: map[string]string{decideLabel: m}}}
			if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, ns)); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, l, 16, func(i int) client.Object {
				return BenchLock(ns.Name, fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d", i))
			}); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, 1, 1, func(int) client.Object { return Stack(ns.Name, "locked-0", o.Payload) }); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, 1, 1, func(int) client.Object {
				return BenchLock(ns.Name, DerivedLockName("Stack", "locked-0"), "locked-0")
			}); err != nil {
				return nil, err
			}
			total += l + 1
		}
	}
	progress("waiting until lockguard has written the status of %d Locks", total)
	if err := waitSettled(ctx, total, def, cacheOnly); err != nil {
		return nil, err
	}
	for _, m := range res.Modes {
		want := m
		if want != ModeNone && want != ModePolicy {
			want = ModeWebhook
		}
		for _, l := range o.Ls {
			if err := waitMode(ctx, c.Client, want, Stack(decideNS(m, l), "locked-0", 0)); err != nil {
				return nil, fmt.Errorf("mode %s, L=%d: %w", m, l, err)
			}
		}
	}

	stopLoad, err := c.BackgroundLoad(ctx, o.LoadRate)
	if err != nil {
		return nil, err
	}
	loadStopped := false
	defer func() {
		if !loadStopped {
			stopLoad()
		}
	}()
	clients, err := c.clients(o.Clients)
	if err != nil {
		return nil, err
	}
	for round := range o.Rounds {
		progress("closed-loop round %d of %d: creating %d Stacks", round+1, o.Rounds, len(res.Modes)*len(o.Ls)*o.Deletes)
		name := func(i int) string { return fmt.Sprintf("r%d-%d", round, i) }
		for _, m := range res.Modes {
			for _, l := range o.Ls {
				if err := c.CreateAll(ctx, o.Deletes, 16, func(i int) client.Object { return Stack(decideNS(m, l), name(i), o.Payload) }); err != nil {
					return nil, err
				}
			}
		}
		for k := range o.Ls {
			l := o.Ls[(k+round)%len(o.Ls)]
			for j := range res.Modes {
				m := res.Modes[(j+round)%len(res.Modes)]
				ns := decideNS(m, l)
				var lat Latencies
				cell := res.Cells[m][l]
				var mu sync.Mutex
				start := time.Now()
				if err := Parallel(ctx, o.Deletes, o.Clients, func(ctx context.Context, i int) error {
					t := time.Now()
					err := clients[i%len(clients)].Delete(ctx, Stack(ns, name(i), 0))
					lat.Add(time.Since(t))
					if err != nil {
						mu.Lock()
						if cell.Errors++; cell.FirstError == "" {
							cell.FirstError = err.Error()
						}
						mu.Unlock()
					}
					return ctx.Err()
				}); err != nil {
					return nil, err
				}
				if err := alive(); err != nil {
					return nil, fmt.Errorf("mode %s, L=%d, round %d: %w", m, l, round, err)
				}
				cell.Rates = append(cell.Rates, float64(o.Deletes)/time.Since(start).Seconds())
				cell.P99s = append(cell.P99s, lat.Quantile(0.99))
				cell.P50s = append(cell.P50s, lat.Quantile(0.5))
				cell.Latency.Merge(&lat)
			}
		}
	}

	if o.PacedRounds > 0 {
		for _, m := range o.PacedModes {
			if _, served := res.Cells[m]; served {
				res.PacedModes = append(res.PacedModes, m)
			}
		}
		if err := c.benchPaced(ctx, res, o, clientsFor(clients, o.PacedWorkers, c), progress); err != nil {
			return nil, err
		}
		if err := alive(); err != nil {
			return nil, fmt.Errorf("after the paced variant: %w", err)
		}
	}
	if o.WindowIterations > 0 {
		res.WindowModes = webhookModes
		if len(o.WindowModes) > 0 {
			res.WindowModes = slices.DeleteFunc(slices.Clone(webhookModes), func(m string) bool { return !slices.Contains(o.WindowModes, m) })
		}
		progress("protection window: %d iterations of each of %d modes, interleaved", o.WindowIterations, len(res.WindowModes))
		if err := c.benchWindows(ctx, res, o.WindowIterations); err != nil {
			return nil, err
		}
		if err := alive(); err != nil {
			return nil, fmt.Errorf("after the window test: %w", err)
		}
	}
	if o.NamespaceGuardLocks > 0 {
		progress("namespace guard: %d Locks in a namespace, %d dry-run deletes of each case", o.NamespaceGuardLocks, o.NamespaceGuardDeletes)
		if res.NamespaceGuard, err = c.benchNamespaceGuard(ctx, c.Webhook, o.NamespaceGuardLocks, o.NamespaceGuardDeletes); err != nil {
			return nil, fmt.Errorf("namespace guard: %w", err)
		}
		if err := alive(); err != nil {
			return nil, fmt.Errorf("after the namespace guard: %w", err)
		}
	}
	res.LoadRate, res.LoadErrors = stopLoad()
	loadStopped = true
	if !o.SkipServer && cs != nil {
		progress("webhook server: candidate paths against a bare TLS server")
		if res.Server, err = c.benchCandidateServer(ctx, cs, cands); err != nil {
			return nil, err
		}
	}
	res.Took = time.Since(started)
	return res, nil
}

// benchCandidateServer runs section 2's closed loop (16 connections, a
// review of an unlocked Stack) against the candidate server's paths and a
// bare TLS server with the same certificate, alternating round by round.
func (c *Cluster) benchCandidateServer(ctx context.Context, cs *CandidateServer, cands []string) (*ServerRatios, error) {
	body, err := ReviewBody("bench-webhook", "unlocked", 2048)
	if err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	bare, err := StartBare(fmt.Sprintf("127.0.0.1:%d", port), cs.Webhook.CertDir)
	if err != nil {
		return nil, err
	}
	defer bare.Stop()
	const conns, rounds, roundTime = 16, 3, 3 * time.Second
	hc := LoadClient(cs.Webhook.CA, conns)
	urls := map[string]string{"bare": "https://" + bare.Addr + "/validate-delete"}
	res := &ServerRatios{RPS: map[string][]float64{}, Errors: map[string]int{}}
	for _, n := range []string{CandCacheOnly, CandGet, CandIndex, CandListCoalesced, CandList} {
		if slices.Contains(cands, n) {
			res.Paths = append(res.Paths, n)
			urls[n] = cs.URL(n)
		}
	}
	order := append([]string{"bare"}, res.Paths...)
	for _, p := range order {
		ClosedLoop(ctx, hc, urls[p], body, conns, 300*time.Millisecond) // warm up
	}
	for round := range rounds {
		for j := range order {
			p := order[(j+round)%len(order)]
			r := ClosedLoop(ctx, hc, urls[p], body, conns, roundTime)
			res.RPS[p] = append(res.RPS[p], r.Throughput())
			res.Errors[p] += r.Errors
		}
	}
	return res, nil
}

// clientsFor returns n clients: those of have, then new ones.
func clientsFor(have []client.Client, n int, c *Cluster) func() ([]client.Client, error) {
	return func() ([]client.Client, error) {
		if n <= len(have) {
			return have[:n], nil
		}
		more, err := c.clients(n - len(have))
		return append(slices.Clone(have), more...), err
	}
}

// benchPaced runs the paced variant: every (mode, L) cell of
// res.PacedModes at once, request i going to cell i mod cells (rotated per
// round), o.PacedRate deletes per second in all.
func (c *Cluster) benchPaced(ctx context.Context, res *DecisionsResult, o DecisionOptions, newClients func() ([]client.Client, error), progress func(format string, args ...any)) error {
	clients, err := newClients()
	if err != nil {
		return err
	}
	type cell struct {
		m string
		l int
	}
	var cells []cell
	for _, m := range res.PacedModes {
		for _, l := range o.Ls {
			cells = append(cells, cell{m, l})
		}
	}
	for round := range o.PacedRounds {
		progress("paced round %d of %d: %d cells, %d deletes each, %.0f/s in all", round+1, o.PacedRounds, len(cells), o.PacedDeletes, o.PacedRate)
		name := func(i int) string { return fmt.Sprintf("p%d-%d", round, i/len(cells)) }
		at := func(i int) cell { return cells[(i+round)%len(cells)] }
		n := o.PacedDeletes * len(cells)
		if err := c.CreateAll(ctx, n, 16, func(i int) client.Object { k := at(i); return Stack(decideNS(k.m, k.l), name(i), o.Payload) }); err != nil {
			return err
		}
		lat := map[cell]*Latencies{}
		for _, k := range cells {
			lat[k] = &Latencies{}
		}
		time.Sleep(2 * time.Second) // let the creates' aftermath (lockguard's target events) pass
		var mu sync.Mutex
		if err := Paced(ctx, n, len(clients), o.PacedRate, func(ctx context.Context, i int) error {
			k := at(i)
			t := time.Now()
			err := clients[i%len(clients)].Delete(ctx, Stack(decideNS(k.m, k.l), name(i), 0))
			lat[k].Add(time.Since(t))
			if err != nil {
				mu.Lock()
				res.Cells[k.m][k.l].PacedErrors++
				mu.Unlock()
			}
			return ctx.Err()
		}); err != nil {
			return err
		}
		for _, k := range cells {
			dc := res.Cells[k.m][k.l]
			dc.Paced.Merge(lat[k])
			dc.PacedP99s = append(dc.PacedP99s, lat[k].Quantile(0.99))
			dc.PacedP50s = append(dc.PacedP50s, lat[k].Quantile(0.5))
		}
	}
	return nil
}

// PacedRatio returns the median over paced rounds of the ratio of mode a's
// and mode b's quantile q (0.5 or 0.99) at L.
func (r *DecisionsResult) PacedRatio(a, b string, l int, q float64) float64 {
	ca, cb := r.Cells[a][l], r.Cells[b][l]
	if ca == nil || cb == nil {
		return 0
	}
	pick := func(c *DecisionCell) []time.Duration {
		if q == 0.5 {
			return c.PacedP50s
		}
		return c.PacedP99s
	}
	xa, xb := pick(ca), pick(cb)
	var xs []float64
	for i := range min(len(xa), len(xb)) {
		if xb[i] > 0 {
			xs = append(xs, float64(xa[i])/float64(xb[i]))
		}
	}
	return median(xs)
}

// waitSettled waits until every lockguard's cache holds at least total
// Locks, none of them pending (status not written).
func waitSettled(ctx context.Context, total int, lgs ...*Lockguard) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		ok := true
		var last string
		for _, lg := range lgs {
			m, err := lg.Metrics()
			if err != nil {
				return err
			}
			n, pending := 0.0, m[`lockguard_locks{state="pending"}`]
			for k, v := range m {
				if strings.HasPrefix(k, "lockguard_locks{") {
					n += v
				}
			}
			if int(n) < total || pending > 0 {
				ok = false
				last = fmt.Sprintf("%v Locks cached, %v pending", n, pending)
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lockguard not settled after 10 minutes: %s of %d", last, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// benchWindows runs the window test of every mode in res.WindowModes,
// interleaved: iteration i creates a Lock on Stack w-<i> of each mode's
// window namespace, in a rotating order, and deletes the Stack as soon as
// the create returns. A delete that succeeds slipped through.
func (c *Cluster) benchWindows(ctx context.Context, res *DecisionsResult, n int) error {
	for _, m := range res.WindowModes {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: windowNS(m), Labels: map[string]string{decideLabel: m}}}
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, ns)); err != nil {
			return err
		}
		if err := c.CreateAll(ctx, n, 16, func(i int) client.Object { return Stack(ns.Name, fmt.Sprintf("w-%d", i), 256) }); err != nil {
			return err
		}
		res.Windows[m] = &WindowCount{}
	}
	clients, err := c.clients(1)
	if err != nil {
		return err
	}
	cl := clients[0]
	for i := range n {
		for j := range res.WindowModes {
			m := res.WindowModes[(i+j)%len(res.WindowModes)]
			ns, target := windowNS(m), fmt.Sprintf("w-%d", i)
			lockName := "protect-" + target
			if DerivedNames(strings.TrimPrefix(m, "c-")) {
				lockName = DerivedLockName("Stack", target)
			}
			w := res.Windows[m]
			start := time.Now()
			if err := cl.Create(ctx, BenchLock(ns, lockName, target)); err != nil {
				return fmt.Errorf("window %s: creating a Lock on %s: %w", m, target, err)
			}
			w.Create.Add(time.Since(start))
			start = time.Now()
			err := cl.Delete(ctx, Stack(ns, target, 0))
			w.Latency.Add(time.Since(start))
			w.Iterations++
			switch {
			case err == nil:
				w.Slipped++
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "resource is protected by Lock(s) ["+lockName+"]"):
				w.Denied++
			default:
				w.Errored++
			}
		}
	}
	return nil
}
