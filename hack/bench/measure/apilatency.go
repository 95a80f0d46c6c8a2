package measure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// Admission modes of the API latency benchmark.
const (
	ModeNone    = "none"    // no admission for core.navique.com deletes
	ModePolicy  = "policy"  // the seed's ValidatingAdmissionPolicy on the annotation
	ModeWebhook = "webhook" // lockguard's webhook
)

// APIModes are the modes in the order they are reported.
var APIModes = []string{ModeNone, ModePolicy, ModeWebhook}

// policyName names the ValidatingAdmissionPolicy and its binding.
const policyName = "lockguard-locked"

// LockedPolicy returns the seed's ValidatingAdmissionPolicy and its
// binding, as the chart installs them: the API server denies the DELETE of
// a core.navique.com object (other than a Lock) whose
// core.navique.com/locked annotation is not empty.
//
// A non-nil nsSelector restricts the policy to the namespaces it selects.
func LockedPolicy(nsSelector *metav1.LabelSelector) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: nsSelector,
				MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{lockv1alpha1.Group}, APIVersions: []string{"*"}, Resources: []string{"*"},
							Scope: ptr.To(admissionregistrationv1.NamespacedScope),
						},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "not-a-lock", Expression: "request.resource.resource != 'locks'"}},
			Variables: []admissionregistrationv1.Variable{{
				Name: "locked",
				Expression: "has(oldObject.metadata.annotations) && 'core.navique.com/locked' in oldObject.metadata.annotations" +
					" ? oldObject.metadata.annotations['core.navique.com/locked'] : ''",
			}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "variables.locked == ''",
				MessageExpression: "'resource is protected by Lock(s) [' + variables.locked.replace(',', ' ') + ']; delete the Lock(s) before deleting this resource'",
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policyName},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policyName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

// SetMode installs the admission of mode (and removes the others), then
// waits until a dry-run delete of sentinel (a locked Stack) gets the
// answer of that mode five times in a row.
func (c *Cluster) SetMode(ctx context.Context, mode string, sentinel client.Object) error {
	policy, binding := LockedPolicy(nil)
	if mode != ModePolicy {
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, binding)); err != nil {
			return err
		}
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, policy)); err != nil {
			return err
		}
	}
	if mode != ModeWebhook {
		// The Lock-create entry stays (ReplaceWebhook); it sends no
		// delete to lockguard.
		vwc, err := c.CreateEntryConfiguration(ctx)
		if err != nil {
			return err
		}
		if err := c.ReplaceWebhook(ctx, vwc); err != nil {
			return err
		}
	}
	switch mode {
	case ModePolicy:
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, policy)); err != nil {
			return err
		}
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, binding)); err != nil {
			return err
		}
	case ModeWebhook:
		if err := c.InstallWebhook(ctx); err != nil {
			return err
		}
	}
	return waitMode(ctx, c.Client, mode, sentinel)
}

