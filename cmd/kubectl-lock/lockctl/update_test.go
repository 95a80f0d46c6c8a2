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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestUpdateFlags: kubectl lock update checks its flags before it sends
// anything: no change at all, two expiries, --audit with --enforce, an
// unknown level, an expiry in the past, an unknown --dry-run or -o are
// errors; a level is taken in any case.
func TestUpdateFlags(t *testing.T) {
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	later := metav1.NewTime(now.Add(2 * time.Hour))
	empty := ""
	cases := map[string]struct {
		o         updateOptions
		reasonSet bool
		want      lockChange
		wantErr   string
	}{
		"Nothing": {wantErr: "nothing to change: give at least one of --reason, --level, --until, --for, --no-expiry, --audit and --enforce (the scope cannot change: delete the Lock and create another)"},
		"ForZero": {o: updateOptions{forDuration: 0, dryRun: dryRunServer},
			wantErr: "nothing to change: give at least one of --reason, --level, --until, --for, --no-expiry, --audit and --enforce (the scope cannot change: delete the Lock and create another)"},
		"ClearReason":  {reasonSet: true, want: lockChange{reason: &empty}},
		"Level":        {o: updateOptions{level: "readonly"}, want: lockChange{level: lockv1alpha1.LevelReadOnly}},
		"BadLevel":     {o: updateOptions{level: "Frozen"}, wantErr: `--level "Frozen": it must be CanNotDelete or ReadOnly`},
		"For":          {o: updateOptions{forDuration: 2 * time.Hour}, want: lockChange{expiresAt: &later}},
		"Until":        {o: updateOptions{until: "2026-12-02T08:00:00Z"}, want: lockChange{expiresAt: &later}},
		"UntilPast":    {o: updateOptions{until: "2026-12-02T05:00:00Z"}, wantErr: "--until 2026-12-02T05:00:00Z is not in the future: a Lock that has already expired protects nothing"},
		"TwoExpiries":  {o: updateOptions{until: "2026-12-02T08:00:00Z", noExpiry: true}, wantErr: "give one of --until, --for and --no-expiry"},
		"NoExpiry":     {o: updateOptions{noExpiry: true}, want: lockChange{noExpiry: true}},
		"AuditEnforce": {o: updateOptions{audit: true, enforce: true}, wantErr: "give --audit or --enforce, not both"},
		"Enforce":      {o: updateOptions{enforce: true}, want: lockChange{enforcement: lockv1alpha1.EnforcementEnforce}},
		"BadDryRun":    {o: updateOptions{audit: true, dryRun: "all"}, wantErr: `invalid --dry-run "all": it must be "none", "server" or "client"`},
		"BadOutput":    {o: updateOptions{audit: true, output: "wide"}, wantErr: `unable to match a printer suitable for the output format "wide", allowed formats are: json,yaml`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.o.dryRun == "" {
				tc.o.dryRun = dryRunNone
			}
			got, err := tc.o.change(tc.reasonSet, now)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("change() = %+v, %v; want the error %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(lockChange{})); diff != "" {
				t.Errorf("change(): -want, +got:\n%s", diff)
			}
		})
	}
}

// updateFixture is a fake API server holding the Locks of namespace forge
// that kubectl lock update's tests change: keep (CanNotDelete, expiring
// at now+3h) and freeze (ReadOnly, never expiring).
func updateFixture(t *testing.T, now time.Time) (*dynamicfake.FakeDynamicClient, lockClient) {
	t.Helper()
	keep := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", ResourceVersion: "7"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}, Level: lockv1alpha1.LevelCanNotDelete,
			Enforcement: lockv1alpha1.EnforcementEnforce, Reason: "data", ExpiresAt: &metav1.Time{Time: now.Add(3 * time.Hour)}}}
	freeze := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "freeze", ResourceVersion: "9"},
		Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}, Level: lockv1alpha1.LevelReadOnly, Enforcement: lockv1alpha1.EnforcementEnforce}}
	c := fakeClients(lockObject(t, keep), lockObject(t, freeze))
	return c.dynamic.(*dynamicfake.FakeDynamicClient), c.dynamic.Resource(locksResource).Namespace("forge")
}

// forgeLocks is the lockKind of the Locks of namespace forge, read and
// patched through locks.
func forgeLocks(locks lockClient) lockKind {
	return lockKind{res: locks, gr: lockGroupResource, kind: "Lock", ns: "forge", encode: toUnstructured}
}

// patchesSent returns the patches of Locks (or ClusterLocks) the fake has
// been sent, each with its dry-run option.
func patchesSent(fake *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range fake.Actions() {
		if p, ok := a.(clienttesting.PatchActionImpl); ok {
			s := string(p.PatchType) + " " + string(p.Patch)
			if len(p.PatchOptions.DryRun) > 0 {
				s += " dryRun=" + strings.Join(p.PatchOptions.DryRun, ",")
			}
			out = append(out, s)
		}
	}
	return out
}

