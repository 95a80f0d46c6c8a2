package readmodel

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// decoded is t as the JSON decoder gives it: whole seconds, in the local
// zone, without monotonic reading.
func decoded(t time.Time) metav1.Time { return metav1.Time{Time: time.Unix(t.Unix(), 0)} }

// lockVariants are changes to a Lock, each giving some field a value or
// a form the cache keeps differently (issue 38): cachedLockVariety applies
// them one at a time and in random combinations.
var lockVariants = map[string]func(l *lockv1alpha1.Lock){
	"dropped metadata": func(l *lockv1alpha1.Lock) {
		l.Labels, l.Annotations = map[string]string{"a": "b"}, map[string]string{"c": "d"}
		l.Finalizers = []string{"f"}
		l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
		l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	},
	"no typemeta":     func(l *lockv1alpha1.Lock) { l.TypeMeta = metav1.TypeMeta{} },
	"odd typemeta":    func(l *lockv1alpha1.Lock) { l.TypeMeta = metav1.TypeMeta{APIVersion: "core.navique.com/v1beta9"} },
	"generateName":    func(l *lockv1alpha1.Lock) { l.GenerateName, l.SelfLink = "gen-", "/apis/x" },
	"upper-case uid":  func(l *lockv1alpha1.Lock) { l.UID = types.UID(strings.ToUpper(string(l.UID))) },
	"short uid":       func(l *lockv1alpha1.Lock) { l.UID = "not-a-uuid" },
	"zero uuid":       func(l *lockv1alpha1.Lock) { l.UID = "00000000-0000-0000-0000-000000000000" },
	"no uid":          func(l *lockv1alpha1.Lock) { l.UID = "" },
	"rv 0":            func(l *lockv1alpha1.Lock) { l.ResourceVersion = "0" },
	"rv leading zero": func(l *lockv1alpha1.Lock) { l.ResourceVersion = "0042" },
	"rv text":         func(l *lockv1alpha1.Lock) { l.ResourceVersion = "abc" },
	"rv huge":         func(l *lockv1alpha1.Lock) { l.ResourceVersion = "184467440737095516150" },
	"no rv":           func(l *lockv1alpha1.Lock) { l.ResourceVersion = "" },
	"no generation":   func(l *lockv1alpha1.Lock) { l.Generation = 0 },
	"monotonic time":  func(l *lockv1alpha1.Lock) { l.CreationTimestamp = metav1.Now() },
	"utc time":        func(l *lockv1alpha1.Lock) { l.CreationTimestamp = metav1.NewTime(l.CreationTimestamp.UTC()) },
	"nanos time":      func(l *lockv1alpha1.Lock) { l.CreationTimestamp = metav1.NewTime(time.Unix(1700000000, 123456789)) },
	"epoch time":      func(l *lockv1alpha1.Lock) { l.CreationTimestamp = metav1.NewTime(time.Unix(0, 0)) },
	"no time":         func(l *lockv1alpha1.Lock) { l.CreationTimestamp = metav1.Time{} },
	"deleting": func(l *lockv1alpha1.Lock) {
		l.DeletionTimestamp, l.DeletionGracePeriodSeconds = ptr.To(decoded(time.Unix(1800000000, 0))), ptr.To[int64](0)
	},
	"selector": func(l *lockv1alpha1.Lock) {
		l.Spec.TargetRef = lockv1alpha1.TargetReference{}
		l.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"Stack"},
			MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "env", Operator: lockv1alpha1.SelectorOpIn, Values: []string{"a", "b"}}}}
	},
	"empty selector": func(l *lockv1alpha1.Lock) {
		l.Spec.TargetRef, l.Spec.Selector = lockv1alpha1.TargetReference{}, &lockv1alpha1.LockSelector{}
	},
	"invalid target": func(l *lockv1alpha1.Lock) { l.Spec.TargetRef.APIVersion = "a/b/c" },
	"foreign target": func(l *lockv1alpha1.Lock) {
		l.Spec.TargetRef = lockv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}
	},
	"versioned target": func(l *lockv1alpha1.Lock) { l.Spec.TargetRef.APIVersion = "core.navique.com/v1alpha1" },
	"read-only":        func(l *lockv1alpha1.Lock) { l.Spec.Level = lockv1alpha1.LevelReadOnly },
	"no level":         func(l *lockv1alpha1.Lock) { l.Spec.Level = "" },
	"odd level":        func(l *lockv1alpha1.Lock) { l.Spec.Level = "Frozen" },
	"audit":            func(l *lockv1alpha1.Lock) { l.Spec.Enforcement = lockv1alpha1.EnforcementAudit },
	"no enforcement":   func(l *lockv1alpha1.Lock) { l.Spec.Enforcement = "" },
	"odd enforcement":  func(l *lockv1alpha1.Lock) { l.Spec.Enforcement = "Warn" },
	"no reason":        func(l *lockv1alpha1.Lock) { l.Spec.Reason = "" },
	"expires":          func(l *lockv1alpha1.Lock) { l.Spec.ExpiresAt = ptr.To(decoded(time.Unix(1900000000, 0))) },
	"no status":        func(l *lockv1alpha1.Lock) { l.Status = lockv1alpha1.LockStatus{} },
	"inactive":         func(l *lockv1alpha1.Lock) { l.Status.Active = false },
	"odd scope":        func(l *lockv1alpha1.Lock) { l.Status.Scope = "Stack/other" },
	"no scope":         func(l *lockv1alpha1.Lock) { l.Status.Scope = "" },
	"ready false": func(l *lockv1alpha1.Lock) {
		l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference, Message: "missing"}}
	},
	"ready unknown": func(l *lockv1alpha1.Lock) { firstCondition(l).Status = metav1.ConditionUnknown },
	"odd status":    func(l *lockv1alpha1.Lock) { firstCondition(l).Status = "Maybe" },
	"utc condition": func(l *lockv1alpha1.Lock) {
		c := firstCondition(l)
		c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.UTC())
	},
	"two conditions": func(l *lockv1alpha1.Lock) {
		l.Status.Conditions = append(l.Status.Conditions, metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue,
			Reason: lockv1alpha1.ReasonInForce, Message: "in force", ObservedGeneration: 3, LastTransitionTime: decoded(time.Unix(1600000000, 0))})
	},
	"other condition":  func(l *lockv1alpha1.Lock) { firstCondition(l).Type = lockv1alpha1.ConditionReadOnly },
	"empty conditions": func(l *lockv1alpha1.Lock) { l.Status.Conditions = []metav1.Condition{} },
	"no protected":     func(l *lockv1alpha1.Lock) { l.Status.Protected = nil },
	"protected none":   func(l *lockv1alpha1.Lock) { l.Status.Protected = &lockv1alpha1.ProtectedStatus{} },
	"protected empty": func(l *lockv1alpha1.Lock) {
		l.Status.Protected = &lockv1alpha1.ProtectedStatus{Resources: []lockv1alpha1.ProtectedResource{}}
	},
	"protected others": func(l *lockv1alpha1.Lock) {
		l.Status.Protected = &lockv1alpha1.ProtectedStatus{Count: 12, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: "a"}, {Kind: "Gateway", Name: "b"}}}
	},
	"denied": func(l *lockv1alpha1.Lock) {
		l.Status.LastDenied = &lockv1alpha1.DeniedRequest{Time: decoded(time.Unix(1700000100, 0)), User: "u", Operation: "DELETE", Kind: "Stack", Name: "s", Count: 2, Exception: "d"}
	},
	"would deny": func(l *lockv1alpha1.Lock) {
		l.Status.LastWouldDeny = &lockv1alpha1.DeniedRequest{Time: decoded(time.Unix(1700000200, 0)), User: "w", Operation: "UPDATE", Kind: "Stack", Name: "s", Count: 1, Exception: "w"}
	},
	"exception": func(l *lockv1alpha1.Lock) {
		l.Status.LastException = &lockv1alpha1.DeniedRequest{Time: decoded(time.Unix(1700000300, 0)), User: "e", Operation: "DELETE", Kind: "Stack", Name: "s", Count: 5, Exception: "x"}
	},
}

