package lockctl

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Freeze states of a ReadOnly Lock (freezeState): its ReadOnly condition's
// reasons, as lockguard writes them.
const (
	freezeInForce = lockv1alpha1.ReasonInForce
	freezePending = lockv1alpha1.ReasonPending
	// freezeOff: lockguard serves no update guard; nothing is frozen.
	freezeOff = lockv1alpha1.ReasonGuardDisabled
)

// levelOf returns the Lock's level: spec.level, CanNotDelete when unset
// (the API server's default).
func levelOf(l *lockv1alpha1.Lock) lockv1alpha1.LockLevel {
	if l.Spec.Level == "" {
		return lockv1alpha1.LevelCanNotDelete
	}
	return l.Spec.Level
}

// readOnly reports whether l is a ReadOnly Lock.
func readOnly(l *lockv1alpha1.Lock) bool {
	return levelOf(l) == lockv1alpha1.LevelReadOnly
}

// freezeState says whether the freeze of a ReadOnly Lock is in force, as
// its ReadOnly condition does: freezeInForce when the condition is True
// for the Lock's current generation, freezeOff when it is False because
// lockguard serves no update guard, freezePending otherwise (False, or
// not reported yet for this generation), with the condition's message
// (or what is missing). It returns "" for a Lock that is not ReadOnly.
func freezeState(l *lockv1alpha1.Lock) (state, message string) {
	if !readOnly(l) {
		return "", ""
	}
	c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly)
	switch {
	case c == nil:
		return freezePending, "lockguard has not reported the Lock's ReadOnly condition (a lockguard without ReadOnly Locks never does)"
	case l.Status.ObservedGeneration < l.Generation || (c.ObservedGeneration != 0 && c.ObservedGeneration < l.Generation):
		return freezePending, "lockguard has not reported the ReadOnly condition for the Lock's current generation yet"
	case c.Status == metav1.ConditionTrue:
		return freezeInForce, c.Message
	case c.Reason == lockv1alpha1.ReasonGuardDisabled:
		return freezeOff, c.Message
	}
	return freezePending, c.Message
}

// levelString is the LEVEL cell of kubectl lock list: CanNotDelete, or
// ReadOnly with whether its freeze is in force: "ReadOnly (in force)" or
// "ReadOnly (pending)", or "ReadOnly (guard disabled)".
func levelString(l *lockv1alpha1.Lock) string {
	switch state, _ := freezeState(l); state {
	case freezeInForce:
		return "ReadOnly (in force)"
	case freezePending:
		return "ReadOnly (pending)"
	case freezeOff:
		return "ReadOnly (guard disabled)"
	}
	return string(levelOf(l))
}

// sameLevel returns an error when the existing Lock is less strict than
// the one kubectl lock would create: asked for ReadOnly, it is
// CanNotDelete. A stricter existing Lock is kept (with a warning).
func sameLevel(existing, want *lockv1alpha1.Lock, ns string) error {
	if readOnly(want) && !readOnly(existing) && ns == "" {
		return fmt.Errorf("%s %q already exists with level %s: raise its level (kubectl lock update clusterlock/%s --level ReadOnly) or choose another name with --name",
			clusterLockGroupResource, existing.Name, levelOf(existing), existing.Name)
	}
	if readOnly(want) && !readOnly(existing) {
		return fmt.Errorf("%s %q already exists with level %s: raise its level (kubectl lock update %s -n %s --level ReadOnly) or choose another name with --name",
			lockGroupResource, existing.Name, levelOf(existing), existing.Name, ns)
	}
	return nil
}

// defaultLockName is KIND-NAME, lowercased: stack-forge.
func defaultLockName(t target) string {
	return strings.ToLower(t.kind()) + "-" + t.name
}

// lockName is --name, or else the default name of a Lock on t
// (defaultLockName), which must be a valid object name.
func (o *lockOptions) lockName(t target) (string, error) {
	if o.name != "" {
		return o.name, nil
	}
	name := defaultLockName(t)
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("cannot name the Lock %q (%s): choose a name with --name", name, msgs[0])
	}
	return name, nil
}
