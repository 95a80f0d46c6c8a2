package v1alpha1

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// What a Lock covers, targetRef or selector (docs/contract.md rules 1, 2 and 15):
// the rule is written here once, and every guard, the Lock index, the
// reconciler and kubectl lock derive from it.

// ErrNoTargetRef is the error of Target for a selector Lock: it protects
// the objects its selector matches, not one named object.
var ErrNoTargetRef = errors.New("the Lock has a selector, not a targetRef")

// Object is what the rule needs to know of an object to say whether a Lock
// covers it: where it is, what it is, and its labels.
//
// +kubebuilder:object:generate=false
type Object struct {
	Namespace string
	Group     string
	Kind      string
	Name      string
	Labels    map[string]string
	// LabelReader, when set, is read for the labels in place of Labels
	// (ReadLabels): an object cached without a map of its labels
	// (readmodel.Meta) is matched against every selector Lock of its
	// namespace without making one each time.
	LabelReader LabelReader
}

// LabelReader reads an object's labels.
//
// +kubebuilder:object:generate=false
type LabelReader interface {
	// Label returns the value of the label key, and whether there is one.
	Label(key string) (string, bool)
	// Labels yields every label, key and value.
	Labels() iter.Seq2[string, string]
}

// LabelMap is a map of labels as a LabelReader.
//
// +kubebuilder:object:generate=false
type LabelMap map[string]string

// Label returns m[key], and whether m has key.
func (m LabelMap) Label(key string) (string, bool) {
	v, ok := m[key]
	return v, ok
}

// Labels yields the labels of m.
func (m LabelMap) Labels() iter.Seq2[string, string] { return maps.All(m) }

// ReadLabels returns what o's labels are read from: LabelReader when set,
// Labels otherwise. Whatever reads an Object's labels reads them here.
func (o Object) ReadLabels() LabelReader {
	if o.LabelReader != nil {
		return o.LabelReader
	}
	return LabelMap(o.Labels)
}

// Key returns the object's TargetKey.
func (o Object) Key() TargetKey {
	return TargetKey{Namespace: o.Namespace, Group: o.Group, Kind: o.Kind, Name: o.Name}
}

// Object returns the object of key k with labels.
func (k TargetKey) Object(labels map[string]string) Object {
	return Object{Namespace: k.Namespace, Group: k.Group, Kind: k.Kind, Name: k.Name, Labels: labels}
}

// HasSelector reports whether the Lock is a selector Lock (spec.selector
// set) rather than a targetRef Lock.
func (l *Lock) HasSelector() bool { return l.Spec.Selector != nil }

// LabelSelector returns the selector's labels as a metav1.LabelSelector
// (without Kinds), for display and for the label selectors of API calls.
func (s *LockSelector) LabelSelector() *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if len(s.MatchLabels) > 0 {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = v
		}
	}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key:      r.Key,
			Operator: metav1.LabelSelectorOperator(r.Operator),
			Values:   slices.Clone(r.Values),
		})
	}
	return out
}

// ScopeString names what the Lock covers, compactly, as status.scope,
// `kubectl get locks` (its Scope column), kubectl lock list and why show
// it: Kind/name for a targetRef Lock (Stack/forge; Kind.group/name when
// the target's group is not core.navique.com, as an InvalidTarget Lock's
// may be), LockSelector.String for a selector Lock (selector:tier=db, with
// ;kinds=Stack,Gateway when it names kinds), AllScope for an empty
// selector. It is computed from the spec alone, which cannot change the
// scope, so it never changes for a given Lock.
func (l *Lock) ScopeString() string {
	if s := l.Spec.Selector; s != nil {
		return s.String()
	}
	ref := l.Spec.TargetRef
	gk, err := ref.GroupKind()
	if err != nil || gk.Group == Group {
		return ref.Kind + "/" + ref.Name
	}
	return gk.String() + "/" + ref.Name
}

// AllScope is how a selector that selects everything is shown: every
// object of the namespace and the namespace itself.
const AllScope = "<all>"

// String shows the selector as kubectl lock and denial messages do:
// selector:tier=db (kubectl's label selector syntax), then ;kinds=A,B when
// it names kinds, or AllScope for an empty selector.
func (s *LockSelector) String() string {
	if s.IsEmpty() {
		return AllScope
	}
	var out strings.Builder
	out.WriteString("selector:")
	if s.validLabelsAlone() {
		// FormatLabelSelector's text of such a selector, without building
		// it: key=value, by key, comma-separated.
		keys := make([]string, 0, len(s.MatchLabels))
		for k := range s.MatchLabels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				out.WriteByte(',')
			}
			out.WriteString(k)
			out.WriteByte('=')
			out.WriteString(s.MatchLabels[k])
		}
	} else {
		out.WriteString(metav1.FormatLabelSelector(s.LabelSelector()))
	}
	if len(s.Kinds) > 0 {
		out.WriteString(";kinds=")
		out.WriteString(strings.Join(s.Kinds, ","))
	}
	return out.String()
}