// firstCondition returns l's first condition, made if it has none.
func firstCondition(l *lockv1alpha1.Lock) *metav1.Condition {
	if len(l.Status.Conditions) == 0 {
		l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "R", Message: "M"}}
	}
	return &l.Status.Conditions[0]
}

// baseLock is an active targetRef Lock as the API server sends it, its
// status as lockguard writes it (its Ready message the one the cache
// derives, flagActiveMessage).
func baseLock(i int) *lockv1alpha1.Lock {
	created := decoded(time.Unix(1700000000+int64(i), 0))
	l := &lockv1alpha1.Lock{
		TypeMeta: lockTypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lock-%d", i), Namespace: "team-a",
			UID: types.UID(fmt.Sprintf("7d0c8e1a-2b3f-4c5d-8e9f-%012d", i)), ResourceVersion: fmt.Sprint(1000 + i), Generation: 2, CreationTimestamp: created},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: fmt.Sprintf("stack-%d", i)},
			Level: lockv1alpha1.LevelCanNotDelete, Enforcement: lockv1alpha1.EnforcementEnforce, Reason: "prod"},
	}
	l.Status = lockv1alpha1.LockStatus{Scope: l.ScopeString(), Active: true, ObservedGeneration: 2,
		Conditions: []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive,
			Message: l.ActiveMessage(), ObservedGeneration: 2, LastTransitionTime: created}},
		Protected: &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: l.Spec.TargetRef.Name}}}}
	return l
}