// waitMode waits until a dry-run delete of sentinel (a locked Stack) gets
// the answer of mode five times in a row.
func waitMode(ctx context.Context, c client.Client, mode string, sentinel client.Object) error {
	want := func(err error) bool {
		switch mode {
		case ModePolicy:
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
		case ModeWebhook:
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `admission webhook "delete.lockguard.core.navique.com" denied`)
		default:
			return err == nil
		}
	}
	deadline := time.Now().Add(time.Minute)
	for ok := 0; ok < 5; {
		err := c.Delete(ctx, sentinel, client.DryRunAll)
		if want(err) {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			return fmt.Errorf("admission mode %s not in effect after a minute: a dry-run delete of %s returned %v", mode, client.ObjectKeyFromObject(sentinel), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// APILatencyOptions size the API latency benchmark.
type APILatencyOptions struct {
	Rounds           int // paced interleaved rounds
	SequentialRounds int // sequential rounds
	DeletesPerRound  int // unlocked deletes per mode and round
	DeniedPerRound   int // deletes of locked objects per denying mode and round
	Clients          int // concurrent clients, each with its own connection
	Payload          int // spec bytes of each Stack
}

// APILatencies are the latencies of one variant, by mode.
type APILatencies struct {
	Allowed map[string]*Latencies // deletes of unlocked Stacks
	Denied  map[string]*Latencies // deletes of locked Stacks (policy and webhook)
	// RoundP99 holds each round's p99 of allowed deletes, by mode.
	RoundP99 map[string][]time.Duration
	// CPUPerDelete is the CPU time etcd, kube-apiserver and lockguard used
	// per allowed delete, by mode and process (sequential variant only).
	CPUPerDelete map[string]map[string]time.Duration
}

func newAPILatencies() *APILatencies {
	l := &APILatencies{Allowed: map[string]*Latencies{}, Denied: map[string]*Latencies{},
		RoundP99: map[string][]time.Duration{}, CPUPerDelete: map[string]map[string]time.Duration{}}
	for _, m := range APIModes {
		l.Allowed[m], l.Denied[m] = &Latencies{}, &Latencies{}
		l.CPUPerDelete[m] = map[string]time.Duration{}
	}
	return l
}

// APILatencyResult holds both variants of the API latency benchmark.
type APILatencyResult struct {
	Options APILatencyOptions
	// Interleaved: the three modes at once, each scoped to its own
	// namespace by a namespace selector; the clients cycle through the
	// modes request by request, so that noise hits them alike. Paced at
	// PacedRate deletes per second, half of Saturated's throughput.
	Interleaved *APILatencies
	// Saturated is Interleaved's first round, as fast as the clients go.
	Saturated *APILatencies
	// SaturatedRate is Saturated's throughput (deletes per second).
	SaturatedRate, PacedRate float64
	// Sequential: one mode at a time for the whole control plane, in
	// rounds with a rotating order of modes.
	Sequential *APILatencies
}

// clients returns n clients of the admin configuration, each with its own
// connection (client-go would otherwise share one HTTP/2 connection).
func (c *Cluster) clients(n int) ([]client.Client, error) {
	out := make([]client.Client, n)
	for i := range out {
		cfg := Unthrottled(c.Config)
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
		if err != nil {
			return nil, err
		}
		out[i] = cl
	}
	return out, nil
}

// benchModeLabel labels the namespaces of the interleaved variant.
const benchModeLabel = "bench.lockguard.navique.com/mode"

// lockedStacks creates n Stacks locked-<i> with a Lock each in ns, and
// waits until the Locks are active.
func (c *Cluster) lockedStacks(ctx context.Context, ns string, n, payload int) error {
	if err := c.CreateAll(ctx, n, 16, func(i int) client.Object { return Stack(ns, fmt.Sprintf("locked-%d", i), payload) }); err != nil {
		return err
	}
	if err := c.CreateAll(ctx, n, 16, func(i int) client.Object {
		return LockOn(ns, fmt.Sprintf("locked-%d", i), fmt.Sprintf("locked-%d", i))
	}); err != nil {
		return err
	}
	return c.WaitLocksActive(ctx, ns, n, time.Minute)
}

// BenchAPILatency measures DELETE latency through the API server with each
// admission mode, lockguard running throughout: first interleaved, then
// sequential. It leaves lockguard's webhook installed for all namespaces.
func (c *Cluster) BenchAPILatency(ctx context.Context, o APILatencyOptions) (*APILatencyResult, error) {
	clients, err := c.clients(o.Clients)
	if err != nil {
		return nil, err
	}
	res := &APILatencyResult{Options: o}
	if err = c.benchInterleaved(ctx, o, clients, res); err != nil {
		return nil, fmt.Errorf("interleaved: %w", err)
	}
	if res.Sequential, err = c.benchSequential(ctx, o, clients); err != nil {
		return nil, fmt.Errorf("sequential: %w", err)
	}
	return res, nil
}

// benchInterleaved runs the three modes at once in three namespaces: one
// round as fast as the clients go, then o.Rounds at half that rate.
func (c *Cluster) benchInterleaved(ctx context.Context, o APILatencyOptions, clients []client.Client, out *APILatencyResult) error {
	nsOf := func(mode string) string { return "bench-api-" + mode }
	locked := max(o.Clients, 1)
	for _, mode := range APIModes {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsOf(mode), Labels: map[string]string{benchModeLabel: mode}}}
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, ns)); err != nil {
			return err
		}
		if err := c.lockedStacks(ctx, nsOf(mode), locked, o.Payload); err != nil {
			return err
		}
	}
	// The policy for the policy namespace, the webhook for the webhook one.
	policy, binding := LockedPolicy(&metav1.LabelSelector{MatchLabels: map[string]string{benchModeLabel: ModePolicy}})
	for _, obj := range []client.Object{policy, binding} {
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, obj)); err != nil {
			return err
		}
	}
	vwc, err := c.Webhook.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		if vwc.Webhooks[i].Name != peers.CreateEntryName { // as the chart renders it: see ReplaceWebhook
			vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{benchModeLabel: ModeWebhook}}
		}
	}
	if err := c.ReplaceWebhook(ctx, vwc); err != nil {
		return err
	}
	// Each namespace answers as its mode says.
	for _, mode := range APIModes {
		if err := waitMode(ctx, c.Client, mode, Stack(nsOf(mode), "locked-0", 0)); err != nil {
			return err
		}
	}

	out.Saturated, out.Interleaved = newAPILatencies(), newAPILatencies()
	for round := range o.Rounds + 1 {
		res, rate := out.Interleaved, out.PacedRate
		if round == 0 {
			res, rate = out.Saturated, 0
		}
		name := func(i int) string { return fmt.Sprintf("i%d-%d", round, i/len(APIModes)) }
		mode := func(i int) string { return APIModes[(i+round)%len(APIModes)] }
		n := o.DeletesPerRound * len(APIModes)
		if err := c.CreateAll(ctx, n, o.Clients, func(i int) client.Object { return Stack(nsOf(mode(i)), name(i), o.Payload) }); err != nil {
			return err
		}
		lat := map[string]*Latencies{}
		for _, m := range APIModes {
			lat[m] = &Latencies{}
		}
		start := time.Now()
		if err := Paced(ctx, n, o.Clients, rate, func(ctx context.Context, i int) error {
			cl := clients[i%len(clients)]
			start := time.Now()
			err := cl.Delete(ctx, Stack(nsOf(mode(i)), name(i), 0))
			lat[mode(i)].Add(time.Since(start))
			if err != nil {
				return fmt.Errorf("mode %s: deleting unlocked Stack %s: %w", mode(i), name(i), err)
			}
			return nil
		}); err != nil {
			return err
		}
		if round == 0 {
			out.SaturatedRate = float64(n) / time.Since(start).Seconds()
			out.PacedRate = out.SaturatedRate / 2
		}
		for _, m := range APIModes {
			res.Allowed[m].Merge(lat[m])
			res.RoundP99[m] = append(res.RoundP99[m], lat[m].Quantile(0.99))
		}
		denying := []string{ModePolicy, ModeWebhook}
		if err := Paced(ctx, o.DeniedPerRound*len(denying), o.Clients, rate, func(ctx context.Context, i int) error {
			m := denying[i%len(denying)]
			cl := clients[i%len(clients)]
			start := time.Now()
			err := cl.Delete(ctx, Stack(nsOf(m), fmt.Sprintf("locked-%d", (i/len(denying))%locked), 0))
			res.Denied[m].Add(time.Since(start))
			if !apierrors.IsForbidden(err) {
				return fmt.Errorf("mode %s: deleting a locked Stack: %v, want Forbidden", m, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	for _, obj := range []client.Object{binding, policy} {
		if err := client.IgnoreNotFound(c.Client.Delete(ctx, obj)); err != nil {
			return err
		}
	}
	return nil
}

// benchSequential runs one mode at a time, in rounds.
func (c *Cluster) benchSequential(ctx context.Context, o APILatencyOptions, clients []client.Client) (*APILatencies, error) {
	const ns = "bench-api"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	locked := max(o.Clients, 1)
	if err := c.lockedStacks(ctx, ns, locked, o.Payload); err != nil {
		return nil, err
	}
	sentinel := Stack(ns, "locked-0", 0)
	res := newAPILatencies()
	for round := range o.SequentialRounds {
		for k := range APIModes {
			mode := APIModes[(round+k)%len(APIModes)]
			name := func(i int) string { return fmt.Sprintf("r%d-%s-%d", round, mode, i) }
			if err := c.CreateAll(ctx, o.DeletesPerRound, o.Clients, func(i int) client.Object { return Stack(ns, name(i), o.Payload) }); err != nil {
				return nil, err
			}
			if err := c.SetMode(ctx, mode, sentinel); err != nil {
				return nil, err
			}
			var lat Latencies
			cpu0 := ProcessCPU()
			if err := Parallel(ctx, o.DeletesPerRound, o.Clients, func(ctx context.Context, i int) error {
				cl := clients[i%len(clients)]
				start := time.Now()
				err := cl.Delete(ctx, Stack(ns, name(i), 0))
				lat.Add(time.Since(start))
				if err != nil {
					return fmt.Errorf("mode %s: deleting unlocked Stack %s: %w", mode, name(i), err)
				}
				return nil
			}); err != nil {
				return nil, err
			}
			for p, t := range ProcessCPU() {
				res.CPUPerDelete[mode][p] += (t - cpu0[p]) / time.Duration(o.DeletesPerRound*o.SequentialRounds)
			}
			res.Allowed[mode].Merge(&lat)
			res.RoundP99[mode] = append(res.RoundP99[mode], lat.Quantile(0.99))
			if mode == ModeNone {
				continue
			}
			if err := Parallel(ctx, o.DeniedPerRound, o.Clients, func(ctx context.Context, i int) error {
				cl := clients[i%len(clients)]
				start := time.Now()
				err := cl.Delete(ctx, Stack(ns, fmt.Sprintf("locked-%d", i%locked), 0))
				res.Denied[mode].Add(time.Since(start))
				if !apierrors.IsForbidden(err) {
					return fmt.Errorf("mode %s: deleting a locked Stack: %v, want Forbidden", mode, err)
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	// Leave lockguard's webhook in place, as the other benchmarks expect.
	if err := c.SetMode(ctx, ModeWebhook, sentinel); err != nil {
		return nil, err
	}
	return res, nil
}

// WaitLocksActive waits until at least n Locks of namespace ns are active.
func (c *Cluster) WaitLocksActive(ctx context.Context, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var locks lockv1alpha1.LockList
		err := c.Client.List(ctx, &locks, client.InNamespace(ns))
		active := 0
		for i := range locks.Items {
			if locks.Items[i].Status.Active {
				active++
			}
		}
		if err == nil && active >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("%d of %d Locks active in %s after %s", active, n, ns, timeout), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
