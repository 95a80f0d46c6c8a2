package lockctl

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestUpdateName: kubectl lock update takes NAME (a Lock) or a
// ClusterLock as kubectl lock show spells it; any other TYPE/NAME is an
// error.
func TestUpdateName(t *testing.T) {
	for arg, want := range map[string]struct {
		cluster bool
		name    string
	}{
		"stack-forge":                    {false, "stack-forge"},
		"clusterlock/namespace-prod":     {true, "namespace-prod"},
		"clusterlocks/namespace-prod":    {true, "namespace-prod"},
		"ClusterLock/namespace-prod":     {true, "namespace-prod"},
		"clusterlock.core.navique.com/a": {true, "a"},
	} {
		cluster, name, err := updateName(arg)
		if err != nil || cluster != want.cluster || name != want.name {
			t.Errorf("updateName(%q) = %v, %q, %v; want %v, %q", arg, cluster, name, err, want.cluster, want.name)
		}
	}
	for _, arg := range []string{"namespace/prod", "lock/stack-forge", "clusterlock/", "clusterlock/a/b", "clusterlocks.example.com/a"} {
		want := `"` + arg + `": kubectl lock update takes NAME, a Lock of the namespace (-n), or clusterlock/NAME, a ClusterLock`
		if _, _, err := updateName(arg); err == nil || err.Error() != want {
			t.Errorf("updateName(%q): %v; want %q", arg, err, want)
		}
	}
}

// clusterUpdateFixture is a fake API server holding the ClusterLock
// namespace-prod (on Namespace prod, CanNotDelete, expiring at now+3h) and
// the ReadOnly selector ClusterLock freeze-prod (never expiring), and the
// lockKind of ClusterLocks on it.
func clusterUpdateFixture(t *testing.T, now time.Time) (*dynamicfake.FakeDynamicClient, lockKind) {
	t.Helper()
	object := func(cl *lockv1alpha1.ClusterLock) runtime.Object {
		cl.APIVersion, cl.Kind = lockv1alpha1.GroupVersion.String(), "ClusterLock"
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cl)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	prod := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "namespace-prod", ResourceVersion: "7"},
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "prod"},
			Level: lockv1alpha1.LevelCanNotDelete, Enforcement: lockv1alpha1.EnforcementEnforce, Reason: "production", ExpiresAt: &metav1.Time{Time: now.Add(3 * time.Hour)}}}
	freeze := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "freeze-prod", ResourceVersion: "9"},
		Spec: lockv1alpha1.ClusterLockSpec{Selector: &lockv1alpha1.ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: map[string]string{"env": "prod"}},
			Level: lockv1alpha1.LevelReadOnly, Enforcement: lockv1alpha1.EnforcementEnforce}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{clusterLocksResource: "ClusterLockList"}, object(prod), object(freeze))
	return dyn, (&clients{namespace: "forge", dynamic: dyn}).clusterLocks()
}