// cachedLockVariety returns Locks of every variant alone, then of random
// combinations of them, then as the scale bench's decoded ones.
func cachedLockVariety(t *testing.T) []*lockv1alpha1.Lock {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range lockVariants {
			if !yield(n) {
				return
			}
		}
	})
	var out []*lockv1alpha1.Lock
	out = append(out, baseLock(0))
	for i, n := range names {
		l := baseLock(i + 1)
		lockVariants[n](l)
		out = append(out, l)
	}
	r := rand.New(rand.NewPCG(38, 1))
	for i := range 400 {
		l := baseLock(1000 + i)
		for _, n := range names {
			if r.IntN(6) == 0 {
				lockVariants[n](l)
			}
		}
		out = append(out, l)
	}
	return append(out, decodeLocks(t, apiServerLocks(t, 20))...)
}

// TestCachedLockExpandsExactly: the Lock a CachedLock reads as (Lock,
// DeepCopyObject) is exactly the one compactLock caches, for Locks of
// every form (cachedLockVariety), by go-cmp and by reflect.DeepEqual
// (timestamps' zones and monotonic readings, nil and empty slices); it
// shares nothing with the CachedLock; and the CachedLock's metadata, the
// Lock the index decides from (lockCore) and its readiness are the
// compactLock one's.
func TestCachedLockExpandsExactly(t *testing.T) {
	transform := CacheTransform(nil, nil)
	for _, in := range cachedLockVariety(t) {
		want := compactLock(in.DeepCopy(), newInterner())
		obj, err := transform(in.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		c, ok := obj.(*CachedLock)
		if !ok {
			t.Fatalf("the cache keeps Lock %s as a %T, want a *CachedLock", in.Name, obj)
		}
		for what, got := range map[string]*lockv1alpha1.Lock{"Lock()": c.Lock(), "DeepCopyObject()": c.DeepCopyObject().(*lockv1alpha1.Lock)} {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("Lock %s: the CachedLock's %s, -compactLock, +got:\n%s", in.Name, what, diff)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("Lock %s: the CachedLock's %s differs from compactLock's in form:\n%#v\n%#v", in.Name, what, want, got)
			}
		}
		// A copy shares nothing with the cache: change all of it, and the
		// next copy is as before.
		scribble(reflect.ValueOf(c.Lock()).Elem())
		if diff := cmp.Diff(want, c.Lock()); diff != "" {
			t.Fatalf("Lock %s: changing a copy changed the CachedLock, -compactLock, +got:\n%s", in.Name, diff)
		}
		checkCachedMeta(t, want, c)
	}
}

