package webhook

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// maxNamed bounds the Locks a namespace or CRD denial names and describes,
// so that a namespace with thousands of Locks still gets a short message.
const maxNamed = 10

// maxReasonLen bounds each reason quoted in a namespace or CRD denial.
const maxReasonLen = 120

// lockNames returns the names of locks, sorted, at most maxNamed of them
// followed by "and N more" when there are more (counting extra more);
// qualified prefixes each with its namespace.
func lockNames(locks []lockv1alpha1.Lock, qualified bool, extra int) []string {
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		if qualified {
			names = append(names, l.Namespace+"/"+l.Name)
		} else {
			names = append(names, l.Name)
		}
	}
	slices.Sort(names)
	named := names[:min(len(names), maxNamed):min(len(names), maxNamed)]
	if more := max(len(names)-maxNamed, 0) + extra; more > 0 {
		return append(named, fmt.Sprintf("and %d more", more))
	}
	return names
}

// describeLocks is "(name: Kind/target: reason; ...)" (a selector Lock's
// scope as LockSelector.String shows it) for at most maxNamed
// of locks, sorted by namespace and name, each reason cut to maxReasonLen.
func describeLocks(locks []lockv1alpha1.Lock, qualified bool) string {
	sorted := slices.Clone(locks)
	slices.SortFunc(sorted, func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	parts := make([]string, 0, min(len(sorted), maxNamed))
	for _, l := range sorted[:min(len(sorted), maxNamed)] {
		name := l.Name
		if qualified {
			name = l.Namespace + "/" + l.Name
		}
		part := name + ": " + l.Spec.TargetRef.Kind + "/" + l.Spec.TargetRef.Name
		if s := l.Spec.Selector; s != nil {
			part = name + ": " + s.String()
		}
		if r := l.Spec.Reason; r != "" {
			if runes := []rune(r); len(runes) > maxReasonLen {
				r = string(runes[:maxReasonLen]) + "..."
			}
			part += ": " + r
		}
		parts = append(parts, part)
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

// capJoin joins at most maxNamed of names with ", ", then "and N more".
func capJoin(names []string) string {
	if len(names) > maxNamed {
		return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return strings.Join(names, ", ")
}

// reportedMissing reports whether the reconciler's status of l says that
// its target does not exist or can never be protected.
func reportedMissing(l lockv1alpha1.Lock) bool {
	if l.Status.Active {
		return false
	}
	c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady)
	return c != nil && (c.Reason == lockv1alpha1.ReasonMissingReference || c.Reason == lockv1alpha1.ReasonInvalidTarget)
}
