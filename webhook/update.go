package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The update guard of ReadOnly Locks (docs/contract.md rules 7 and 16): an UPDATE
// (a PATCH arrives as one) of a core.navique.com object that a live
// ReadOnly Lock covers is refused when it changes what ReadOnly freezes
// (lockv1alpha1.FrozenChange), unless an exempt principal sends it. The
// chart's update entry sends lockguard only the updates of objects that
// carry lockv1alpha1.ReadOnlyLabel (objectSelector, matched on the old and
// the new object) and only of the main resource (resources "*"), so an
// object under no ReadOnly Lock never waits for lockguard on an update; its
// subresource entry sends the updates through every subresource but status
// (updatesub.go says why they are selected otherwise). The guard decides
// from the Locks, read as every delete guard reads them (lockReader), never
// from the label.

// Exemptions are the principals whose updates the update guard allows
// whatever the Locks say: lockguard itself (Self), and the users and
// groups the installation names (--read-only-exempt).
type Exemptions struct {
	// Users are exempt usernames, e.g.
	// system:serviceaccount:navique-system:navique-operator.
	Users []string
	// Groups are exempt groups: a request from a member of any is exempt.
	Groups []string
	// Self returns lockguard's own username, "" while it is not known
	// (cmd/lockguard/manager learns it with a SelfSubjectReview); nil: none.
	Self func() string
}

// ExemptGroupPrefix marks a group in ParseExemptions' list.
const ExemptGroupPrefix = "group:"

// everyone are the principals that hold every user, every request or
// every ServiceAccount, which ParseExemptions refuses (issue 36): exempting
// one would exempt everyone, or anyone who can create a ServiceAccount,
// and leave ReadOnly Locks refusing nothing. Each says who it holds.
// system:serviceaccounts:NAMESPACE (the ServiceAccounts of one namespace,
// the operator's, say) and system:masters (the superusers, who can remove
// the webhook configuration anyway) are accepted.
var everyone = map[string]string{
	ExemptGroupPrefix + "system:authenticated":   "the group system:authenticated holds every authenticated user",
	ExemptGroupPrefix + "system:unauthenticated": "the group system:unauthenticated holds every unauthenticated request",
	ExemptGroupPrefix + "system:serviceaccounts": "the group system:serviceaccounts holds every ServiceAccount of every namespace",
	"system:anonymous":                           "the user system:anonymous is every unauthenticated request",
}

// ParseExemptions reads the exempt principals of --read-only-exempt: each
// entry is a username (system:serviceaccount:NAMESPACE:NAME for a
// ServiceAccount) or group:NAME for a group; entries may also be comma
// separated. Empty entries are skipped; an entry that is only the group
// prefix is an error, and so is one that holds everyone: the groups
// system:authenticated, system:unauthenticated and system:serviceaccounts,
// and the user system:anonymous.
func ParseExemptions(entries []string) (Exemptions, error) {
	var e Exemptions
	for _, entry := range entries {
		for _, p := range strings.Split(entry, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
			case strings.HasPrefix(p, ExemptGroupPrefix):
				g := strings.TrimSpace(strings.TrimPrefix(p, ExemptGroupPrefix))
				if g == "" {
					return Exemptions{}, fmt.Errorf("exempt principal %q names no group", p)
				}
				if why, ok := everyone[ExemptGroupPrefix+g]; ok {
					return Exemptions{}, everyoneError(p, why)
				}
				e.Groups = append(e.Groups, g)
			default:
				if why, ok := everyone[p]; ok {
					return Exemptions{}, everyoneError(p, why)
				}
				e.Users = append(e.Users, p)
			}
		}
	}
	return e, nil
}

// everyoneError is ParseExemptions' error for principal p, which holds
// everyone as why says.
func everyoneError(p, why string) error {
	return fmt.Errorf("exempt principal %q would exempt everyone: %s; name the operator's ServiceAccount or a group of its own instead", p, why)
}

// exempt reports whether the user with groups is exempt.
func (e Exemptions) exempt(user string, groups []string) bool {
	if user != "" && slices.Contains(e.Users, user) {
		return true
	}
	if e.Self != nil {
		if self := e.Self(); self != "" && self == user {
			return true
		}
	}
	for _, g := range groups {
		if slices.Contains(e.Groups, g) {
			return true
		}
	}
	return false
}

// readOnlyGuard is the update guard: like the delete guards, it reads the
// handler's Locks and answers with a decision, which ends as theirs do.
type readOnlyGuard struct {
	locks *lockReader // the Handler's
	// exceptions are the Handler's (nil: none lets an update through).
	exceptions *exceptions
	exempt     Exemptions
	parents    Parents // nil: subresource updates fail closed
}

// decide answers req, an UPDATE: allowed when it is not one of a
// namespaced, lockable object, when it is one of the status subresource,
// when an exempt principal sends it, when it changes nothing ReadOnly
// freezes (lockv1alpha1.FrozenChange), or when no live ReadOnly Lock
// covers the object as it was (its old labels: relabelling an object into
// a ReadOnly selector is allowed, out of one is not); denied otherwise,
// naming the Locks. It answers Errored (so that the API server, with
// failurePolicy Fail, refuses the update) when it cannot read the objects
// or the Locks. An update through a subresource is decideSubresource's.
func (g readOnlyGuard) decide(ctx context.Context, req Request, kind string) (decision, bool) {
	if kind != GuardReadOnly {
		return decision{}, false
	}
	d := decision{guard: GuardReadOnly}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	switch {
	case req.Update.SubResource == StatusSubresource:
		d.resp = admission.Allowed("the status subresource is never frozen")
		return d, true
	case req.Update.SubResource != "":
		// Before req.Kind is asked: a scale is reviewed as an
		// autoscaling/v1 Scale.
		return g.decideSubresource(ctx, req), true
	case lockv1alpha1.Protectable(gk) != nil:
		d.resp = admission.Allowed(lockv1alpha1.Protectable(gk).Error())
		return d, true
	case req.Namespace == "":
		d.resp = admission.Allowed("cluster-scoped resources cannot be locked")
		return d, true
	case g.exempt.exempt(req.UserInfo.Username, req.Update.Groups):
		d.resp = admission.Allowed("exempt from ReadOnly Locks")
		return d, true
	}
	return g.decideObject(ctx, req, gk), true
}