// checkCachedMeta checks what the cache's functions read of c, a
// CachedLock, against want, compactLock's Lock.
func checkCachedMeta(t *testing.T, want *lockv1alpha1.Lock, c *CachedLock) {
	t.Helper()
	m, err := meta.Accessor(c)
	if err != nil {
		t.Fatal(err)
	}
	got := metav1.ObjectMeta{Name: m.GetName(), GenerateName: m.GetGenerateName(), Namespace: m.GetNamespace(), SelfLink: m.GetSelfLink(),
		UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(), Generation: m.GetGeneration(), CreationTimestamp: m.GetCreationTimestamp(),
		DeletionTimestamp: m.GetDeletionTimestamp(), DeletionGracePeriodSeconds: m.GetDeletionGracePeriodSeconds(),
		Labels: m.GetLabels(), Annotations: m.GetAnnotations(), OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers(), ManagedFields: m.GetManagedFields()}
	if !reflect.DeepEqual(want.ObjectMeta, got) {
		t.Errorf("Lock %s: the CachedLock's metav1.Object reads\n%#v, want\n%#v", want.Name, got, want.ObjectMeta)
	}
	if !c.hasUID(want.UID) || c.hasUID(want.UID+"x") || (want.UID != "" && c.hasUID("")) {
		t.Errorf("Lock %s: hasUID does not tell its UID %q", want.Name, want.UID)
	}
	core, _ := lockCore(c)
	wantCore := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace, DeletionTimestamp: want.DeletionTimestamp}, Spec: want.Spec}
	// The decisions read the selector's matchLabels as requirements
	// (TestCachedSelectorDecides: the same decisions).
	wantCore.Spec.Selector = newCachedSelector(want.Spec.Selector).decided()
	if !reflect.DeepEqual(wantCore, core) {
		t.Errorf("Lock %s: lockCore reads\n%#v, want\n%#v", want.Name, core, wantCore)
	}
	for name, index := range map[string]func(any) ([]string, error){"target": indexByTarget, "kind": indexByTargetKind, "selector": indexBySelector, "coverage": indexByCoverage} {
		wantKeys, _ := index(want)
		gotKeys, _ := index(c)
		if !slices.Equal(wantKeys, gotKeys) {
			t.Errorf("Lock %s: the %s index keys it by %q, want %q", want.Name, name, gotKeys, wantKeys)
		}
	}
	active, ready, reason, _ := lockReadiness(c)
	wantActive, wantReady, wantReason, _ := lockReadiness(want)
	if active != wantActive || ready != wantReady || reason != wantReason {
		t.Errorf("Lock %s: readiness %v %v %q, want %v %v %q", want.Name, active, ready, reason, wantActive, wantReady, wantReason)
	}
}

// scribble changes every value reachable from v (strings, numbers,
// booleans, slices' elements, maps), as a careless reader of a copy might.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(42, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.Map:
		if !v.IsNil() {
			v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	case reflect.String:
		v.SetString(v.String() + "!")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	}
}

