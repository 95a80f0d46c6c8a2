package readmodel

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// trimLock drops from c, in place, its labels, annotations, owner
// references, finalizers and managedFields, and shares through shared its
// strings that many Locks repeat (apiVersion and kind, namespace, its
// target's apiVersion and kind, level, enforcement, reason, its
// selector's labels, its conditions' type, status and reason, and their
// message but the Ready condition's, which names the Lock's target)
// (issue 38).
func trimLock(c *lockv1alpha1.Lock, shared *interner) {
	c.Labels, c.Annotations, c.OwnerReferences, c.Finalizers, c.ManagedFields = nil, nil, nil, nil, nil
	c.APIVersion, c.Kind, c.Namespace = shared.string(c.APIVersion), shared.string(c.Kind), shared.string(c.Namespace)
	s := &c.Spec
	s.TargetRef.APIVersion, s.TargetRef.Kind = shared.string(s.TargetRef.APIVersion), shared.string(s.TargetRef.Kind)
	s.Level = lockv1alpha1.LockLevel(shared.string(string(s.Level)))
	s.Enforcement = lockv1alpha1.Enforcement(shared.string(string(s.Enforcement)))
	s.Reason = shared.string(s.Reason)
	if sel := s.Selector; sel != nil && len(sel.MatchLabels) > 0 {
		// Read once, by newCachedSelector, which keeps the strings.
		m := make(map[string]string, len(sel.MatchLabels))
		for k, v := range sel.MatchLabels {
			m[shared.string(k)] = shared.string(v)
		}
		sel.MatchLabels = m
	}
	for i := range c.Status.Conditions {
		cond := &c.Status.Conditions[i]
		cond.Type, cond.Reason = shared.string(cond.Type), shared.string(cond.Reason)
		cond.Status = metav1.ConditionStatus(shared.string(string(cond.Status)))
		if cond.Type != lockv1alpha1.ConditionReady {
			cond.Message = shared.string(cond.Message)
		}
	}
	if p := c.Status.Protected; p != nil {
		for i := range p.Resources {
			p.Resources[i].Kind = shared.string(p.Resources[i].Kind)
		}
	}
}
