package v1alpha1

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What a Lock can protect, and when it counts: the rule is written here
// once, and the webhook, the Lock index and the reconciler all derive from
// it.

// ErrNotProtectable is the error of a kind no Lock can protect: one outside
// the core.navique.com group that the installation does not opt in
// (SetOptedIn; docs/contract.md rule 21).
var ErrNotProtectable = errors.New("only " + Group + " resources can be locked")

// CreateRefusedRetry is in lockguard's answer to a Lock create it refuses,
// retryably (HTTP 503), because a replica could not be told about the Lock
// first (docs/contract.md rule 13; internal/peers): the same create may succeed a
// moment later.
const CreateRefusedRetry = "the Lock was not created because every lockguard replica must know of it first; retry"

// TargetLabelRefusedRetry begins lockguard's answer to a Lock create it
// refuses, retryably (HTTP 503), because it could not put ProtectedLabel
// on an object the Lock covers first (docs/optin.md: a write failed, or
// a selector Lock's writes outran the webhook's timeout): the same create
// may succeed a moment later, and a selector Lock's does not label again
// what the refused attempt labelled.
const TargetLabelRefusedRetry = "the Lock was not created because lockguard could not label its target " + ProtectedLabel + "=true first; retry"

// ErrLockTarget is the error of a Lock that targets a Lock.
var ErrLockTarget = errors.New("a Lock cannot protect another Lock: deleting a Lock is never blocked")

// ErrExceptionTarget is the error of a Lock that targets a LockException:
// revoking an exception (deleting it) is never blocked.
var ErrExceptionTarget = errors.New("a Lock cannot protect a LockException: deleting an exception is never blocked")

// Protectable returns nil when Locks can protect objects of gk: kinds of the
// core.navique.com group other than Lock and LockException, and the kinds
// the installation opts in (SetOptedIn). Otherwise it returns
// ErrNotProtectable, ErrLockTarget or ErrExceptionTarget.
func Protectable(gk schema.GroupKind) error {
	switch {
	case gk.Group != Group && IsOptedIn(gk):
		return nil
	case gk.Group != Group:
		return ErrNotProtectable
	case gk.Kind == "Lock":
		return ErrLockTarget
	case gk.Kind == "LockException":
		return ErrExceptionTarget
	}
	return nil
}

// TargetKey identifies an object a Lock can protect: its namespace, group,
// kind and name. The version is not part of it: a Stack deleted through
// v1beta1 is the same Stack.
//
// +kubebuilder:object:generate=false
type TargetKey struct {
	Namespace string
	Group     string
	Kind      string
	Name      string
}

// GroupKind returns the key's group and kind.
func (k TargetKey) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: k.Group, Kind: k.Kind}
}

// String returns "namespace/group/Kind/name", unique per key: none of the
// four contains a slash.
func (k TargetKey) String() string {
	return k.Namespace + "/" + k.Group + "/" + k.Kind + "/" + k.Name
}

// Target returns the key of the object the Lock protects, in its
// namespace, or an error that says why it can never protect it: its
// apiVersion does not parse, Protectable refuses its kind, or it is a
// selector Lock (ErrNoTargetRef; see Covers).
func (l *Lock) Target() (TargetKey, error) {
	if l.Spec.Selector != nil {
		return TargetKey{}, ErrNoTargetRef
	}
	ref := l.Spec.TargetRef
	gk, err := ref.GroupKind()
	if err != nil {
		return TargetKey{}, fmt.Errorf("targetRef.apiVersion %q is not a valid API version: %w", ref.APIVersion, err)
	}
	if err := Protectable(gk); err != nil {
		if errors.Is(err, ErrNotProtectable) {
			err = fmt.Errorf("%w, and targetRef.apiVersion %q is in group %q; %s", err, ref.APIVersion, gk.Group, OptInHint(gk))
		}
		return TargetKey{}, err
	}
	return TargetKey{Namespace: l.Namespace, Group: gk.Group, Kind: gk.Kind, Name: ref.Name}, nil
}

// LiveTarget returns the key of the object the Lock protects, and whether
// the Lock counts at time t (Live). A delete of the object is denied while
// a live Lock targets it. A selector Lock has no target: false (see
// Covers and Live).
func (l *Lock) LiveTarget(t time.Time) (TargetKey, bool) {
	key, standing := l.StandingTarget()
	return key, standing && !l.ExpiredAt(t)
}

// StandingTarget is LiveTarget whatever the time (Standing): for the Lock
// index, which holds standing Locks and checks their expiry as it reads
// them.
func (l *Lock) StandingTarget() (TargetKey, bool) {
	if l.DeletionTimestamp != nil {
		return TargetKey{}, false
	}
	key, err := l.Target()
	return key, err == nil
}
