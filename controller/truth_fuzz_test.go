package controller

import (
	"time"

	"os"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// kindPattern is the CRD's rule on a new Lock's targetRef.kind (the
// XValidation marker on Lock); TestKindPatternIsTheCRDs keeps the two
// alike.
const kindPattern = `^[A-Z][A-Za-z0-9]*$`

var kindRE = regexp.MustCompile(kindPattern)

func TestKindPatternIsTheCRDs(t *testing.T) {
	crd, err := os.ReadFile("../deploy/chart/lockguard/crds/core.navique.com_locks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "self.spec.targetRef.kind.matches('" + kindPattern + "')"; !strings.Contains(string(crd), want) {
		t.Errorf("the Lock CRD has no rule %s", want)
	}
}

// fakeGroup is the discovery picture of the kind tests (as in
// internal/readmodel's): Stack in
// v1alpha1 and v1beta1 (v1beta1 preferred), Region cluster-scoped, and a
// kind of another group with a look-alike name.
func fakeGroup() *fakediscovery.FakeDiscovery {
	verbs := metav1.Verbs{"get", "list", "watch", "patch", "delete"}
	stack := metav1.APIResource{Name: "stacks", SingularName: "stack", Namespaced: true, Kind: "Stack", Verbs: verbs, ShortNames: []string{"stk"}}
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "core.navique.com/v1alpha1", APIResources: []metav1.APIResource{stack, {Name: "stacks/status", Kind: "Stack", Namespaced: true},
			{Name: "regions", SingularName: "region", Kind: "Region", Verbs: verbs}}},
		{GroupVersion: "core.navique.com/v1beta1", APIResources: []metav1.APIResource{stack}},
		{GroupVersion: "other.example.com/v1", APIResources: []metav1.APIResource{{Name: "gateways", SingularName: "gateway", Namespaced: true, Kind: "Gateway", Verbs: verbs}}},
	}}}
}

// FuzzStatusIsTheWebhooksDecision feeds odd but valid Lock specs (as the
// CRD accepts them: any case, plurals, other groups, versions that are not
// served, names up to the length limits) to the reconciler's decision
// against a fixed discovery picture (fakeGroup), and checks docs/contract.md rule
// 13 by construction: the status says Active (its target existing) exactly
// when a DELETE of the target, of the kind the API server serves, finds
// the Lock in the webhook's index; and the annotation is then kept by the
// one watch of that resource, under the same key.
func FuzzStatusIsTheWebhooksDecision(f *testing.F) {
	for _, apiVersion := range []string{"", "core.navique.com/v1alpha1", "core.navique.com/v1beta1", "core.navique.com/v9", "other.example.com/v1", "v1", "core.navique.com", "/"} {
		for _, kind := range []string{"Stack", "stack", "stacks", "Stacks", "StAck", "STK", "Stk", "Region", "Lock", "Gateway", "S"} {
			f.Add(apiVersion, kind, "forge")
		}
	}
	f.Add("core.navique.com/v1alpha1", "Stack", strings.Repeat("n", 253))
	f.Add("core.navique.com/"+strings.Repeat("v", 236), "S"+strings.Repeat("tack", 15)+"xy", "x")
	table := readmodel.NewKinds(fakeGroup())
	kinds, err := table.Refresh()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, apiVersion, kind, name string) {
		// Only specs the CRD accepts.
		if len(apiVersion) > 253 || len(kind) > 63 || !kindRE.MatchString(kind) || name == "" || len(name) > 253 {
			t.Skip()
		}
		lock := &lockv1alpha1.Lock{}
		lock.Namespace, lock.Name = "forge", "keep"
		lock.Spec.TargetRef = lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: name}

		active := false
		var annotated readmodel.ServedKind
		if target, err := lock.Target(); err == nil {
			k, obs, _, err := resolveTarget(table, target)
			if err != nil {
				t.Fatalf("resolveTarget(%+v): %v", target, err)
			}
			active, annotated = obs == nil, k
			if obs != nil && (obs.active || obs.message == "" || (obs.reason != lockv1alpha1.ReasonInvalidTarget && obs.reason != lockv1alpha1.ReasonMissingReference)) {
				t.Fatalf("Lock %+v: observation %+v, want InvalidTarget or MissingReference, with a message", lock.Spec.TargetRef, *obs)
			}
		}
		indexKey, live := lock.LiveTarget(time.Time{})
		matched, matchedBy := false, readmodel.ServedKind{}
		for _, k := range kinds {
			// The webhook's key of a DELETE of the object of kind k named
			// like the target (webhook/handler.go), through any version.
			request := lockv1alpha1.TargetKey{Namespace: lock.Namespace, Group: k.GVK.Group, Kind: k.GVK.Kind, Name: name}
			if k.Namespaced && live && indexKey == request {
				matched, matchedBy = true, k
			}
		}
		if active != matched {
			t.Fatalf("Lock %+v: status active %t, but a DELETE of the served kind is denied: %t", lock.Spec.TargetRef, active, matched)
		}
		if active && (annotated.Resource != matchedBy.Resource || annotated.GVK.Kind != kind) {
			t.Fatalf("Lock %+v: annotated through %v (kind %s), denied through %v", lock.Spec.TargetRef, annotated.Resource, annotated.GVK.Kind, matchedBy.Resource)
		}
	})
}
