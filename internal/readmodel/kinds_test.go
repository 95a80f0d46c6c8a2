package readmodel

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// fakeGroup is the discovery picture of the kind tests: Stack in
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

// TestKindTable: only the exact served spelling of a kind resolves; every
// other spelling that kubectl would accept is named misspelled, with the
// served Kind; anything else is not served.
func TestKindTable(t *testing.T) {
	table := NewKinds(fakeGroup())
	stack := ServedKind{GVK: schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"},
		Resource: schema.GroupResource{Group: "core.navique.com", Resource: "stacks"}, Namespaced: true, Watchable: true,
		singular: "stack", shortNames: []string{"stk"}}
	cases := map[string]struct {
		reason string
		kind   string
		want   ServedKind
		err    error
	}{
		"Kind":      {reason: "the served spelling resolves", kind: "Stack", want: stack},
		"lower":     {reason: "the lower-cased kind is not the kind", kind: "stack", err: &MisspelledKindError{Written: "stack", Served: "Stack"}},
		"plural":    {reason: "the resource is not the kind", kind: "stacks", err: &MisspelledKindError{Written: "stacks", Served: "Stack"}},
		"Plural":    {reason: "a capitalised plural is not the kind", kind: "Stacks", err: &MisspelledKindError{Written: "Stacks", Served: "Stack"}},
		"odd case":  {reason: "case matters", kind: "StAck", err: &MisspelledKindError{Written: "StAck", Served: "Stack"}},
		"shortName": {reason: "a short name is not the kind", kind: "STK", err: &MisspelledKindError{Written: "STK", Served: "Stack"}},
		"elsewhere": {reason: "another group's kind is not served here", kind: "Gateway", err: ErrKindNotServed},
		"unknown":   {reason: "a kind not installed (yet)", kind: "PostgresCluster", err: ErrKindNotServed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := table.Lookup(tc.kind)
			var gotMisspelled, wantMisspelled *MisspelledKindError
			switch {
			case errors.As(tc.err, &wantMisspelled):
				if !errors.As(err, &gotMisspelled) || *gotMisspelled != *wantMisspelled {
					t.Fatalf("%s\nlookup(%q): error %v, want %v", tc.reason, tc.kind, err, tc.err)
				}
			case !errors.Is(err, tc.err):
				t.Fatalf("%s\nlookup(%q): error %v, want %v", tc.reason, tc.kind, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(ServedKind{})); diff != "" {
				t.Errorf("%s\nlookup(%q): -want, +got:\n%s", tc.reason, tc.kind, diff)
			}
		})
	}
}

// TestKindsRecent: kinds read within maxAge are reused, without asking
// discovery again; older ones are read again.
func TestKindsRecent(t *testing.T) {
	fake := fakeGroup()
	table := NewKinds(fake)
	first, err := table.Recent(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	asked := len(fake.Actions())
	if asked == 0 {
		t.Fatal("Recent read nothing from discovery at first")
	}
	again, err := table.Recent(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again, cmp.AllowUnexported(ServedKind{})); diff != "" {
		t.Errorf("Recent(an hour) again: -first, +again:\n%s", diff)
	}
	if n := len(fake.Actions()); n != asked {
		t.Errorf("Recent(an hour) a moment after a read asked discovery %d more times, want none", n-asked)
	}
	if _, err := table.Recent(0); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Actions()); n == asked {
		t.Error("Recent(0) did not read discovery again")
	}
}
