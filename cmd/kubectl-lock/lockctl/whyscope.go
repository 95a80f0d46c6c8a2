package lockctl

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// whySelector is a live selector Lock of a resource's namespace and its
// verdict on the resource.
type whySelector struct {
	// Name is the Lock's name.
	Name string `json:"name"`
	// Selector is its selector as kubectl lock list shows it
	// (selector:tier=db, <all>).
	Selector string `json:"selector"`
	// Level is its level: CanNotDelete or ReadOnly.
	Level string `json:"level"`
	// Covers is the verdict: the Lock covers the resource (Lock.Covers,
	// the rule lockguard's guards and reconciler decide with).
	Covers bool `json:"covers"`
	// Requirements are the selector's requirements, each met or not by
	// the resource; none for an empty selector, which covers everything.
	Requirements []whyRequirement `json:"requirements"`
}

// whyRequirement is one requirement of a selector against a resource.
type whyRequirement struct {
	// Requirement is written in kubectl's label selector syntax (tier=db,
	// tier in (cache,db), !legacy), or "kind in (A,B)" for the selector's
	// kinds.
	Requirement string `json:"requirement"`
	// Label is what the resource has under the requirement's key, as
	// key=value ("kind=Stack" for kinds), or "" when it has no such label.
	Label string `json:"label,omitempty"`
	// Met is whether the resource meets the requirement.
	Met bool `json:"met"`
	// key is the label key the requirement is about ("kind" for kinds).
	key string
}

// whyUpdate is what lockguard does with an UPDATE or PATCH of a resource's
// spec and metadata (docs/contract.md rules 7 and 16). Which ReadOnly Locks cover
// the resource, and their freeze, are read from the Locks (Lock.Covers,
// their level and their ReadOnly condition); whether lockguard refuses the
// asking user's update is the API server's answer to that user's
// server-side dry-run PATCH, which lockguard's update guard decides with
// the user's identity and the installation's exemptions (probeUpdate).
type whyUpdate struct {
	// Frozen is true when a live ReadOnly Lock covers the resource: once
	// the freeze is in force, lockguard refuses updates and patches of its
	// spec and metadata, except by the principals the installation
	// exempts; the status subresource stays writable.
	Frozen bool `json:"frozen"`
	// InForce is true when the freeze is in force: one of Locks reports
	// its ReadOnly condition InForce for its current generation.
	InForce bool `json:"inForce"`
	// GuardDisabled is true when every Lock of Locks reports that its
	// lockguard serves no update guard: nothing refuses the updates.
	GuardDisabled bool `json:"guardDisabled,omitempty"`
	// User is who asked, as the API server authenticates the plugin's
	// credentials (a SelfSubjectReview); "" when it does not tell.
	User string `json:"user,omitempty"`
	// Asked is true when a ReadOnly Lock covers the resource, so that why
	// sent a server-side dry-run PATCH of its metadata as User (it changes
	// nothing) to learn whether lockguard refuses User's updates.
	Asked bool `json:"asked"`
	// Refused is true when lockguard refuses User's updates of the
	// resource's spec and metadata now: its update guard denied the dry
	// run, or did not answer (the API server then refuses, failurePolicy
	// Fail).
	Refused bool `json:"refused"`
	// Answer is the API server's answer to the dry run: "allowed", or its
	// error.
	Answer string `json:"answer,omitempty"`
	// Locks are the live ReadOnly Locks that cover the resource, sorted by
	// name.
	Locks []whyFreeze `json:"locks"`
	// Message says it in a sentence.
	Message string `json:"message"`
	// noun is what freezes the resource: "Lock", or "ClusterLock" for a
	// cluster-scoped object.
	noun string
}

// whyFreeze is a ReadOnly Lock and the state of its freeze.
type whyFreeze struct {
	// Name is the Lock's name.
	Name string `json:"name"`
	// Scope is what it covers, as kubectl lock list shows it.
	Scope string `json:"scope"`
	// Freeze is InForce or Pending (the Lock's ReadOnly condition).
	Freeze string `json:"freeze"`
	// Message is the condition's message, or what is missing.
	Message string `json:"message,omitempty"`
}

