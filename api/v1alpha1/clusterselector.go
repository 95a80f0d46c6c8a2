package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Selector ClusterLocks (docs/contract.md rule 22): a ClusterLock's
// spec.selector covers the cluster-scoped objects of its kinds whose
// labels match. What it covers is decided here once; the webhook, the
// reconciler and kubectl lock why derive from it.

// MaxClusterSelected is the most objects a selector ClusterLock's create
// labels before it is allowed (docs/clusterlock.md): a create whose
// selector matches more is refused, naming the count, so that one create
// never sends lockguard thousands of writes in a webhook call.
const MaxClusterSelected = 1000

// ErrClusterSelector is the error of Target for a selector ClusterLock: it
// protects the objects its selector matches, not one named object.
var ErrClusterSelector = errors.New("the ClusterLock has a selector, not a targetRef")

// ClusterLockSelector chooses the cluster-scoped objects a selector
// ClusterLock protects: those of one of Kinds whose labels match
// MatchLabels and MatchExpressions (a Kubernetes label selector's fields
// and meaning, as LockSelector's). It must require a label (a matchLabels
// entry, or an In or Exists expression): a ClusterLock never selects the
// objects of a kind by what they lack, and never every Namespace of the
// cluster; name one object with targetRef instead.
//
// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && self.matchExpressions.exists(r, r.operator == 'In' || r.operator == 'Exists'))",message="a ClusterLock's selector must require a label (a matchLabels entry, or a matchExpressions requirement with the operator In or Exists): it never selects every object of a kind; protect one object by name with targetRef"
type ClusterLockSelector struct {
	// Kinds are the kinds the selector covers, each spelled exactly as the
	// API serves it: Namespace, CustomResourceDefinition, ClusterRole,
	// StorageClass, PersistentVolume, or a cluster-scoped kind of
	// core.navique.com. At least one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Z][A-Za-z0-9]*$`
	// +listType=set
	// +required
	Kinds []string `json:"kinds"`

	// MatchLabels selects objects that carry every one of these labels
	// with exactly these values.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="a label key has at most 317 characters and a label value at most 63"
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions selects objects whose labels satisfy every one of
	// these requirements.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// ClusterKind returns the group and kind a selector ClusterLock's kind
// names: the kind of ClusterLockableKinds spelled so, otherwise the kind of
// core.navique.com (which may not be served: the status says so).
func ClusterKind(kind string) schema.GroupKind {
	for _, k := range ClusterLockableKinds {
		if k.Kind == kind {
			return k
		}
	}
	return schema.GroupKind{Group: Group, Kind: kind}
}

// GroupKinds returns the group and kind of each of the selector's kinds
// (ClusterKind), in order.
func (s *ClusterLockSelector) GroupKinds() []schema.GroupKind {
	out := make([]schema.GroupKind, 0, len(s.Kinds))
	for _, k := range s.Kinds {
		out = append(out, ClusterKind(k))
	}
	return out
}

// lockSelector is s as a LockSelector (the same fields), for the code
// ClusterLocks share with Locks: label selectors, matching, display. nil
// for nil.
func (s *ClusterLockSelector) lockSelector() *LockSelector {
	if s == nil {
		return nil
	}
	return &LockSelector{MatchLabels: s.MatchLabels, MatchExpressions: s.MatchExpressions, Kinds: s.Kinds}
}

// LabelSelector returns the selector's labels as a metav1.LabelSelector
// (without Kinds), for the label selectors of API calls.
func (s *ClusterLockSelector) LabelSelector() *metav1.LabelSelector {
	return s.lockSelector().LabelSelector()
}

// String shows the selector as status.scope and kubectl lock do:
// selector:tier=prod;kinds=Namespace (LockSelector.String).
func (s *ClusterLockSelector) String() string { return s.lockSelector().String() }

// RequiresLabel reports whether the selector requires a label: a
// matchLabels entry, or an In or Exists expression (the API server's rule,
// checked again here: a selector that does not never covers anything).
func (s *ClusterLockSelector) RequiresLabel() bool {
	return len(s.MatchLabels) > 0 || slices.ContainsFunc(s.MatchExpressions, func(r LabelSelectorRequirement) bool {
		return r.Operator == SelectorOpIn || r.Operator == SelectorOpExists
	})
}

// Validate returns nil when the selector can protect something: it names
// a kind, requires a label (RequiresLabel), is a label selector Kubernetes
// would accept, and ClusterProtectable accepts each of its kinds;
// otherwise an error that says what is wrong. An invalid selector covers
// nothing and its ClusterLock is InvalidTarget.
func (s *ClusterLockSelector) Validate() error {
	if len(s.Kinds) == 0 {
		return errors.New("selector.kinds is empty: name the kinds the selector covers (Namespace, ClusterRole, ...)")
	}
	if !s.RequiresLabel() {
		return errors.New("the selector requires no label (a matchLabels entry, or an In or Exists expression): it would cover every object of its kinds")
	}
	if _, err := metav1.LabelSelectorAsSelector(s.LabelSelector()); err != nil {
		return fmt.Errorf("selector is not a valid label selector: %w", err)
	}
	var errs []string
	for _, gk := range s.GroupKinds() {
		if err := ClusterProtectable(gk); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("selector.kinds: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Matches reports whether the selector matches an object of gk with
// labels lbls: gk is one of its kinds (ClusterKind) and the labels match.
// The selector must be valid (Validate).
func (s *ClusterLockSelector) Matches(gk schema.GroupKind, lbls map[string]string) bool {
	return s.MatchesLabels(gk, LabelMap(lbls))
}

// MatchesLabels is Matches of the labels lbls reads.
func (s *ClusterLockSelector) MatchesLabels(gk schema.GroupKind, lbls LabelReader) bool {
	return slices.Contains(s.GroupKinds(), gk) && s.lockSelector().MatchesLabels(gk.Kind, lbls)
}

// HasSelector reports whether the ClusterLock is a selector ClusterLock
// (spec.selector set) rather than a targetRef one.
func (c *ClusterLock) HasSelector() bool { return c.Spec.Selector != nil }

// Scope returns nil when the ClusterLock's scope can protect something:
// its targetRef is valid (Target) or its selector is
// (ClusterLockSelector.Validate); otherwise an error that says why it
// never can.
func (c *ClusterLock) Scope() error {
	if s := c.Spec.Selector; s != nil {
		return s.Validate()
	}
	_, err := c.Target()
	return err
}

// Selects is Covers without the ClusterLock's liveness: whether the
// cluster-scoped o is its target, or an object its selector matches.
func (c *ClusterLock) Selects(o Object) bool {
	if o.Namespace != "" {
		return false
	}
	if s := c.Spec.Selector; s != nil {
		return s.Validate() == nil && s.MatchesLabels(schema.GroupKind{Group: o.Group, Kind: o.Kind}, o.ReadLabels())
	}
	key, err := c.Target()
	return err == nil && key.Group == o.Group && key.Kind == o.Kind && key.Name == o.Name
}

// ScopeString names what the ClusterLock covers, as status.scope shows
// it: Kind/name (Kind.group/name outside the core group) or the
// selector's String.
func (c *ClusterLock) ScopeString() string { return c.AsLock().ScopeString() }