// TestUpdateClusterLock: kubectl lock update clusterlock/NAME changes a
// ClusterLock as it does a Lock (the same merge patch with the
// resourceVersion read), naming it as a ClusterLock: clusterlock.core.navique.com/NAME
// patched, kubectl lock show clusterlock/NAME; a change that lowers it is
// said to need the verb unlock, naming lockguard-cluster-unlock; -o
// prints the ClusterLock. Its scope is kept.
func TestUpdateClusterLock(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	in := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	str := func(s string) *string { return &s }
	const merge = string(types.MergePatchType)
	cases := map[string]updateCase{
		"RaiseExtend": {
			lock: "namespace-prod", change: lockChange{level: lockv1alpha1.LevelReadOnly, reason: str("change freeze"), expiresAt: at(6 * time.Hour)},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"expiresAt":"` + in(6*time.Hour) + `","level":"ReadOnly","reason":"change freeze"}}`},
			out: "clusterlock.core.navique.com/namespace-prod patched\n" +
				"  reason: \"production\" -> \"change freeze\"\n" +
				"  level: CanNotDelete -> ReadOnly\n" +
				"  expiresAt: " + in(3*time.Hour) + " -> " + in(6*time.Hour) + "\n" +
				"lockguard reports the change in the ClusterLock's status: kubectl lock show clusterlock/namespace-prod\n",
		},
		"LowerAll": {
			lock: "freeze-prod", change: lockChange{level: lockv1alpha1.LevelCanNotDelete, expiresAt: at(time.Hour), enforcement: lockv1alpha1.EnforcementAudit},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"9"},"spec":{"enforcement":"Audit","expiresAt":"` + in(time.Hour) + `","level":"CanNotDelete"}}`},
			errOut:  "Note: this lowers the level, the expiresAt and the enforcement of ClusterLock freeze-prod, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-cluster-unlock)\n",
			out: "clusterlock.core.navique.com/freeze-prod patched\n" +
				"  level: ReadOnly -> CanNotDelete\n" +
				"  expiresAt: never -> " + in(time.Hour) + "\n" +
				"  enforcement: Enforce -> Audit\n" +
				"lockguard reports the change in the ClusterLock's status: kubectl lock show clusterlock/freeze-prod\n",
		},
		"Unchanged": {
			lock: "namespace-prod", change: lockChange{level: lockv1alpha1.LevelCanNotDelete, reason: str("production")},
			out: "clusterlock.core.navique.com/namespace-prod unchanged\n",
		},
		"ServerDryRun": {
			lock: "namespace-prod", dryRun: dryRunServer, change: lockChange{expiresAt: at(time.Hour)},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"expiresAt":"` + in(time.Hour) + `"}} dryRun=All`},
			errOut:  "Note: this lowers the expiresAt of ClusterLock namespace-prod, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-cluster-unlock)\n",
			out:     "clusterlock.core.navique.com/namespace-prod patched (server dry run)\n  expiresAt: " + in(3*time.Hour) + " -> " + in(time.Hour) + "\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake, k := clusterUpdateFixture(t, now)
			runUpdateCase(t, fake, k, tc)
		})
	}

	t.Run("Output", func(t *testing.T) {
		_, k := clusterUpdateFixture(t, now)
		var out bytes.Buffer
		o := &updateOptions{dryRun: dryRunNone, output: "yaml"}
		if err := o.update(t.Context(), Streams{Out: &out, ErrOut: &bytes.Buffer{}}, k, "namespace-prod", lockChange{level: lockv1alpha1.LevelReadOnly}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"kind: ClusterLock\n", "\n  level: ReadOnly\n", "\n  targetRef:\n    apiVersion: v1\n    kind: Namespace\n    name: prod\n"} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("-o yaml lacks %q:\n%s", s, out.String())
			}
		}
	})
}

// TestUpdateClusterLockRefused: a ClusterLock refusal names what the user
// lacks (the verb unlock: lockguard-cluster-unlock, after the note said it
// was needed; RBAC's patch: lockguard-cluster-lock) and changes nothing; a Conflict on every try names the ClusterLock; a
// ClusterLock that does not exist points to kubectl lock list -A.
func TestUpdateClusterLockRefused(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	thaw := "thaw"
	lower := lockChange{level: lockv1alpha1.LevelCanNotDelete, reason: &thaw}
	gr := clusterLocksResource.GroupResource()
	refusals := map[string]struct {
		err      error
		wantHint string
	}{
		"Unlock": {apierrors.NewForbidden(gr, "freeze-prod", errors.New(`admission webhook "cluster-unlock.lockguard.core.navique.com" denied the request: `+
			lockv1alpha1.ClusterUnlockMessage("lowering the level of", "freeze-prod"))),
			"\nYou lack the verb \"unlock\" on ClusterLocks: ask for a ClusterRoleBinding to the ClusterRole lockguard-cluster-unlock"},
		"Patch": {apierrors.NewForbidden(gr, "freeze-prod", errors.New(`User "u" cannot patch resource "clusterlocks" in API group "core.navique.com" at the cluster scope`)),
			"\nYou lack the verb \"patch\" on ClusterLocks: ask for a ClusterRoleBinding to the ClusterRole lockguard-cluster-lock"},
	}
	for name, tc := range refusals {
		t.Run(name, func(t *testing.T) {
			fake, k := clusterUpdateFixture(t, now)
			fake.PrependReactor("patch", "clusterlocks", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			var out, errOut bytes.Buffer
			o := &updateOptions{dryRun: dryRunNone}
			err := withRoleHint(o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, k, "freeze-prod", lower))
			if want := tc.err.Error() + tc.wantHint; err == nil || err.Error() != want {
				t.Errorf("kubectl lock update refused:\n  %v\nwant\n  %s", err, want)
			}
			if want := "Note: this lowers the level of ClusterLock freeze-prod"; !strings.HasPrefix(errOut.String(), want) || out.String() != "" {
				t.Errorf("stdout %q, stderr %q; want nothing and the note %q...", out.String(), errOut.String(), want)
			}
			if got, err := getLock(t.Context(), k.res, "freeze-prod"); err != nil || got.Spec.Level != lockv1alpha1.LevelReadOnly || got.Spec.Reason != "" {
				t.Errorf("the ClusterLock after the refusal: %+v, %v; want it unchanged", got, err)
			}
		})
	}

	fake, k := clusterUpdateFixture(t, now)
	conflict := apierrors.NewConflict(gr, "freeze-prod", errors.New("the object has been modified"))
	fake.PrependReactor("patch", "clusterlocks", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, conflict })
	o := &updateOptions{dryRun: dryRunNone}
	err := o.update(t.Context(), Streams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, k, "freeze-prod", lower)
	if want := conflict.Error() + "\nThe ClusterLock changed each of the 5 times it was read: nothing was changed; run kubectl lock update again"; err == nil || err.Error() != want {
		t.Errorf("kubectl lock update, always in Conflict: %v\nwant %s", err, want)
	}

	err = o.update(t.Context(), Streams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, k, "ghost", lower)
	if err == nil || !apierrors.IsNotFound(errors.Unwrap(err)) || !strings.HasSuffix(err.Error(), "\nNo ClusterLock of that name: kubectl lock list -A lists the ClusterLocks") {
		t.Errorf("kubectl lock update clusterlock/ghost: %v", err)
	}
}

// TestClusterLockHintsNameUpdate: kubectl lock on a cluster-scoped target
// whose ClusterLock exists, less strict, points to kubectl lock update
// clusterlock/NAME; so does an audit ClusterLock's done line.
func TestClusterLockHintsNameUpdate(t *testing.T) {
	existing := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: "namespace-prod"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: "v1", Kind: "Namespace", Name: "prod"}, Enforcement: lockv1alpha1.EnforcementAudit}}
	want := &lockv1alpha1.Lock{Spec: lockv1alpha1.LockSpec{Level: lockv1alpha1.LevelReadOnly}}
	if err := sameLevel(existing, want, ""); err == nil || err.Error() != `clusterlock.core.navique.com "namespace-prod" already exists with level CanNotDelete: `+
		`raise its level (kubectl lock update clusterlock/namespace-prod --level ReadOnly) or choose another name with --name` {
		t.Errorf("sameLevel of a ClusterLock: %v", err)
	}
	if err := sameEnforcement(existing, want, ""); err == nil || err.Error() != `clusterlock.core.navique.com "namespace-prod" already exists in Audit enforcement, which refuses nothing: `+
		`make it refuse (kubectl lock update clusterlock/namespace-prod --enforce) or choose another name with --name` {
		t.Errorf("sameEnforcement of a ClusterLock: %v", err)
	}
	if got, want := auditDone(existing), "the ClusterLock namespace-prod on Namespace/prod is in Audit enforcement: it refuses nothing; each request it would refuse "+
		"(deleting what it covers) is allowed with a warning and recorded in its status.lastWouldDeny (kubectl lock show clusterlock/namespace-prod); "+
		"kubectl lock update clusterlock/namespace-prod --enforce makes it refuse"; got != want {
		t.Errorf("auditDone of a ClusterLock:\n  %s\nwant\n  %s", got, want)
	}
}
