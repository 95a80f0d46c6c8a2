package lockctl

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// exceptionFixture is a fake API server of namespace forge holding the
// Stack db (tier=db), a Lock targeting it, an Audit Lock targeting it, an
// expired one, a selector Lock matching it, a ReadOnly one matching it and
// one that does not, plus
// objs; its SelfSubjectReview answers user.
func exceptionFixture(t *testing.T, now time.Time, user string, objs ...runtime.Object) (*dynamicfake.FakeDynamicClient, *clients) {
	t.Helper()
	ref := func(name string) *lockv1alpha1.Lock {
		return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name},
			Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "db"}}}
	}
	sel := func(name, tier string) *lockv1alpha1.Lock {
		return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name},
			Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": tier}}}}
	}
	audit, expired, frozen := ref("audit"), ref("expired"), sel("frozen", "db")
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	past := metav1.NewTime(now.Add(-time.Minute))
	expired.Spec.ExpiresAt = &past
	all := []runtime.Object{stack("db", map[string]string{"tier": "db"}),
		lockObject(t, ref("keep")), lockObject(t, audit), lockObject(t, expired), lockObject(t, sel("tier-db", "db")), lockObject(t, sel("web", "web")), lockObject(t, frozen)}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		stackGVR: "StackList", locksResource: "LockList", exceptionsResource: "LockExceptionList"}, append(all, objs...)...)
	dyn.PrependReactor("create", "selfsubjectreviews", func(clienttesting.Action) (bool, runtime.Object, error) {
		r := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
		if user != "" {
			_ = unstructured.SetNestedField(r.Object, user, "status", "userInfo", "username")
		}
		return true, r, nil
	})
	return dyn, &clients{namespace: "forge", dynamic: dyn}
}

