package peers

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/navique/lockguard/webhook"
)

// renderedEntry returns the Lock-create entry as the chart renders it and
// the API server defaults it, calling the Service lockguard-system/lockguard-webhook.
func renderedEntry() admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:                    CreateEntryName,
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service: &admissionregistrationv1.ServiceReference{
				Namespace: "lockguard-system", Name: "lockguard-webhook",
				Path: ptr.To(webhook.CreatePath), Port: ptr.To[int32](443),
			},
			CABundle: []byte("ca"),
		},
		FailurePolicy:     ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:       ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		TimeoutSeconds:    ptr.To[int32](10),
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"core.navique.com"}, APIVersions: []string{"*"},
				Resources: []string{"locks"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
	}
}

func TestCheckCreateEntry(t *testing.T) {
	service := Expectation{ServiceNamespace: "lockguard-system", ServiceName: "lockguard-webhook", Path: webhook.CreatePath}
	local := Expectation{URL: "https://127.0.0.1:9443", Path: webhook.CreatePath}
	with := func(edit func(*admissionregistrationv1.ValidatingWebhook)) *admissionregistrationv1.ValidatingWebhookConfiguration {
		w := renderedEntry()
		edit(&w)
		other := admissionregistrationv1.ValidatingWebhook{Name: "delete.lockguard.core.navique.com"}
		return &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "lockguard"},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{other, w},
		}
	}
	same := func(*admissionregistrationv1.ValidatingWebhook) {}
	const prefix = "webhook " + CreateEntryName + " of ValidatingWebhookConfiguration lockguard: "
	cases := map[string]struct {
		reason string
		vwc    *admissionregistrationv1.ValidatingWebhookConfiguration
		want   Expectation
		err    string // "" for nil
	}{
		"AsRendered": {
			reason: "the chart's entry, as the API server returns it, is valid",
			vwc:    with(same), want: service,
		},
		"Unset": {
			reason: "unset failurePolicy (v1's default is Fail), selectors, scope and port (443) are valid",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.FailurePolicy, w.ObjectSelector, w.NamespaceSelector = nil, nil, nil
				w.Rules[0].Scope, w.ClientConfig.Service.Port = nil, nil
			}),
			want: service,
		},
		"Broader": {
			reason: "a rule that matches more than Lock creates still matches all of them",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
				w.Rules[0].APIGroups, w.Rules[0].Resources = []string{"*"}, []string{"*/*"}
				w.Rules[0].Scope = ptr.To(admissionregistrationv1.AllScopes)
			}),
			want: service,
		},
		"Missing": {
			reason: "no configuration",
			want:   service, err: "the ValidatingWebhookConfiguration does not exist",
		},
		"NoEntry": {
			reason: "the configuration without the entry",
			vwc: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "lockguard"},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "delete.lockguard.core.navique.com"}}},
			want: service, err: "ValidatingWebhookConfiguration lockguard has no webhook " + CreateEntryName,
		},
		"Ignore": {
			reason: "failurePolicy Ignore lets creates through while lockguard does not answer",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}),
			want: service, err: prefix + "failurePolicy is Ignore, not Fail",
		},
		"ObjectSelector": {
			reason: "an object selector can exclude Locks",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
			}),
			want: service, err: prefix + "objectSelector is not empty",
		},
		"NamespaceSelector": {
			reason: "a namespace selector can exclude namespaces",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}}
			}),
			want: service, err: prefix + "namespaceSelector is not empty",
		},
		"MatchConditions": {
			reason: "a match condition can exclude any request",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "skip", Expression: "false"}}
			}),
			want: service, err: prefix + "matchConditions [skip] are set",
		},
		"Versions": {
			reason: "a list of versions misses a version served later",
			vwc:    with(func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].APIVersions = []string{"v1alpha1"} }),
			want:   service, err: prefix + `no rule matches every Lock CREATE (rule 0: apiVersions ["v1alpha1"] are not ["*"])`,
		},
		"Operations": {
			reason: "UPDATE only misses creates",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
			}),
			want: service, err: prefix + `no rule matches every Lock CREATE (rule 0: operations ["UPDATE"] lack CREATE)`,
		},
		"Resource": {
			reason: "another resource, another group, cluster scope",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.Rules[0].Resources, w.Rules[0].APIGroups = []string{"locks/status"}, []string{"other.io"}
				w.Rules[0].Scope = ptr.To(admissionregistrationv1.ClusterScope)
			}),
			want: service, err: prefix + `no rule matches every Lock CREATE (rule 0: apiGroups ["other.io"] lack core.navique.com, resources ["locks/status"] lack locks, scope is Cluster)`,
		},
		"NoRules": {
			reason: "an entry without rules matches nothing",
			vwc:    with(func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules = nil }),
			want:   service, err: prefix + "no rule matches Lock CREATEs: it has no rules",
		},
		"OtherService": {
			reason: "reviews sent to another Service may be allowed by something else",
			vwc:    with(func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.Service.Name = "allow-all" }),
			want:   service, err: prefix + "clientConfig calls service lockguard-system/allow-all port 443 path /validate-lock-create, not service lockguard-system/lockguard-webhook port 443 path /validate-lock-create",
		},
		"OtherPath": {
			reason: "another path of lockguard allows Lock creates without telling the replicas",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.Service.Path = ptr.To("/validate-delete")
			}),
			want: service, err: prefix + "clientConfig calls service lockguard-system/lockguard-webhook port 443 path /validate-delete, not service lockguard-system/lockguard-webhook port 443 path /validate-lock-create",
		},
		"OtherPort": {
			reason: "the port is part of the Service reference",
			vwc:    with(func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig.Service.Port = ptr.To[int32](8443) }),
			want:   service, err: prefix + "clientConfig calls service lockguard-system/lockguard-webhook port 8443 path /validate-lock-create, not service lockguard-system/lockguard-webhook port 443 path /validate-lock-create",
		},
		"URLInsteadOfService": {
			reason: "a URL where the Service is expected",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.Service, w.ClientConfig.URL = nil, ptr.To("https://evil.example/validate-lock-create")
			}),
			want: service, err: prefix + "clientConfig calls url https://evil.example/validate-lock-create, not service lockguard-system/lockguard-webhook port 443 path /validate-lock-create",
		},
		"LocalURL": {
			reason: "the e2e harness's rendering: the URL of the replicas' front",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.Service, w.ClientConfig.URL = nil, ptr.To("https://127.0.0.1:9443/validate-lock-create")
			}),
			want: local,
		},
		"LocalOtherURL": {
			reason: "another URL than the expected one",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.ClientConfig.Service, w.ClientConfig.URL = nil, ptr.To("https://127.0.0.1:9444/validate-lock-create")
			}),
			want: local, err: prefix + "clientConfig url is https://127.0.0.1:9444/validate-lock-create, not https://127.0.0.1:9443/validate-lock-create",
		},
		"LocalService": {
			reason: "a Service where a URL is expected",
			vwc:    with(same),
			want:   local, err: prefix + "clientConfig calls service lockguard-system/lockguard-webhook, not url https://127.0.0.1:9443/validate-lock-create",
		},
		"Several": {
			reason: "every difference is named",
			vwc: with(func(w *admissionregistrationv1.ValidatingWebhook) {
				w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
				w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "a"}, {Name: "b"}}
			}),
			want: service, err: prefix + "failurePolicy is Ignore, not Fail; matchConditions [a b] are set",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ""
			if err := CheckCreateEntry(tc.vwc, tc.want); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.err, got); diff != "" {
				t.Errorf("%s\nCheckCreateEntry(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// checkedStandalone returns a standalone Tracker that checks the create
// entry, synced and with its view known, not yet told of the entry.
func checkedStandalone() (*clock, *Tracker) {
	c := newClock()
	tr := newTracker(trackerConfig{Standalone: true, TTL: time.Minute, Now: c.Now}, &fakeCache{synced: true})
	tr.RequireCreateEntry()
	tr.SetView(nil)
	c.add(time.Millisecond)
	return c, tr
}

func TestColdUntilTheCreateEntryIsObserved(t *testing.T) {
	c, tr := checkedStandalone()
	if tr.NeedsList() || tr.Warm() {
		t.Fatalf("NeedsList() %v, Warm() %v before the entry was observed; want both false", tr.NeedsList(), tr.Warm())
	}
	if reason, may := tr.MayLack(key("a")); !may || reason != ReasonCold {
		t.Fatalf("MayLack = %q, %v; want cold, true", reason, may)
	}
	// The first observation, valid: no hold-off (a standalone replica has
	// none at start).
	tr.SetCreateEntry(nil)
	c.add(time.Millisecond)
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm once the entry was observed valid and the Locks listed")
	}
	if observed, err := tr.CreateEntry(); !observed || err != nil {
		t.Fatalf("CreateEntry() = %v, %v; want true, nil", observed, err)
	}
}

func TestCreateEntryChangeHoldsOff(t *testing.T) {
	c, tr := checkedStandalone()
	tr.SetCreateEntry(nil)
	c.add(time.Millisecond)
	warmUp(t, tr)

	relaxed := errors.New("failurePolicy is Ignore, not Fail")
	tr.SetCreateEntry(relaxed)
	if tr.Warm() || tr.NeedsList() {
		t.Fatalf("Warm() %v, NeedsList() %v with the entry relaxed; want both false (no list while it is)", tr.Warm(), tr.NeedsList())
	}
	if observed, err := tr.CreateEntry(); !observed || err != relaxed {
		t.Fatalf("CreateEntry() = %v, %v; want true, %v", observed, err, relaxed)
	}
	c.add(10 * time.Minute) // time does not make it warm
	if tr.Warm() {
		t.Fatal("warm with the entry relaxed")
	}

	// Valid again: cold for TTL from then, then a list.
	tr.SetCreateEntry(nil)
	valid := c.now
	for _, d := range []time.Duration{0, 30 * time.Second, time.Minute - time.Millisecond} {
		c.now = valid.Add(d)
		if tr.Warm() || tr.NeedsList() {
			t.Fatalf("%s after the entry turned valid again: Warm() %v, NeedsList() %v; want both false for TTL (1m)", d, tr.Warm(), tr.NeedsList())
		}
	}
	c.now = valid.Add(time.Minute)
	if tr.Warm() {
		t.Fatal("warm without a list after the hold-off")
	}
	c.add(time.Millisecond)
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm after the hold-off and a list")
	}

	// A valid entry seen again (e.g. the caBundle rotated) changes nothing.
	tr.SetCreateEntry(nil)
	if !tr.Warm() {
		t.Fatal("a valid entry observed again must not make the replica cold")
	}
}

