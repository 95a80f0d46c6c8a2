package readmodel

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestParseProtectResource checks the form of --protect-resource.
func TestParseProtectResource(t *testing.T) {
	for in, want := range map[string]schema.GroupResource{
		"persistentvolumeclaims":      {Resource: "persistentvolumeclaims"},
		"statefulsets.apps":           {Group: "apps", Resource: "statefulsets"},
		" secrets ":                   {Resource: "secrets"},
		"ingresses.networking.k8s.io": {Group: "networking.k8s.io", Resource: "ingresses"},
	} {
		got, err := ParseProtectResource(in)
		if err != nil || got != want {
			t.Errorf("ParseProtectResource(%q): got %v, %v; want %v", in, got, err, want)
		}
	}
	for in, wantErr := range map[string]string{
		"":                        "lower-case plural resource name",
		"PersistentVolumeClaims":  "lower-case plural resource name",
		"stacks.core.navique.com": "without opt-in",
		"namespaces":              "cluster-scoped",
		"things.Not_A_Group":      "not a DNS subdomain",
	} {
		if _, err := ParseProtectResource(in); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseProtectResource(%q): got %v, want an error with %q", in, err, wantErr)
		}
	}
}

// TestResolveOptIn: an opted-in resource resolves to its kind and joins
// the table beside the group's; one not served, or cluster-scoped, is
// refused at start with a message naming it.
func TestResolveOptIn(t *testing.T) {
	d := fakeGroup()
	verbs := metav1.Verbs{"get", "list", "watch", "patch", "delete"}
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "persistentvolumeclaims", SingularName: "persistentvolumeclaim", Namespaced: true, Kind: "PersistentVolumeClaim", Verbs: verbs},
		{Name: "persistentvolumes", SingularName: "persistentvolume", Kind: "PersistentVolume", Verbs: verbs},
		{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: verbs},
	}})
	pvcs := schema.GroupResource{Resource: "persistentvolumeclaims"}
	gks, err := ResolveOptIn(d, []schema.GroupResource{pvcs})
	if err != nil || len(gks) != 1 || gks[0] != (schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
		t.Fatalf("ResolveOptIn(persistentvolumeclaims): %v, %v", gks, err)
	}
	_, err = ResolveOptIn(d, []schema.GroupResource{{Resource: "persistentvolumes"}, {Resource: "widgets"}, {Group: "other.example.com", Resource: "gateways"}})
	for _, want := range []string{"persistentvolumes: PersistentVolume is cluster-scoped", `widgets: the API server serves no resource "widgets" in group ""`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ResolveOptIn: got %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "gateways") {
		t.Errorf("ResolveOptIn: %v names gateways.other.example.com, which can be protected", err)
	}

	table := NewKinds(d).WithOptIn([]schema.GroupResource{pvcs})
	if k, err := table.Lockable("PersistentVolumeClaim"); err != nil || k.Resource != pvcs || !k.Namespaced {
		t.Errorf("Lockable(PersistentVolumeClaim) with the opt-in: %+v, %v", k, err)
	}
	if _, err := table.Lockable("ConfigMap"); !errors.Is(err, ErrKindNotServed) {
		t.Errorf("Lockable(ConfigMap), not opted in: %v, want ErrKindNotServed", err)
	}
	if k, err := table.Lockable("Stack"); err != nil || k.GVK.Group != "core.navique.com" {
		t.Errorf("Lockable(Stack) with the opt-in: %+v, %v", k, err)
	}
}