// sentExceptions returns the LockExceptions the fake was asked to create.
func sentExceptions(t *testing.T, dyn *dynamicfake.FakeDynamicClient) []lockv1alpha1.LockException {
	t.Helper()
	var out []lockv1alpha1.LockException
	for _, a := range dyn.Actions() {
		c, ok := a.(clienttesting.CreateAction)
		if !ok || a.GetResource() != exceptionsResource {
			continue
		}
		var e lockv1alpha1.LockException
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.GetObject().(*unstructured.Unstructured).Object, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestExceptionCreate: the exception is built for the SelfSubjectReview's
// user, on the enforcing Locks that cover the target by default (not the
// Audit, expired or non-matching ones), delete for 1h by default; flags
// override; the 24h bound and bad flags are refused before any create.
func TestExceptionCreate(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 500_000_000, time.UTC)
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { return now }
	sec := now.Truncate(time.Second)
	cases := map[string]struct {
		reason string
		o      exceptionOptions
		user   string
		want   *lockv1alpha1.LockExceptionSpec // nil: refused
		name   string                          // the name or generateName sent
		err    string                          // part of the error
	}{
		"Defaults": {
			reason: "Covering enforcing Locks, DELETE, 1h, the reviewed user, a generated name.",
			o:      exceptionOptions{reason: "INC-1", operations: []string{"delete"}}, user: "ann",
			want: &lockv1alpha1.LockExceptionSpec{Locks: []string{"frozen", "keep", "tier-db"}, Operations: []lockv1alpha1.ExceptionOperation{"DELETE"},
				Reason: "INC-1", User: "ann", ExpiresAt: metav1.NewTime(sec.Add(time.Hour))},
			name: "stack-db-",
		},
		"Flags": {
			reason: "--lock, --operations, --for and --name are sent as given.",
			o: exceptionOptions{reason: "INC-2", name: "x", locks: []string{"keep"}, operations: []string{"update", "DELETE", "update"},
				forD: 24 * time.Hour}, user: "bob",
			want: &lockv1alpha1.LockExceptionSpec{Locks: []string{"keep"}, Operations: []lockv1alpha1.ExceptionOperation{"UPDATE", "DELETE"},
				Reason: "INC-2", User: "bob", ExpiresAt: metav1.NewTime(sec.Add(24 * time.Hour))},
			name: "x",
		},
		"Until": {
			reason: "--until is the expiry.",
			o:      exceptionOptions{reason: "r", until: "2026-12-03T12:00:00Z", operations: []string{"delete"}}, user: "ann",
			want: &lockv1alpha1.LockExceptionSpec{Locks: []string{"frozen", "keep", "tier-db"}, Operations: []lockv1alpha1.ExceptionOperation{"DELETE"},
				Reason: "r", User: "ann", ExpiresAt: metav1.NewTime(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))},
			name: "stack-db-",
		},
		"UpdateOnly": {
			reason: "An UPDATE-only exception names only the ReadOnly Locks that cover the target: the others refuse no update.",
			o:      exceptionOptions{reason: "r", operations: []string{"update"}, forD: time.Minute}, user: "ann",
			want: &lockv1alpha1.LockExceptionSpec{Locks: []string{"frozen"}, Operations: []lockv1alpha1.ExceptionOperation{"UPDATE"},
				Reason: "r", User: "ann", ExpiresAt: metav1.NewTime(sec.Add(time.Minute))},
			name: "stack-db-",
		},
		"TooLong":    {reason: "More than 24h is refused before sending.", o: exceptionOptions{reason: "r", forD: 25 * time.Hour, operations: []string{"delete"}}, user: "ann", err: "lives at most 24h0m0s"},
		"UntilLate":  {reason: "So is an --until past 24h.", o: exceptionOptions{reason: "r", until: "2026-12-04T10:00:02Z", operations: []string{"delete"}}, user: "ann", err: "lives at most"},
		"Past":       {reason: "An expiry in the past is refused.", o: exceptionOptions{reason: "r", until: "2026-12-03T09:00:00Z", operations: []string{"delete"}}, user: "ann", err: "not in the future"},
		"Both":       {reason: "--for with --until is ambiguous.", o: exceptionOptions{reason: "r", forD: time.Hour, until: "2026-12-03T12:00:00Z", operations: []string{"delete"}}, user: "ann", err: "cannot both"},
		"NoReason":   {reason: "--reason is required.", o: exceptionOptions{operations: []string{"delete"}}, user: "ann", err: "--reason is required"},
		"BadOp":      {reason: "Only delete and update.", o: exceptionOptions{reason: "r", operations: []string{"patch"}}, user: "ann", err: "delete and update only"},
		"NoUser":     {reason: "A review without a username is an error.", o: exceptionOptions{reason: "r", operations: []string{"delete"}}, err: "names no username"},
		"BadDryRun":  {reason: "--dry-run is none, server or client.", o: exceptionOptions{reason: "r", operations: []string{"delete"}, dryRun: "all"}, user: "ann", err: `invalid --dry-run "all"`},
		"NoCovering": {reason: "A target no enforcing Lock covers has nothing to break.", o: exceptionOptions{reason: "r", operations: []string{"delete"}}, user: "ann", name: "ghost", err: "no enforcing Lock covers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dyn, c := exceptionFixture(t, now, tc.user)
			if tc.o.dryRun == "" {
				tc.o.dryRun = "none"
			}
			target := "db"
			if name == "NoCovering" {
				target = "ghost"
			}
			var out bytes.Buffer
			err := tc.o.run(t.Context(), Streams{Out: &out}, c, stackTarget(target))
			sent := sentExceptions(t, dyn)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) || len(sent) != 0 {
					t.Fatalf("%s\nerr = %v, %d sent; want an error with %q, none sent", tc.reason, err, len(sent), tc.err)
				}
				return
			}
			if err != nil || len(sent) != 1 {
				t.Fatalf("%s\nerr = %v, %d sent", tc.reason, err, len(sent))
			}
			tc.want.TargetRef = lockv1alpha1.TargetReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "db"}
			if diff := cmp.Diff(*tc.want, sent[0].Spec); diff != "" {
				t.Errorf("%s\nspec sent: -want, +got:\n%s", tc.reason, diff)
			}
			if got := sent[0].Name + sent[0].GenerateName; got != tc.name || sent[0].Namespace != "forge" {
				t.Errorf("%s\nname sent %q in %q, want %q in forge", tc.reason, got, sent[0].Namespace, tc.name)
			}
			if !strings.Contains(out.String(), "until "+tc.want.ExpiresAt.UTC().Format(time.RFC3339)) {
				t.Errorf("%s\noutput %q does not say until when", tc.reason, out.String())
			}
		})
	}
}