// updateCase is a case of kubectl lock update: the change asked of the
// Lock or ClusterLock lock, with --dry-run dryRun ("" for none), and the
// patches, stdout and stderr wanted.
type updateCase struct {
	lock, dryRun string
	change       lockChange
	patches      []string
	out, errOut  string
}

// runUpdateCase runs kubectl lock update on tc.lock of k, served by fake,
// and compares the patches sent, stdout and stderr with tc's; but for a
// server dry run (the fake API server does not keep dry runs apart), it
// also compares the spec read after with the one read before, changed by
// tc.change where a patch is wanted.
func runUpdateCase(t *testing.T, fake *dynamicfake.FakeDynamicClient, k lockKind, tc updateCase) {
	t.Helper()
	o := &updateOptions{dryRun: tc.dryRun}
	if o.dryRun == "" {
		o.dryRun = dryRunNone
	}
	before, err := getLock(t.Context(), k.res, tc.lock)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, k, tc.lock, tc.change); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tc.patches, patchesSent(fake)); diff != "" {
		t.Errorf("patches sent: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(tc.out, out.String()); diff != "" {
		t.Errorf("stdout: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(tc.errOut, errOut.String()); diff != "" {
		t.Errorf("stderr: -want, +got:\n%s", diff)
	}
	if o.dryRun == dryRunServer {
		return // the fake API server does not keep dry runs apart
	}
	got, err := getLock(t.Context(), k.res, tc.lock)
	if err != nil {
		t.Fatal(err)
	}
	want := before.Spec
	if len(tc.patches) > 0 {
		want = tc.change.apply(want)
	}
	if diff := cmp.Diff(want, got.Spec); diff != "" {
		t.Errorf("the %s's spec after the update: -want, +got:\n%s", k.kind, diff)
	}
}

// TestUpdate: kubectl lock update sends a JSON merge patch of the fields
// asked for with the resourceVersion read, says what changed, and says
// before sending when the change lowers the Lock (lockv1alpha1.Lowers,
// field by field: it then needs the verb unlock); a change that leaves
// the Lock as it is sends nothing; --dry-run=server sends the patch as a
// dry run, --dry-run=client sends none.
func TestUpdate(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	in := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	const merge = string(types.MergePatchType)
	str := func(s string) *string { return &s }
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(now.Add(d)); return &m }
	cases := map[string]updateCase{
		"Raise": {
			lock: "keep", change: lockChange{level: lockv1alpha1.LevelReadOnly, reason: str("freeze")},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"level":"ReadOnly","reason":"freeze"}}`},
			out: "lock.core.navique.com/keep patched\n" +
				"  reason: \"data\" -> \"freeze\"\n" +
				"  level: CanNotDelete -> ReadOnly\n" +
				"lockguard reports the change in the Lock's status: kubectl lock show keep -n forge\n",
		},
		"Extend": {
			lock: "keep", change: lockChange{expiresAt: at(5 * time.Hour)},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"expiresAt":"` + in(5*time.Hour) + `"}}`},
			out: "lock.core.navique.com/keep patched\n" +
				"  expiresAt: " + in(3*time.Hour) + " -> " + in(5*time.Hour) + "\n" +
				"lockguard reports the change in the Lock's status: kubectl lock show keep -n forge\n",
		},
		"NoExpiry": {
			lock: "keep", change: lockChange{noExpiry: true},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"expiresAt":null}}`},
			out: "lock.core.navique.com/keep patched\n" +
				"  expiresAt: " + in(3*time.Hour) + " -> never\n" +
				"lockguard reports the change in the Lock's status: kubectl lock show keep -n forge\n",
		},
		"Shorten": {
			lock: "keep", change: lockChange{expiresAt: at(time.Hour)},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"7"},"spec":{"expiresAt":"` + in(time.Hour) + `"}}`},
			errOut:  "Note: this lowers the expiresAt of Lock forge/keep, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-unlock, which edit and admin do not include)\n",
			out: "lock.core.navique.com/keep patched\n" +
				"  expiresAt: " + in(3*time.Hour) + " -> " + in(time.Hour) + "\n" +
				"lockguard reports the change in the Lock's status: kubectl lock show keep -n forge\n",
		},
		"LowerAll": {
			lock: "freeze", change: lockChange{level: lockv1alpha1.LevelCanNotDelete, expiresAt: at(time.Hour), enforcement: lockv1alpha1.EnforcementAudit},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"9"},"spec":{"enforcement":"Audit","expiresAt":"` + in(time.Hour) + `","level":"CanNotDelete"}}`},
			errOut:  "Note: this lowers the level, the expiresAt and the enforcement of Lock forge/freeze, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-unlock, which edit and admin do not include)\n",
			out: "lock.core.navique.com/freeze patched\n" +
				"  level: ReadOnly -> CanNotDelete\n" +
				"  expiresAt: never -> " + in(time.Hour) + "\n" +
				"  enforcement: Enforce -> Audit\n" +
				"lockguard reports the change in the Lock's status: kubectl lock show freeze -n forge\n",
		},
		"Unchanged": {
			lock: "freeze", change: lockChange{level: lockv1alpha1.LevelReadOnly, enforcement: lockv1alpha1.EnforcementEnforce, noExpiry: true, reason: str("")},
			out: "lock.core.navique.com/freeze unchanged\n",
		},
		"ServerDryRun": {
			lock: "freeze", dryRun: dryRunServer, change: lockChange{enforcement: lockv1alpha1.EnforcementAudit},
			patches: []string{merge + ` {"metadata":{"resourceVersion":"9"},"spec":{"enforcement":"Audit"}} dryRun=All`},
			errOut:  "Note: this lowers the enforcement of Lock forge/freeze, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-unlock, which edit and admin do not include)\n",
			out:     "lock.core.navique.com/freeze patched (server dry run)\n  enforcement: Enforce -> Audit\n",
		},
		"ClientDryRun": {
			lock: "keep", dryRun: dryRunClient, change: lockChange{enforcement: lockv1alpha1.EnforcementAudit},
			errOut: "Note: this lowers the enforcement of Lock forge/keep, which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-unlock, which edit and admin do not include)\n",
			out:    "lock.core.navique.com/keep patched (dry run)\n  enforcement: Enforce -> Audit\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fake, locks := updateFixture(t, now)
			runUpdateCase(t, fake, forgeLocks(locks), tc)
		})
	}
}

// TestUpdateRefused: a Conflict (the Lock changed since it was read) is
// decided again on the Lock read again, and given up after
// retry.DefaultRetry's tries, saying so; a refusal for want of the verb
// unlock names lockguard-unlock, after the note said it was needed; a
// Lock that does not exist says so and where to list the Locks.
func TestUpdateRefused(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	audit := lockChange{enforcement: lockv1alpha1.EnforcementAudit}
	conflict := apierrors.NewConflict(locksResource.GroupResource(), "keep", errors.New("the object has been modified"))

	fake, locks := updateFixture(t, now)
	conflicts := 1
	fake.PrependReactor("patch", "locks", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, conflict
		}
		return false, nil, nil
	})
	var out, errOut bytes.Buffer
	o := &updateOptions{dryRun: dryRunNone}
	if err := o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, forgeLocks(locks), "keep", audit); err != nil {
		t.Fatalf("kubectl lock update after one Conflict: %v", err)
	}
	if n := len(patchesSent(fake)); n != 2 {
		t.Errorf("patches sent after one Conflict: %d, want 2", n)
	}
	if n := strings.Count(errOut.String(), "Note: this lowers the enforcement"); n != 1 {
		t.Errorf("the note was said %d times, want once:\n%s", n, errOut.String())
	}

	fake, locks = updateFixture(t, now)
	fake.PrependReactor("patch", "locks", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, conflict })
	err := o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, forgeLocks(locks), "keep", audit)
	want := conflict.Error() + "\nThe Lock changed each of the 5 times it was read: nothing was changed; run kubectl lock update again"
	if err == nil || err.Error() != want || len(patchesSent(fake)) != 5 {
		t.Errorf("kubectl lock update, always in Conflict: %v (%d patches)\nwant %s", err, len(patchesSent(fake)), want)
	}

	fake, locks = updateFixture(t, now)
	refusal := apierrors.NewForbidden(locksResource.GroupResource(), "keep", errors.New(`admission webhook "unlock.lockguard.core.navique.com" denied the request: `+
		lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredEnforcement, "forge", "keep")))
	fake.PrependReactor("patch", "locks", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, refusal })
	errOut.Reset()
	err = withRoleHint(o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, forgeLocks(locks), "keep", audit))
	want = refusal.Error() + "\nYou lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace " +
		"(or a Role granting \"unlock\" on this Lock alone, with resourceNames)"
	if err == nil || err.Error() != want {
		t.Errorf("kubectl lock update refused for want of unlock:\n  %v\nwant\n  %s", err, want)
	}
	if !strings.HasPrefix(errOut.String(), "Note: this lowers the enforcement of Lock forge/keep") {
		t.Errorf("no note before the refused change: %q", errOut.String())
	}

	err = o.update(t.Context(), Streams{Out: &out, ErrOut: &errOut}, forgeLocks(locks), "ghost", audit)
	if err == nil || !apierrors.IsNotFound(errors.Unwrap(err)) || !strings.HasSuffix(err.Error(), "\nNo Lock of that name in namespace forge: kubectl lock list -n forge lists its Locks (kubectl lock list -A, those of every namespace)") {
		t.Errorf("kubectl lock update ghost: %v", err)
	}
}
