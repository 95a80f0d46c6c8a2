package controller

import (
	"errors"
	"fmt"
	"strings"
	"time"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// A selector Lock's kinds (docs/contract.md rule 13): each is resolved as
// a targetRef's kind is (readmodel.Kinds.Lockable), and a Lock that names
// one the group does not serve as written (misspelled, not installed, or
// cluster-scoped) is InvalidTarget, whole, even if its other kinds are
// served: it does not protect what it says. The webhook still matches its
// selector against the kinds that are served, as it matches every live
// Lock's (a typo never unprotects the rest), so the Lock's
// status.protected still lists what it covers, and its annotation is still
// on those objects: status, annotation and webhook agree on what is
// protected; only the Lock's claim to be active goes.

// apiResourcesHint is how to list the kinds as served.
const apiResourcesHint = "kubectl api-resources --api-group=" + lockv1alpha1.Group

// selectorKinds checks the kinds of selector s: it returns "" when the
// group serves each, as written, for namespaced resources; otherwise the
// message of the Lock's InvalidTarget condition, which names each kind
// that is not and how to fix it (did you mean ...?), and how long to wait
// before checking again (a kind may be installed later; zero when only
// cluster-scoped kinds are wrong, which no install fixes). It errs only
// when discovery cannot be read.
func selectorKinds(kinds *readmodel.Kinds, s *lockv1alpha1.LockSelector) (string, time.Duration, error) {
	var problems []string
	var recheck time.Duration
	for _, k := range s.Kinds {
		_, err := kinds.Lockable(k)
		var misspelled *readmodel.MisspelledKindError
		var clusterScoped *readmodel.ClusterScopedKindError
		switch {
		case err == nil:
			continue
		case errors.As(err, &misspelled):
			problems, recheck = append(problems, misspelled.Error()), unservedKindRecheck
		case errors.Is(err, readmodel.ErrKindNotServed):
			problems, recheck = append(problems, fmt.Sprintf("%s serves no kind %q (is its CustomResourceDefinition installed? %s lists the kinds served)",
				lockv1alpha1.Group, k, apiResourcesHint)), unservedKindRecheck
		case errors.As(err, &clusterScoped):
			problems = append(problems, clusterScoped.Error())
		default:
			return "", 0, fmt.Errorf("resolving kind %s of a selector: %w", k, err)
		}
	}
	if len(problems) == 0 {
		return "", 0, nil
	}
	msg := "selector.kinds: " + strings.Join(problems, "; ") + " (this Lock is not active while one of its kinds is not served as written"
	if len(problems) < len(s.Kinds) {
		msg += ", though the resources of its other kinds that it matches stay protected: status.protected"
	}
	msg += "; the selector cannot be changed: create a Lock whose kinds are spelled as " + apiResourcesHint + " lists them, then delete this one)"
	return msg, recheck, nil
}