// covering returns the Locks among locks that cover o (Lock.Covers: the
// live Locks that target it, and the live selector Locks whose selectors
// match it), sorted by name.
func covering(locks []lockv1alpha1.Lock, o lockv1alpha1.Object) []lockv1alpha1.Lock {
	var out []lockv1alpha1.Lock
	now := clock()
	for i := range locks {
		if locks[i].Covers(o, now) {
			out = append(out, locks[i])
		}
	}
	slices.SortFunc(out, func(a, b lockv1alpha1.Lock) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// selectorVerdicts explains, for each live selector Lock among locks
// (sorted by name), whether it covers o and which of its requirements o's
// labels meet. The verdict is Lock.Covers; each requirement is checked
// alone by the same matcher (LockSelector.Matches), so the requirements
// explain the verdict and never disagree with it.
func selectorVerdicts(locks []lockv1alpha1.Lock, o lockv1alpha1.Object) []whySelector {
	out := []whySelector{}
	now := clock()
	for i := range locks {
		l := &locks[i]
		if !l.HasSelector() || !l.Live(now) {
			continue
		}
		out = append(out, whySelector{
			Name:         l.Name,
			Selector:     l.Spec.Selector.String(),
			Level:        string(levelOf(l)),
			Covers:       l.Covers(o, now),
			Requirements: requirements(l.Spec.Selector, o),
		})
	}
	slices.SortFunc(out, func(a, b whySelector) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// requirements splits s into its requirements, each checked alone
// against o: kinds first, then matchLabels by key, then matchExpressions
// in order.
func requirements(s *lockv1alpha1.LockSelector, o lockv1alpha1.Object) []whyRequirement {
	out := []whyRequirement{}
	if len(s.Kinds) > 0 {
		only := &lockv1alpha1.LockSelector{Kinds: s.Kinds}
		out = append(out, whyRequirement{
			Requirement: "kind in (" + strings.Join(s.Kinds, ",") + ")",
			Label:       "kind=" + o.Kind,
			Met:         only.Matches(o.Kind, o.Labels),
			key:         "kind",
		})
	}
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		only := &lockv1alpha1.LockSelector{MatchLabels: map[string]string{k: s.MatchLabels[k]}}
		out = append(out, whyRequirement{
			Requirement: metav1.FormatLabelSelector(only.LabelSelector()),
			Label:       labelOf(o.Labels, k),
			Met:         only.Matches(o.Kind, o.Labels),
			key:         k,
		})
	}
	for _, r := range s.MatchExpressions {
		only := &lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{r}}
		out = append(out, whyRequirement{
			Requirement: metav1.FormatLabelSelector(only.LabelSelector()),
			Label:       labelOf(o.Labels, r.Key),
			Met:         only.Matches(o.Kind, o.Labels),
			key:         r.Key,
		})
	}
	return out
}

// labelOf is key=value of the label key in lbls, or "" when there is none.
func labelOf(lbls map[string]string, key string) string {
	if v, ok := lbls[key]; ok {
		return key + "=" + v
	}
	return ""
}

// updateVerdict says what lockguard does with an update of o's spec and
// metadata, from the live ReadOnly Locks among locks that cover o
// (Lock.Covers) and their ReadOnly conditions.
func updateVerdict(locks []lockv1alpha1.Lock, o lockv1alpha1.Object) *whyUpdate {
	return freezeVerdict("Lock", covering(locks, o))
}

// freezeVerdict is updateVerdict from the live Locks that cover the
// resource, or the AsLock views of the live ClusterLocks that name it
// (noun "ClusterLock"): those that are ReadOnly freeze it.
func freezeVerdict(noun string, covering []lockv1alpha1.Lock) *whyUpdate {
	u := &whyUpdate{Locks: []whyFreeze{}, noun: noun}
	var names, inForce []string
	off := 0
	for _, l := range covering {
		if !readOnly(&l) {
			continue
		}
		state, msg := freezeState(&l)
		u.Locks = append(u.Locks, whyFreeze{Name: l.Name, Scope: scopeString(&l), Freeze: state, Message: msg})
		names = append(names, l.Name)
		switch state {
		case freezeInForce:
			inForce = append(inForce, l.Name)
		case freezeOff:
			off++
		}
	}
	u.Frozen, u.InForce = len(names) > 0, len(inForce) > 0
	u.GuardDisabled = u.Frozen && off == len(names)
	switch {
	case !u.Frozen:
		u.Message = "no ReadOnly " + noun + " covers it: lockguard never blocks its updates"
	case u.InForce:
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it and the freeze is in force (%v): updates and patches of its spec and metadata are refused, "+
			"except by the principals the installation exempts (the navique operator's ServiceAccount by default); its status subresource stays writable", noun, names, inForce)
	case u.GuardDisabled:
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it, but lockguard serves no update guard (the chart's mode policy or guards.readOnly.enabled=false): "+
			"its updates are not refused; deleting it is still denied", noun, names)
	default:
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it, but the freeze is not in force yet (their ReadOnly condition is Pending): "+
			"its updates are not refused until it is; then updates and patches of its spec and metadata are refused, "+
			"except by the principals the installation exempts (the navique operator's ServiceAccount by default)", noun, names)
	}
	return u
}

// verdict is the update verdict in a few words.
func (u *whyUpdate) verdict() string {
	who := "you"
	if u.User != "" {
		who = u.User
	}
	switch {
	case u.Asked && u.Refused:
		return "refused by lockguard for " + who
	case u.Asked && u.Answer == "allowed":
		return "not refused by lockguard for " + who
	case u.Asked:
		return "unknown for " + who + " (the dry run failed before lockguard decided)"
	case u.InForce:
		return "spec and metadata frozen by lockguard (in force)"
	case u.GuardDisabled:
		return "not blocked by lockguard (its update guard is disabled)"
	case u.Frozen:
		return "frozen by lockguard once in force (pending)"
	}
	return "not blocked by lockguard"
}

// labelsString shows labels as kubectl does (sorted key=value, comma
// separated), or <none>.
func labelsString(lbls map[string]string) string {
	if len(lbls) == 0 {
		return "<none>"
	}
	return labels.Set(lbls).String()
}

// requirementsString is the REQUIREMENTS cell of a selector verdict:
// each requirement, met or not, with the resource's label.
func requirementsString(reqs []whyRequirement) string {
	if len(reqs) == 0 {
		return "none (empty selector: every resource and the namespace)"
	}
	parts := make([]string, 0, len(reqs))
	for _, r := range reqs {
		label := r.Label
		if label == "" {
			label = "no label " + r.key
		}
		met := "met"
		if !r.Met {
			met = "not met"
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s)", r.Requirement, met, label))
	}
	return strings.Join(parts, "; ")
}