// TestExceptionCreateRefused: lockguard's refusal for want of break-glass
// names lockguard-break-glass; --dry-run=server sends a dry run (the
// fake answers it, refusing only the real create); --dry-run=client
// sends no create at all and says what it would create.
func TestExceptionCreateRefused(t *testing.T) {
	dyn, c := exceptionFixture(t, time.Now(), "ann")
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: lockv1alpha1.Group, Resource: "lockexceptions"}, "",
		errors.New("admission webhook denied the request: "+lockv1alpha1.BreakGlassMessage("forge", "keep")))
	dyn.PrependReactor("create", "lockexceptions", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.CreateActionImpl).CreateOptions.DryRun != nil {
			return true, a.(clienttesting.CreateAction).GetObject(), nil
		}
		return true, nil, refusal
	})
	o := exceptionOptions{reason: "r", operations: []string{"delete"}, dryRun: "none"}
	err := withRoleHint(o.run(t.Context(), Streams{Out: &bytes.Buffer{}}, c, stackTarget("db")))
	if !errors.Is(err, refusal) || !strings.Contains(err.Error(), "ClusterRole "+lockv1alpha1.BreakGlassRole) {
		t.Errorf("refused create: %v; want the refusal and the role %s", err, lockv1alpha1.BreakGlassRole)
	}
	o.dryRun = "server"
	var out bytes.Buffer
	if err := o.run(t.Context(), Streams{Out: &out}, c, stackTarget("db")); err != nil || !strings.Contains(out.String(), "(server dry run)") {
		t.Errorf("dry run: %v, %q", err, out.String())
	}
	creates := func() (n int) {
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "create" && a.GetResource().Resource == "lockexceptions" {
				n++
			}
		}
		return n
	}
	before := creates()
	o.dryRun = "client"
	out.Reset()
	err = o.run(t.Context(), Streams{Out: &out}, c, stackTarget("db"))
	if want := "lockexception.core.navique.com/stack-db-<generated> created (dry run): ann may delete stack.core.navique.com/db through Lock(s) [frozen keep tier-db] until "; err != nil || !strings.HasPrefix(out.String(), want) {
		t.Errorf("client dry run: %v, %q; want it to start with %q", err, out.String(), want)
	}
	if n := creates() - before; n != 0 {
		t.Errorf("client dry run sent %d creates of LockExceptions, want none", n)
	}
}

// TestExceptionListDelete: list prints each exception, expired or not at
// the clock, in the namespace or all; delete revokes by name.
func TestExceptionListDelete(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	defer func(c func() time.Time) { clock = c }(clock)
	clock = func() time.Time { return now }
	exc := func(ns, name string, at time.Time) *unstructured.Unstructured {
		e := &lockv1alpha1.LockException{TypeMeta: metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "LockException"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: lockv1alpha1.LockExceptionSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}, Locks: []string{"keep"},
				Operations: []lockv1alpha1.ExceptionOperation{"DELETE", "UPDATE"}, Reason: "INC-1\nrebuild", User: "ann", ExpiresAt: metav1.NewTime(at)}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	_, c := exceptionFixture(t, now, "ann", exc("forge", "live", now.Add(time.Hour)), exc("forge", "old", now), exc("other", "there", now.Add(time.Hour)))
	var out bytes.Buffer
	if err := listExceptions(t.Context(), Streams{Out: &out}, c, false); err != nil {
		t.Fatal(err)
	}
	want := "NAME   TARGET     OPERATIONS      USER   EXPIRES                        REASON\n" +
		"live   Stack/db   delete,update   ann    2026-12-03T11:00:00Z           " + oneLine("INC-1\nrebuild") + "\n" +
		"old    Stack/db   delete,update   ann    expired 2026-12-03T10:00:00Z   " + oneLine("INC-1\nrebuild") + "\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("kubectl lock exception list: -want, +got:\n%s", diff)
	}
	out.Reset()
	if err := listExceptions(t.Context(), Streams{Out: &out}, c, true); err != nil || !strings.Contains(out.String(), "other       there") {
		t.Errorf("kubectl lock exception list -A: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := deleteException(t.Context(), Streams{Out: &out}, c, "live"); err != nil || out.String() != "lockexception.core.navique.com/live deleted\n" {
		t.Errorf("delete: %v %q", err, out.String())
	}
	if err := deleteException(t.Context(), Streams{Out: &out}, c, "live"); !apierrors.IsNotFound(err) {
		t.Errorf("delete again: %v, want NotFound", err)
	}
}
