package lockctl

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func TestLockStatus(t *testing.T) {
	now := metav1.Now()
	ready := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: status, Reason: reason}}
	}
	cases := map[string]struct {
		reason string
		lock   lockv1alpha1.Lock
		want   string
	}{
		"Active": {
			reason: "Ready=True and active for the current generation is Active.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: lockv1alpha1.LockStatus{Active: true, ObservedGeneration: 1, Conditions: ready(metav1.ConditionTrue, "Active")}},
			want:   statusActive,
		},
		"NoStatus": {
			reason: "A Lock lockguard has not seen is Pending.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 1}},
			want:   statusPending,
		},
		"OldGeneration": {
			reason: "A status of an older generation says nothing about this one.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: lockv1alpha1.LockStatus{Active: true, ObservedGeneration: 1, Conditions: ready(metav1.ConditionTrue, "Active")}},
			want:   statusPending,
		},
		"MissingReference": {
			reason: "A Lock that is not ready shows why.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: lockv1alpha1.LockStatus{ObservedGeneration: 1, Conditions: ready(metav1.ConditionFalse, lockv1alpha1.ReasonMissingReference)}},
			want:   lockv1alpha1.ReasonMissingReference,
		},
		"ReadyButNotActive": {
			reason: "Ready=True without status.active is not reported active.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: lockv1alpha1.LockStatus{ObservedGeneration: 1, Conditions: ready(metav1.ConditionTrue, "Active")}},
			want:   statusPending,
		},
		"Deleting": {
			reason: "A Lock being deleted is Deleting, whatever its status says.",
			lock:   lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: 1, DeletionTimestamp: &now}, Status: lockv1alpha1.LockStatus{Active: true, ObservedGeneration: 1, Conditions: ready(metav1.ConditionTrue, "Active")}},
			want:   statusDeleting,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, lockStatus(&tc.lock)); diff != "" {
				t.Errorf("%s\nlockStatus(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeniedBy(t *testing.T) {
	stacks := schema.GroupResource{Group: lockv1alpha1.Group, Resource: "stacks"}
	cases := map[string]struct {
		reason string
		err    error
		want   []string
	}{
		"Webhook": {
			reason: "The webhook's denial names its Locks.",
			err:    apierrors.NewForbidden(stacks, "forge", errors.New(`admission webhook "delete.lockguard.core.navique.com" denied the request: resource is protected by Lock(s) [a b]; delete the Lock(s) before deleting this resource (a: x [y])`)),
			want:   []string{"a", "b"},
		},
		"Cascade": {
			reason: "A cascade denial names the dependents' Locks.",
			err:    apierrors.NewForbidden(stacks, "forge", errors.New(`resource would cascade-delete resources protected by Lock(s) [c]`)),
			want:   []string{"c"},
		},
		"RBAC": {
			reason: "A Forbidden from RBAC is no Lock's doing.",
			err:    apierrors.NewForbidden(stacks, "forge", errors.New(`User "bob" cannot delete resource "stacks"`)),
		},
		"NotForbidden": {
			reason: "Only a Forbidden error is a denial.",
			err:    errors.New("resource is protected by Lock(s) [a]"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, deniedBy(tc.err)); diff != "" {
				t.Errorf("%s\ndeniedBy(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