func TestCreateEntryTrustedByDefault(t *testing.T) {
	_, _, tr := warmStandalone(t)
	if !tr.Warm() {
		t.Fatal("without RequireCreateEntry the entry is trusted: want warm")
	}
}

// TestEntryWatchCountsMissedWrites feeds EntryWatch.observeLocked the states a
// watch (or a relist after it broke) delivers: a valid entry seen again
// after one write (a caBundle rotation) changes nothing, but one seen
// after writes the watch missed (the generation grew by more than one, or
// the configuration was created again) holds off as a change would.
func TestEntryWatchCountsMissedWrites(t *testing.T) {
	vwc := func(uid string, generation int64, edit func(*admissionregistrationv1.ValidatingWebhook)) *admissionregistrationv1.ValidatingWebhookConfiguration {
		w := renderedEntry()
		edit(&w)
		return &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "lockguard", UID: types.UID(uid), Generation: generation},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{w},
		}
	}
	same := func(*admissionregistrationv1.ValidatingWebhook) {}
	relaxed := func(w *admissionregistrationv1.ValidatingWebhook) {
		w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	}
	want := Expectation{ServiceNamespace: "lockguard-system", ServiceName: "lockguard-webhook", Path: webhook.CreatePath}

	steps := []struct {
		reason  string
		vwc     *admissionregistrationv1.ValidatingWebhookConfiguration
		holdOff bool // cold for the TTL, then a list
		cold    bool // cold while it lasts
	}{
		{reason: "first observation, valid: no hold-off", vwc: vwc("a", 1, same)},
		{reason: "the next generation, valid (a caBundle rotation)", vwc: vwc("a", 2, same)},
		{reason: "generation 5 after 2: writes were missed", vwc: vwc("a", 5, same), holdOff: true},
		{reason: "created again (new UID)", vwc: vwc("b", 1, same), holdOff: true},
		{reason: "relaxed", vwc: vwc("b", 2, relaxed), cold: true},
		{reason: "valid again", vwc: vwc("b", 3, same), holdOff: true},
		{reason: "deleted", vwc: nil, cold: true},
		{reason: "created again, valid", vwc: vwc("c", 1, same), holdOff: true},
	}
	c, tr := checkedStandalone()
	w := newEntryWatch(nil, "lockguard", want, tr)
	for _, s := range steps {
		c.add(time.Second)
		w.mu.Lock()
		w.observeLocked(t.Context(), s.vwc)
		w.mu.Unlock()
		c.add(time.Millisecond)
		switch {
		case s.cold:
			if tr.NeedsList() || tr.Warm() {
				t.Fatalf("%s: NeedsList() %v, Warm() %v; want cold", s.reason, tr.NeedsList(), tr.Warm())
			}
			continue
		case s.holdOff:
			if tr.NeedsList() || tr.Warm() {
				t.Fatalf("%s: NeedsList() %v, Warm() %v right after; want a hold-off first", s.reason, tr.NeedsList(), tr.Warm())
			}
			c.add(time.Minute)
			warmUp(t, tr)
		case !tr.Warm():
			// The first observation: a list (no hold-off).
			warmUp(t, tr)
		}
		if !tr.Warm() {
			t.Fatalf("%s: not warm", s.reason)
		}
	}
}
