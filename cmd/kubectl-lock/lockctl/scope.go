package lockctl

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// allScope is how kubectl lock shows an empty selector: every resource of
// the namespace and the namespace itself.
const allScope = lockv1alpha1.AllScope

// scopeString names what a Lock covers, as list and why show it and as
// lockguard writes it in status.scope: Lock.ScopeString, the one place
// that spells it.
func scopeString(l *lockv1alpha1.Lock) string { return l.ScopeString() }

// parseSelector turns kubectl's selector syntax (tier=db,env!=dev,
// region in (a,b), !legacy) into a LockSelector, which the API server
// then validates as a Lock's selector.
func parseSelector(text string) (*lockv1alpha1.LockSelector, error) {
	ls, err := metav1.ParseToLabelSelector(text)
	if err != nil {
		return nil, fmt.Errorf("--selector %q: %w", text, err)
	}
	s := &lockv1alpha1.LockSelector{}
	if len(ls.MatchLabels) > 0 {
		s.MatchLabels = ls.MatchLabels
	}
	for _, r := range ls.MatchExpressions {
		req := lockv1alpha1.LabelSelectorRequirement{Key: r.Key, Operator: string(r.Operator)}
		if len(r.Values) > 0 {
			req.Values = r.Values
		}
		s.MatchExpressions = append(s.MatchExpressions, req)
	}
	if s.IsEmpty() {
		return nil, fmt.Errorf("--selector %q selects every resource: use --all to lock the whole namespace", text)
	}
	return s, s.Validate()
}

// notNameChars are the runs of characters a Lock name cannot hold.
var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// defaultSelectorLockName is the name of a selector Lock when --name is
// not given: "all" for --all, the selector's text made a DNS name
// otherwise (tier=db: tier-db).
func defaultSelectorLockName(s *lockv1alpha1.LockSelector) (string, error) {
	if s.IsEmpty() {
		return "all", nil
	}
	name := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(metav1.FormatLabelSelector(s.LabelSelector())), "-"), "-")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", fmt.Errorf("cannot name the Lock %q (%s): choose a name with --name", name, msgs[0])
	}
	return name, nil
}

// sameScope reports whether Lock l has exactly the selector s.
func sameScope(l *lockv1alpha1.Lock, s *lockv1alpha1.LockSelector) bool {
	return l.Spec.Selector != nil && equality.Semantic.DeepEqual(l.Spec.Selector.LabelSelector(), s.LabelSelector()) &&
		equality.Semantic.DeepEqual(l.Spec.Selector.Kinds, s.Kinds)
}
