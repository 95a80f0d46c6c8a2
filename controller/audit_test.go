package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
	"github.com/navique/lockguard/webhook"
)

// TestAuditAgreement: the annotation, the status and the webhook agree on
// which Locks protect (docs/contract.md rule 20): for each mix of
// enforcing, audit and expired Locks of one Stack, the webhook denies its
// DELETE exactly when the annotation the reconciler keeps is not empty,
// naming the same Locks; exactly those Locks' status says active; an
// audit Lock's says Ready True, reason Audit (its ReadOnly condition too,
// for a ReadOnly one), and a second pass writes nothing.
func TestAuditAgreement(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	lock := func(name string, enforcement lockv1alpha1.Enforcement, level lockv1alpha1.LockLevel, expired bool) lockv1alpha1.Lock {
		l := *newLock("forge", name, "", "Stack", "forge")
		l.Generation = 1
		l.Spec.Enforcement, l.Spec.Level = enforcement, level
		if expired {
			l.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Minute)}
		}
		return l
	}
	keep := lock("keep", lockv1alpha1.EnforcementEnforce, "", false)
	dflt := lock("default", "", "", false)
	watch := lock("watch", lockv1alpha1.EnforcementAudit, "", false)
	frozen := lock("frozen", lockv1alpha1.EnforcementAudit, lockv1alpha1.LevelReadOnly, false)
	old := lock("old", lockv1alpha1.EnforcementEnforce, "", true)
	cases := map[string][]lockv1alpha1.Lock{
		"EnforceOnly":     {keep},
		"DefaultOnly":     {dflt},
		"AuditOnly":       {watch},
		"AuditReadOnly":   {frozen},
		"AuditAndEnforce": {watch, keep, frozen},
		"AuditAndExpired": {watch, old},
	}
	obj := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}
	del := webhook.Request{Operation: admissionv1.Delete, Namespace: "forge", Name: "forge",
		Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}}
	del.OldObject.Metadata.Name = "forge"
	for name, locks := range cases {
		t.Run(name, func(t *testing.T) {
			index := readmodeltest.Index(t, clock, locks...)
			covering, err := index.LiveLocksCovering(obj)
			if err != nil {
				t.Fatal(err)
			}
			annotation := annotationValue(enforcingNames(covering, now))
			resp := webhook.NewHandler(webhook.Config{Locks: index, Now: clock}).Decide(context.Background(), del)
			if resp.Allowed != (annotation == "") {
				t.Errorf("annotation %q, but the webhook's DELETE allowed=%v (%v)", annotation, resp.Allowed, resp.Result)
			}
			if !resp.Allowed {
				if want := "[" + strings.ReplaceAll(annotation, ",", " ") + "]"; !strings.Contains(resp.Result.Message, want) {
					t.Errorf("the denial %q does not name the annotation's Locks %s", resp.Result.Message, want)
				}
			}

			// The status: what a target pass writes for each live Lock.
			objs := make([]client.Object, 0, len(locks))
			for i := range locks {
				objs = append(objs, locks[i].DeepCopy())
			}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&lockv1alpha1.Lock{}).Build()
			r := &reconciler{client: c, now: clock, readOnlyGuard: true}
			for pass := range 2 {
				for i := range covering {
					var l lockv1alpha1.Lock
					if err := c.Get(context.Background(), client.ObjectKeyFromObject(&covering[i]), &l); err != nil {
						t.Fatal(err)
					}
					rv := l.ResourceVersion
					obs := observation{active: true, reason: lockv1alpha1.ReasonActive, protected: protectedTarget(obj.Key()), readOnly: readOnlyObservation{frozen: true}}
					if err := r.writeStatus(context.Background(), &l, obs); err != nil {
						t.Fatal(err)
					}
					if pass == 1 && l.ResourceVersion != rv {
						t.Errorf("Lock %s: the second pass wrote its status again", l.Name)
					}
				}
			}
			for i := range covering {
				var l lockv1alpha1.Lock
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(&covering[i]), &l); err != nil {
					t.Fatal(err)
				}
				named := slices.Contains(strings.Split(annotation, ","), l.Name)
				if l.Status.Active != named {
					t.Errorf("Lock %s: status.active %v, but named in the annotation %q: %v", l.Name, l.Status.Active, annotation, named)
				}
				ready := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady)
				got := [2]string{string(ready.Status), ready.Reason}
				want := [2]string{"True", lockv1alpha1.ReasonActive}
				if !l.Enforces() {
					want[1] = lockv1alpha1.ReasonAudit
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Lock %s: Ready -want, +got:\n%s", l.Name, diff)
				}
				if ro := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); l.Spec.Level == lockv1alpha1.LevelReadOnly &&
					(ro == nil || ro.Status != metav1.ConditionFalse || ro.Reason != lockv1alpha1.ReasonAudit) {
					t.Errorf("Lock %s: ReadOnly condition %+v, want False, reason Audit", l.Name, ro)
				}
			}
		})
	}
}

// TestAuditedObservations: an audit Lock that would be active, or wait
// only for its namespace's label, says Audit; one whose target is missing
// or whose scope is invalid says so whatever its enforcement.
func TestAuditedObservations(t *testing.T) {
	audit := newLock("forge", "watch", "", "Stack", "forge")
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	enforce := newLock("forge", "keep", "", "Stack", "forge")
	type got struct {
		Active bool
		Reason string
	}
	cases := []struct {
		lock *lockv1alpha1.Lock
		obs  observation
		want got
	}{
		{audit, observation{active: true, reason: lockv1alpha1.ReasonActive}, got{Reason: lockv1alpha1.ReasonAudit}},
		{audit, notGuarded("forge"), got{Reason: lockv1alpha1.ReasonAudit}},
		{audit, observation{reason: lockv1alpha1.ReasonMissingReference}, got{Reason: lockv1alpha1.ReasonMissingReference}},
		{audit, observation{reason: lockv1alpha1.ReasonInvalidTarget}, got{Reason: lockv1alpha1.ReasonInvalidTarget}},
		{enforce, observation{active: true, reason: lockv1alpha1.ReasonActive}, got{Active: true, Reason: lockv1alpha1.ReasonActive}},
		{enforce, notGuarded("forge"), got{Reason: lockv1alpha1.ReasonNamespaceNotGuarded}},
	}
	for _, tc := range cases {
		obs := audited(tc.lock, tc.obs)
		if diff := cmp.Diff(tc.want, got{obs.active, obs.reason}); diff != "" {
			t.Errorf("audited(%s, %s): -want, +got:\n%s", tc.lock.Name, tc.obs.reason, diff)
		}
	}
}
