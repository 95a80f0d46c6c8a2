package readmodel

import (
	"strings"
	"testing"

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
