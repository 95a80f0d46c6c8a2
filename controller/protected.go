package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// status.protected: what a Lock covers now, computed from the reconciler's
// caches with the webhook's own rule (lockv1alpha1.Lock.Covers), never a
// second copy of it. A targetRef Lock covers its target when the target
// exists (reconcileTarget reads it anyway); a selector Lock covers the
// cached objects of its namespace, of its kinds, that it Covers
// (protectedBy).

// protectedNone is the status.protected of a Lock that covers nothing.
func protectedNone() *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: 0}
}

// protectedTarget is the status.protected of a targetRef Lock whose target
// exists: one resource, named.
func protectedTarget(target lockv1alpha1.TargetKey) *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: target.Kind, Name: target.Name}}}
}

// protectedList collects what a Lock covers: it counts every resource
// added and keeps the first lockv1alpha1.MaxProtectedNames by kind and
// name, so that its memory does not grow with the count.
type protectedList struct {
	count int32
	first []lockv1alpha1.ProtectedResource
}

// add counts r, and keeps it if it is among the first names.
func (p *protectedList) add(r lockv1alpha1.ProtectedResource) {
	p.count++
	i, _ := slices.BinarySearchFunc(p.first, r, compareProtected)
	if i >= lockv1alpha1.MaxProtectedNames {
		return
	}
	if len(p.first) == lockv1alpha1.MaxProtectedNames {
		p.first = p.first[:lockv1alpha1.MaxProtectedNames-1]
	}
	p.first = slices.Insert(p.first, i, r)
}

// status is the list as status.protected says it.
func (p *protectedList) status() *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: p.count, Resources: p.first}
}

// compareProtected orders resources by kind, then name.
func compareProtected(a, b lockv1alpha1.ProtectedResource) int {
	return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}

// protectedListTimeout bounds the cache reads of one protectedBy.
const protectedListTimeout = 10 * time.Second

// protectedBy returns the status.protected of the selector Lock lock: the
// objects of its namespace, of every watched kind (of its kinds, when it
// names some), that lock.Covers, as the metadata caches hold them.
//
// It reads every cached object of those kinds in the namespace: a pass
// over a selector Lock costs O(N) in-memory checks for N objects there,
// and makes no API call. Object events bring the Lock back here at most
// once per protectedRecount (requestsOfObject), so a burst of creates in
// a namespace costs each of its M selector Locks one pass per
// protectedRecount, not one per object.
func (r *reconciler) protectedBy(ctx context.Context, lock *lockv1alpha1.Lock) (*lockv1alpha1.ProtectedStatus, error) {
	if r.watches == nil {
		return protectedNone(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, protectedListTimeout)
	defer cancel()
	var list protectedList
	err := r.watches.eachIn(ctx, lock.Namespace, lock.Spec.Selector.Kinds, func(gk schema.GroupKind, o *metav1.PartialObjectMetadata) {
		if lock.Covers(lockv1alpha1.Object{Namespace: o.Namespace, Group: gk.Group, Kind: gk.Kind, Name: o.Name, Labels: o.Labels}) {
			list.add(lockv1alpha1.ProtectedResource{Kind: gk.Kind, Name: o.Name})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listing what Lock %s covers: %w", client.ObjectKeyFromObject(lock), err)
	}
	return list.status(), nil
}