// TestCachedLockVarietyCoversEveryField: every field of a Lock that
// compactLock keeps is set (not its zero value) in some Lock of
// cachedLockVariety, so that TestCachedLockExpandsExactly fails when the
// CachedLock drops one.
func TestCachedLockVarietyCoversEveryField(t *testing.T) {
	set, unset := map[string]bool{}, map[string]bool{}
	dropped := map[string]bool{"Labels": true, "Annotations": true, "OwnerReferences": true, "Finalizers": true, "ManagedFields": true}
	for _, l := range cachedLockVariety(t) {
		leaves(reflect.ValueOf(compactLock(l.DeepCopy(), newInterner())).Elem(), "", set, unset)
	}
	for _, path := range slices.Sorted(func(yield func(string) bool) {
		for p := range set {
			if !yield(p) {
				return
			}
		}
		for p := range unset {
			if !set[p] && !yield(p) {
				return
			}
		}
	}) {
		if !set[path] && !dropped[strings.SplitN(path, ".", 3)[1]] {
			t.Errorf("no Lock of cachedLockVariety sets %s", path)
		}
	}
	// The fields compactLock drops are never set in what it keeps; all
	// others are.
	for field := range dropped {
		if set["ObjectMeta."+field] {
			t.Errorf("compactLock keeps %s", field)
		}
	}
	for _, field := range []string{"TypeMeta.APIVersion", "TypeMeta.Kind", "ObjectMeta.Name", "ObjectMeta.GenerateName", "ObjectMeta.SelfLink",
		"ObjectMeta.UID", "ObjectMeta.ResourceVersion", "ObjectMeta.Generation", "ObjectMeta.CreationTimestamp", "ObjectMeta.DeletionTimestamp",
		"ObjectMeta.DeletionGracePeriodSeconds", "Spec.ExpiresAt", "Status.LastException.Exception", "Spec.Selector.MatchExpressions.Values"} {
		if !set[field] {
			t.Errorf("no Lock of cachedLockVariety sets %s", field)
		}
	}
}

// leaves records, under the path of each field reachable from v (by
// field names; slices and pointers followed), whether it is set (not its
// zero value) or unset, descending into structs but timestamps.
func leaves(v reflect.Value, path string, set, unset map[string]bool) {
	mark := func() {
		if v.IsZero() {
			unset[path] = true
		} else {
			set[path] = true
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		mark()
		if !v.IsNil() {
			leaves(v.Elem(), path, set, unset)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			mark()
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			leaves(v.Field(i), p, set, unset)
		}
	case reflect.Slice:
		mark()
		for i := range v.Len() {
			leaves(v.Index(i), path, set, unset)
		}
	default:
		mark()
	}
}

// TestCachedLockDerivesActiveMessage: a CachedLock keeps no Ready message
// that lockv1alpha1.Lock.ActiveMessage gives (a targetRef Lock's, a
// selector Lock's, with an expiry), and reads as the Lock all the same;
// it keeps any other message.
func TestCachedLockDerivesActiveMessage(t *testing.T) {
	selector := baseLock(1)
	selector.Spec.TargetRef, selector.Spec.Selector = lockv1alpha1.TargetReference{}, &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"app": "web"}}
	expiring := baseLock(2)
	expiring.Spec.ExpiresAt = ptr.To(decoded(time.Unix(1800000000, 0)))
	other := baseLock(3)
	for _, l := range []*lockv1alpha1.Lock{baseLock(0), selector, expiring, other} {
		l.Status.Scope = l.ScopeString()
		firstCondition(l).Message = l.ActiveMessage()
	}
	firstCondition(other).Message = "deleting Stack is denied"
	transform := CacheTransform(nil, nil)
	for _, in := range []*lockv1alpha1.Lock{baseLock(0), selector, expiring, other} {
		obj, err := transform(in.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		c := obj.(*CachedLock)
		derived := in != other
		if got := c.flags&flagActiveMessage != 0 && c.ready.message == ""; got != derived {
			t.Errorf("Lock %s (message %q): message derived %v, want %v", in.Name, firstCondition(in).Message, got, derived)
		}
		if diff := cmp.Diff(compactLock(in.DeepCopy(), newInterner()), c.Lock()); diff != "" {
			t.Errorf("Lock %s: -compactLock, +CachedLock:\n%s", in.Name, diff)
		}
	}
}