// validLabelsAlone reports whether the selector has matchLabels and no
// expressions, and every key and value is one
// metav1.LabelSelectorAsSelector accepts (labels.NewRequirement's checks):
// what every pass of a selector Lock asks (String, Validate), answered
// without building a labels.Selector.
func (s *LockSelector) validLabelsAlone() bool {
	if len(s.MatchLabels) == 0 || len(s.MatchExpressions) > 0 {
		return false
	}
	for k, v := range s.MatchLabels {
		if len(content.IsLabelKey(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return false
		}
	}
	return true
}

// IsEmpty reports whether the selector selects everything: no labels, no
// expressions and no kinds. An empty selector Lock covers the namespace too.
func (s *LockSelector) IsEmpty() bool {
	return len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 && len(s.Kinds) == 0
}

// Validate returns nil when the selector is one Kubernetes would accept (the
// same check as metav1.LabelSelectorAsSelector: label key and value syntax,
// operators, values per operator) and its kinds can be locked; otherwise
// an error that says what is wrong. An invalid selector covers nothing and
// its Lock is InvalidTarget: it never silently means everything.
func (s *LockSelector) Validate() error {
	if !s.validLabelsAlone() {
		if _, err := metav1.LabelSelectorAsSelector(s.LabelSelector()); err != nil {
			return fmt.Errorf("selector is not a valid label selector: %w", err)
		}
	}
	for _, k := range s.Kinds {
		if err := Protectable(schema.GroupKind{Group: Group, Kind: k}); err != nil {
			return fmt.Errorf("selector.kinds: %w", err)
		}
	}
	return nil
}

// Matches reports whether the selector matches an object of that kind and
// labels, as metav1.LabelSelectorAsSelector's selector would (Kinds aside),
// without building it. The selector must be valid (Validate).
func (s *LockSelector) Matches(kind string, lbls map[string]string) bool {
	return s.MatchesLabels(kind, LabelMap(lbls))
}

// MatchesLabels is Matches of the labels lbls reads.
func (s *LockSelector) MatchesLabels(kind string, lbls LabelReader) bool {
	if len(s.Kinds) > 0 && !slices.Contains(s.Kinds, kind) {
		return false
	}
	for k, v := range s.MatchLabels {
		if got, ok := lbls.Label(k); !ok || got != v {
			return false
		}
	}
	for _, r := range s.MatchExpressions {
		got, ok := lbls.Label(r.Key)
		switch r.Operator {
		case SelectorOpIn:
			if !ok || !slices.Contains(r.Values, got) {
				return false
			}
		case SelectorOpNotIn:
			if ok && slices.Contains(r.Values, got) {
				return false
			}
		case SelectorOpExists:
			if !ok {
				return false
			}
		case SelectorOpDoesNotExist:
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Scope returns nil when the Lock's scope can protect something: its
// targetRef is valid (Target) or its selector is (LockSelector.Validate);
// otherwise an error that says why it never can.
func (l *Lock) Scope() error {
	if s := l.Spec.Selector; s != nil {
		return s.Validate()
	}
	_, err := l.Target()
	return err
}

// Covers reports whether the Lock protects o at time t: the Lock is live
// at t (Live), o is a lockable object of the Lock's namespace
// (Protectable), and o is the Lock's target (group, kind and name) or its
// selector matches o's kind and labels (Selects). A delete of o is denied
// while a Lock covers it.
func (l *Lock) Covers(o Object, t time.Time) bool {
	return l.Live(t) && l.Selects(o)
}

// Selects is Covers without the Lock's liveness: whether o is a lockable
// object of the Lock's namespace (Protectable) that is the Lock's target or
// that its selector matches (LockSelector.Matches). It means something only
// for a live Lock: it is for readers that already know that the Lock is
// standing (the Lock index, which holds standing Locks alone, and checks
// their expiry with Live as it reads them), and costs them no parsing,
// where Standing validates the selector each time it is asked.
func (l *Lock) Selects(o Object) bool {
	if o.Namespace != l.Namespace || Protectable(schema.GroupKind{Group: o.Group, Kind: o.Kind}) != nil {
		return false
	}
	if s := l.Spec.Selector; s != nil {
		// An opted-in kind is covered only where the kinds name it
		// (docs/contract.md rule 21).
		if o.Group != Group && !slices.Contains(s.Kinds, o.Kind) {
			return false
		}
		return s.MatchesLabels(o.Kind, o.ReadLabels())
	}
	key, err := l.Target()
	return err == nil && key == o.Key()
}

// CoversKind reports whether the Lock could cover some object of kind gk
// at time t whatever its name and labels: a targetRef Lock live at t of
// that kind, or a selector Lock live at t whose kinds are empty or include
// it. A guard that cannot read an object's labels fails closed when a
// Lock could cover it.
func (l *Lock) CoversKind(gk schema.GroupKind, t time.Time) bool {
	if Protectable(gk) != nil || !l.Live(t) {
		return false
	}
	if s := l.Spec.Selector; s != nil {
		if gk.Group != Group {
			return slices.Contains(s.Kinds, gk.Kind)
		}
		return len(s.Kinds) == 0 || slices.Contains(s.Kinds, gk.Kind)
	}
	key, _ := l.Target()
	return key.GroupKind() == gk
}

// CoversNamespace reports whether the Lock protects its namespace itself
// at time t, whatever the namespace holds: it is a Lock live at t with an
// empty selector.
func (l *Lock) CoversNamespace(t time.Time) bool {
	s := l.Spec.Selector
	return s != nil && s.IsEmpty() && l.Live(t)
}

// SelectorOptedInKinds returns the kinds of other groups than
// core.navique.com (opted in, docs/contract.md rule 21) whose objects a
// selector Lock could cover at time t (CoversKind): those its kinds name.
// It returns nil for a targetRef Lock and for a Lock not live at t.
func (l *Lock) SelectorOptedInKinds(t time.Time) []schema.GroupKind {
	s := l.Spec.Selector
	if s == nil {
		return nil
	}
	var out []schema.GroupKind
	for _, k := range s.Kinds {
		if gk := SelectorKind(k); gk.Group != Group && l.CoversKind(gk, t) && !slices.Contains(out, gk) {
			out = append(out, gk)
		}
	}
	return out
}
