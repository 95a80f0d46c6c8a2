package lockctl

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

var (
	stackGVK = schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	stackGVR = stackGVK.GroupVersion().WithResource("stacks")
)

// fakeClients are clients of namespace forge over a fake dynamic client
// that serves Stacks and Locks, holding objs.
func fakeClients(objs ...runtime.Object) *clients {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{stackGVR: "StackList", locksResource: "LockList"}, objs...)
	return &clients{namespace: "forge", dynamic: dyn}
}

// TestCreateRetrying: kubectl lock retries lockguard's retryable refusals
// of a Lock create (a replica could not be told yet, a label could not be
// written first), and nothing else.
func TestCreateRetrying(t *testing.T) {
	refused := apierrors.NewServiceUnavailable(fmt.Sprintf("admission webhook %q denied the request: %s: replica 10.0.0.7:9443 did not answer",
		"create.lockguard.core.navique.com", lockv1alpha1.CreateRefusedRetry))
	unlabelled := apierrors.NewServiceUnavailable(fmt.Sprintf("admission webhook %q denied the request: %s: putting the label on Secret forge/s1: context deadline exceeded",
		"create.lockguard.core.navique.com", lockv1alpha1.TargetLabelRefusedRetry))
	otherUnavailable := apierrors.NewServiceUnavailable("etcdserver: leader changed")
	cases := map[string]struct {
		reason  string
		errs    []error // the answers of the creates, in order; then nil
		timeout time.Duration
		calls   int // 0: not checked (it depends on the clock)
		want    error
	}{
		"RefusedThenCreated": {
			reason: "Two refusals, then the create goes through.",
			errs:   []error{refused, refused}, timeout: time.Minute, calls: 3,
		},
		"UnlabelledThenCreated": {
			reason: "A label that could not be written first: retried too.",
			errs:   []error{unlabelled, refused}, timeout: time.Minute, calls: 3,
		},
		"OtherError": {
			reason: "Any other error, even a 503, is returned at once.",
			errs:   []error{otherUnavailable}, timeout: time.Minute, calls: 1, want: otherUnavailable,
		},
		"Timeout": {
			reason: "Refused until the timeout: the last refusal is returned.",
			errs:   []error{refused, refused, refused, refused, refused, refused, refused, refused}, timeout: 250 * time.Millisecond, want: refused,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := CreateRetrying(context.Background(), tc.timeout, func(context.Context) error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if !errors.Is(err, tc.want) && err != tc.want {
				t.Errorf("%s\nCreateRetrying(...) = %v, want %v", tc.reason, err, tc.want)
			}
			if tc.calls != 0 && calls != tc.calls {
				t.Errorf("%s\ncreates sent: %d, want %d", tc.reason, calls, tc.calls)
			}
		})
	}
}