// decideObject is decide of an UPDATE of the main resource of a
// namespaced object of lockable kind gk, by a principal that is not
// exempt.
func (g readOnlyGuard) decideObject(ctx context.Context, req Request, gk schema.GroupKind) decision {
	d := decision{guard: GuardReadOnly}
	oldObj, field, changed, err := frozenChange(req, gk.String())
	switch {
	case err != nil:
		d.resp = errored(http.StatusBadRequest, err)
	case !changed:
		d.resp = admission.Allowed("")
	default:
		d = g.readOnlyLocks(ctx, d, req, gk, labelsOf(oldObj), field)
	}
	return d
}

// frozenChange reads the objects of req, an UPDATE of what (a kind, or a
// subresource), and returns oldObject and the first field the update
// changes that ReadOnly freezes (lockv1alpha1.FrozenChange); an error
// when either object cannot be read.
func frozenChange(req Request, what string) (oldObj map[string]any, field string, changed bool, err error) {
	var newObj map[string]any
	if err := decodeObject(req.Update.OldObject, &oldObj); err != nil {
		return nil, "", false, fmt.Errorf("lockguard could not verify Locks: cannot read the %s being updated: %w", what, err)
	}
	if err := decodeObject(req.Update.Object, &newObj); err != nil {
		return nil, "", false, fmt.Errorf("lockguard could not verify Locks: cannot read the updated %s: %w", what, err)
	}
	field, changed = lockv1alpha1.FrozenChange(oldObj, newObj)
	return oldObj, field, changed, nil
}

// readOnlyLocks completes d, the answer to req, an UPDATE that changes
// field of the object of kind gk named in req, labelled labels: denied
// when live ReadOnly Locks cover it, naming them; Errored when the Locks
// cannot be read; allowed otherwise.
func (g readOnlyGuard) readOnlyLocks(ctx context.Context, d decision, req Request, gk schema.GroupKind, labels map[string]string, field string) decision {
	object := keyOf(req.Namespace, gk, req.Name).Object(labels)
	locks, err := g.locks.find(ctx, object)
	if err == nil && labels[lockv1alpha1.ReadOnlyLabel] == "true" && g.locks.confirm && !slices.ContainsFunc(locks, freezes) {
		// The reconciler labelled the object for a ReadOnly Lock that the
		// cache does not show freezing it: the cache lags a create or an
		// update to ReadOnly (no marker announces a level raised), or the
		// label outlived its Lock. The API server's Locks decide.
		var found [][]lockv1alpha1.Lock
		if found, err = g.locks.reread(ctx, req.Namespace, []lockv1alpha1.Object{object}, [][]lockv1alpha1.Lock{locks}, ReasonLabelled, false); err == nil {
			locks = found[0]
		}
	}
	if err != nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s/%s, so the update is refused; retry when lockguard is ready: %w",
			gk, req.Namespace, req.Name, err))
		return d
	}
	locks = slices.DeleteFunc(locks, func(l lockv1alpha1.Lock) bool { return l.Spec.Level != lockv1alpha1.LevelReadOnly })
	d = d.refusal(locks, func(locks []lockv1alpha1.Lock) string { return UpdateDenialMessage(locks, field) })
	// An exception may let the user through (docs/contract.md rule 20).
	return g.exceptions.pierce(ctx, d, req, object, lockv1alpha1.ExceptionUpdate, func(l *lockv1alpha1.Lock) bool { return l.Spec.Level == lockv1alpha1.LevelReadOnly })
}

// freezes says whether a live Lock refuses updates: ReadOnly, and
// enforcing (Lock.Enforces).
func freezes(l lockv1alpha1.Lock) bool {
	return l.Spec.Level == lockv1alpha1.LevelReadOnly && l.Enforces()
}

// decodeObject decodes raw, an object of a review, as the API server
// encodes it; an absent object is an error.
func decodeObject(raw []byte, into *map[string]any) error {
	if len(raw) == 0 {
		return fmt.Errorf("the review carries none")
	}
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, into); err != nil {
		return err
	}
	if *into == nil {
		return fmt.Errorf("the review carries null")
	}
	return nil
}

// labelsOf returns the labels of obj, as JSON decodes them; the string
// ones only.
func labelsOf(obj map[string]any) map[string]string {
	meta, _ := obj["metadata"].(map[string]any)
	raw, _ := meta["labels"].(map[string]any)
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// UpdateDenialMessage is the message of a refused update: the ReadOnly
// Locks (sorted names, Go's %v of a []string), the first frozen field the
// update changes (lockv1alpha1.FrozenChange), the way out, then the Locks'
// reasons.
func UpdateDenialMessage(locks []lockv1alpha1.Lock, field string) string {
	names, reasons := namesAndReasons(locks)
	return withReasons(fmt.Sprintf("resource is read-only under Lock(s) %v (the update changes %s); delete the Lock(s) or set their level to CanNotDelete before changing this resource", names, field), reasons)
}
