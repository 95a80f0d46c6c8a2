package lockctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestSelectorFlag: --selector takes kubectl's label selector syntax, and
// the Lock it makes is named after it and shown the same way by list.
func TestSelectorFlag(t *testing.T) {
	cases := map[string]struct {
		text    string
		want    *lockv1alpha1.LockSelector
		name    string
		scope   string
		wantErr string
	}{
		"equals": {
			text: "tier=db",
			want: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}},
			name: "tier-db", scope: "selector:tier=db",
		},
		"set and not": {
			text: "tier in (db,cache),!legacy",
			want: &lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{
				{Key: "legacy", Operator: "DoesNotExist"},
				{Key: "tier", Operator: "In", Values: []string{"cache", "db"}},
			}},
			name: "legacy-tier-in-cache-db", scope: "selector:!legacy,tier in (cache,db)",
		},
		"everything": {text: "", wantErr: `--selector "" selects every resource: use --all to lock the whole namespace`},
		"malformed":  {text: "tier in (", wantErr: "--selector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseSelector(tc.text)
			if tc.wantErr != "" {
				if err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr {
					t.Fatalf("parseSelector(%q) error %v, want one starting %q", tc.text, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("parseSelector(%q): -want, +got:\n%s", tc.text, diff)
			}
			if n, err := defaultSelectorLockName(got); err != nil || n != tc.name {
				t.Errorf("defaultSelectorLockName = %q, %v; want %q", n, err, tc.name)
			}
			l := &lockv1alpha1.Lock{Spec: lockv1alpha1.LockSpec{Selector: got}}
			if s := scopeString(l); s != tc.scope {
				t.Errorf("scopeString = %q, want %q", s, tc.scope)
			}
			if !sameScope(l, got) {
				t.Error("sameScope(Lock, its own selector) = false")
			}
		})
	}
	all := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}}}
	if s := scopeString(all); s != allScope {
		t.Errorf("scopeString(selector {}) = %q, want %q", s, allScope)
	}
	kinds := &lockv1alpha1.Lock{Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"a": "b"}, Kinds: []string{"Stack", "Gateway"}}}}
	if s, want := scopeString(kinds), "selector:a=b;kinds=Stack,Gateway"; s != want {
		t.Errorf("scopeString(with kinds) = %q, want %q", s, want)
	}
	if sameScope(all, kinds.Spec.Selector) {
		t.Error("sameScope({}, a=b) = true")
	}
}

// TestLockScopeArgs: kubectl lock takes exactly one of TYPE/NAME,
// --selector and --all.
func TestLockScopeArgs(t *testing.T) {
	for name, o := range map[string]struct {
		opts lockOptions
		args []string
	}{
		"none":             {},
		"name and all":     {opts: lockOptions{all: true}, args: []string{"stack/forge"}},
		"selector and all": {opts: lockOptions{all: true, selector: "a=b"}},
	} {
		err := o.opts.runScope(t.Context(), Streams{}, o.args)
		if want := "give exactly one of TYPE/NAME, --selector LABELS or --all"; err == nil || err.Error() != want {
			t.Errorf("%s: runScope error %v, want %q", name, err, want)
		}
	}
}