// TestWaitActiveReadOnly: kubectl lock returns a CanNotDelete Lock once
// it is active, and a ReadOnly Lock once its freeze is in force too; a
// ReadOnly Lock whose freeze stays pending fails at the timeout, saying
// that deletes are denied but the freeze is not in force.
func TestWaitActiveReadOnly(t *testing.T) {
	activeLock := func(name string, level lockv1alpha1.LockLevel, conds ...metav1.Condition) *unstructured.Unstructured {
		l := &lockv1alpha1.Lock{
			TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, Generation: 1},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "db"}, Level: level},
		}
		l.Status.Active, l.Status.ObservedGeneration = true, 1
		l.Status.Conditions = append([]metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive, LastTransitionTime: metav1.Now()}}, conds...)
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: obj}
	}
	readOnlyCond := func(status metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: status, Reason: reason, Message: msg, ObservedGeneration: 1, LastTransitionTime: metav1.Now()}
	}
	// A ClusterLock whose guard is off, read as a Lock: it fails at once.
	disabled := activeLock("disabled", lockv1alpha1.LevelCanNotDelete)
	_ = unstructured.SetNestedField(disabled.Object, false, "status", "active")
	_ = unstructured.SetNestedSlice(disabled.Object, []any{map[string]any{"type": lockv1alpha1.ConditionReady, "status": "False", "reason": lockv1alpha1.ReasonGuardDisabled,
		"message": "lockguard runs without its ClusterLock guard", "lastTransitionTime": "2026-12-04T10:00:00Z"}}, "status", "conditions")
	// A ClusterLock whose target lockguard may not label: it fails at once,
	// with the command to run.
	forbidden := activeLock("forbidden", lockv1alpha1.LevelCanNotDelete)
	_ = unstructured.SetNestedField(forbidden.Object, false, "status", "active")
	_ = unstructured.SetNestedSlice(forbidden.Object, []any{map[string]any{"type": lockv1alpha1.ConditionReady, "status": "False", "reason": lockv1alpha1.ReasonLabelForbidden,
		"message": "run: kubectl label clusterrole admin core.navique.com/cluster-locked=true", "lastTransitionTime": "2026-12-04T10:00:00Z"}}, "status", "conditions")
	c := fakeClients(
		activeLock("keep", lockv1alpha1.LevelCanNotDelete),
		activeLock("frozen", lockv1alpha1.LevelReadOnly, readOnlyCond(metav1.ConditionTrue, lockv1alpha1.ReasonInForce, "")),
		activeLock("pending", lockv1alpha1.LevelReadOnly, readOnlyCond(metav1.ConditionFalse, lockv1alpha1.ReasonPending, "Stack/db does not carry the read-only label yet")),
		activeLock("old", lockv1alpha1.LevelReadOnly),
		disabled,
		forbidden,
	)
	locks := c.dynamic.Resource(locksResource).Namespace("forge")
	cases := map[string]struct {
		reason  string
		wantErr string
	}{
		"keep": {reason: "A CanNotDelete Lock returns once active."},
		"disabled": {
			reason:  "GuardDisabled fails at once (nothing would ever enforce it).",
			wantErr: "lock.core.navique.com/disabled protects nothing: lockguard runs without its ClusterLock guard",
		},
		"forbidden": {
			reason:  "LabelForbidden fails at once (only someone who may label the target makes it protect), naming the command.",
			wantErr: "lock.core.navique.com/forbidden does not protect until its target is labelled: run: kubectl label clusterrole admin core.navique.com/cluster-locked=true",
		},
		"frozen": {reason: "A ReadOnly Lock returns once active and in force."},
		"pending": {
			reason:  "A ReadOnly Lock whose freeze is pending is not done.",
			wantErr: "lock.core.navique.com/pending is active (deleting what it covers is denied), but its freeze is not in force after 300ms: Stack/db does not carry the read-only label yet",
		},
		"old": {
			reason:  "A lockguard that never reports the ReadOnly condition is told apart.",
			wantErr: "lock.core.navique.com/old is active (deleting what it covers is denied), but its freeze is not in force after 300ms: lockguard has not reported the Lock's ReadOnly condition (a lockguard without ReadOnly Locks never does)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := waitActive(t.Context(), locks, lockGroupResource, name, 300*time.Millisecond)
			switch {
			case tc.wantErr == "" && (err != nil || l == nil || l.Name != name):
				t.Errorf("%s\nwaitActive(%s) = %v, %v; want the Lock", tc.reason, name, l, err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("%s\nwaitActive(%s) error:\n  %v\nwant\n  %s", tc.reason, name, err, tc.wantErr)
			}
		})
	}
}

// TestSameLevel: asking for ReadOnly where a CanNotDelete Lock of the
// name exists is an error that says how to raise it; the other way the
// stricter existing Lock is kept.
func TestSameLevel(t *testing.T) {
	lock := func(level lockv1alpha1.LockLevel) *lockv1alpha1.Lock {
		return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: "stack-db"}, Spec: lockv1alpha1.LockSpec{Level: level}}
	}
	want := `lock.core.navique.com "stack-db" already exists with level CanNotDelete: raise its level (kubectl lock update stack-db -n forge --level ReadOnly) or choose another name with --name`
	if err := sameLevel(lock(lockv1alpha1.LevelCanNotDelete), lock(lockv1alpha1.LevelReadOnly), "forge"); err == nil || err.Error() != want {
		t.Errorf("sameLevel(CanNotDelete, ReadOnly) = %v, want\n  %s", err, want)
	}
	for _, pair := range [][2]lockv1alpha1.LockLevel{{lockv1alpha1.LevelReadOnly, ""}, {lockv1alpha1.LevelReadOnly, lockv1alpha1.LevelReadOnly}, {lockv1alpha1.LevelCanNotDelete, ""}} {
		if err := sameLevel(lock(pair[0]), lock(pair[1]), "forge"); err != nil {
			t.Errorf("sameLevel(%q, %q) = %v, want nil", pair[0], pair[1], err)
		}
	}
}
