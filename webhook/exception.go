package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Break-glass exceptions (docs/contract.md rule 20): when the Locks would
// refuse a request of the object guard (a DELETE) or of the update guard
// (an UPDATE under ReadOnly Locks), a LockException of the namespace that
// names the target, the operation, the request's user and every refusing
// Lock, and has not expired, lets it through (LockException.Pierces).
// The exceptions are looked up in a cache (an informer's: they are few);
// one found there is confirmed with the API server before it lets
// anything through: the exception read again (a deleted one lets nothing
// through), and the refusal made again from the namespace's Locks as the
// API server has them (a Lock created a moment ago, that the cache has
// not seen, and that the exception does not name, still refuses). The
// cascade, namespace and CRD guards never honour exceptions.

// ExceptionConfig makes the object and update guards honour LockExceptions.
type ExceptionConfig struct {
	// Cache lists a namespace's LockExceptions (in lockguard, the
	// manager's cache, an informer of LockExceptions).
	Cache client.Reader
	// API reads an exception from the API server (in lockguard, the
	// manager's APIReader). The Locks are read through the Handler's
	// reader of the API server; without one, no exception lets anything
	// through.
	API client.Reader
	// Uses is handed every use of an exception that is not a dry run, for
	// the pierced Locks' status.lastException; nil: not recorded.
	Uses DenialRecorder
}

// exceptions finds and confirms the exceptions of the guards.
type exceptions struct {
	cache, api client.Reader
	locks      *lockReader // the Handler's: its API server reader and clock
}

// pierced is what a decision an exception let through carries: the
// exception and the Locks (as the API server has them) it pierced.
type pierced struct {
	exception *lockv1alpha1.LockException
	locks     []lockv1alpha1.Lock
}

// pierce returns d, the refusal of req by Locks of object o, allowed when
// an exception lets op through them (the package comment); d unchanged
// otherwise, and when the exceptions or the Locks cannot be read (the
// refusal stands). relevant keeps the API server's Locks that refuse op
// (nil: every enforcing Lock that covers o).
func (x *exceptions) pierce(ctx context.Context, d decision, req Request, o lockv1alpha1.Object, op lockv1alpha1.ExceptionOperation, relevant func(*lockv1alpha1.Lock) bool) decision {
	user := req.UserInfo.Username
	if x == nil || d.resp.Allowed || len(d.locks) == 0 || d.more > 0 || user == "" {
		return d
	}
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", o.Namespace, "name", o.Name, "user", user)
	key, now := o.Key(), x.locks.now()
	var list lockv1alpha1.LockExceptionList
	if err := x.cache.List(ctx, &list, client.InNamespace(o.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.V(1).Info("Cannot read the LockExceptions from the cache: the refusal stands", "error", err.Error())
		return d
	}
	refusing := lockNamesOf(d.locks)
	var found *lockv1alpha1.LockException
	for i := range list.Items {
		e := &list.Items[i]
		if e.Pierces(key, op, user, refusing, now) && (found == nil || e.Name < found.Name) {
			found = e
		}
	}
	if found == nil || x.locks.api == nil {
		return d
	}
	var live lockv1alpha1.LockException
	if err := x.api.Get(ctx, client.ObjectKeyFromObject(found), &live); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Info("Cannot confirm a LockException with the API server: the refusal stands", "exception", found.Name, "error", err.Error())
		}
		return d
	}
	all, err := x.locks.api.namespace(ctx, o.Namespace)
	if err != nil {
		log.Info("Cannot read the Locks from the API server to confirm a LockException: the refusal stands", "exception", found.Name, "error", err.Error())
		return d
	}
	var locks []lockv1alpha1.Lock
	for i := range all {
		if l := &all[i]; l.Enforces() && l.Covers(o, now) && (relevant == nil || relevant(l)) {
			locks = append(locks, *l.DeepCopy())
		}
	}
	if !live.Pierces(key, op, user, lockNamesOf(locks), now) {
		return d
	}
	d.resp, d.locks = admission.Allowed("").WithWarnings(ExceptionWarning(&live, locks)), nil
	d.pierced = &pierced{exception: &live, locks: locks}
	return d
}

// ExceptionWarning is the admission warning of a request that exception
// e let through Locks.
func ExceptionWarning(e *lockv1alpha1.LockException, locks []lockv1alpha1.Lock) string {
	names, _ := namesAndReasons(locks)
	return fmt.Sprintf("lockguard: allowed by LockException %s through Lock(s) %v (until %s): %s",
		e.Name, names, e.Spec.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z07:00"), e.Spec.Reason)
}

// lockNamesOf returns the names of locks.
func lockNamesOf(locks []lockv1alpha1.Lock) []string {
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names
}

// exceptionNote is the note of the Event on a Lock that exception e
// pierced for req.
func exceptionNote(req Request, name string, e *lockv1alpha1.LockException) string {
	return strings.Join([]string{fmt.Sprintf("%s of %s %q by %s allowed by LockException %s", req.Operation, req.Kind.Kind, name, req.UserInfo.Username, e.Name), e.Spec.Reason}, ": ")
}

// ReasonExceptionUsed is the reason of the Warning Event recorded on each
// Lock an exception pierced.
const ReasonExceptionUsed = "ExceptionUsed"

// exceptionUsed ends d, a request an exception let through: it counts
// the use (lockguard_exception_uses_total), names the exception in the
// audit annotations and, unless req is a dry run, hands the use to the
// pierced Locks' status.lastException and records an Event on each.
func (f *finisher) exceptionUsed(req Request, d decision) {
	e := d.pierced.exception
	f.metrics.exceptionUse(string(req.Operation))
	d.resp.AuditAnnotations[AuditException] = e.Name
	if req.DryRun {
		return
	}
	name := req.Target().Name
	if f.uses != nil {
		use := deniedRequest(req)
		use.Exception = e.Name
		f.uses.RecordDenial(d.pierced.locks, use)
	}
	if f.events != nil {
		locks := d.pierced.locks[:min(len(d.pierced.locks), maxNamed)]
		for i := range locks {
			f.events.Eventf(&locks[i], nil, corev1.EventTypeWarning, ReasonExceptionUsed, string(req.Operation), "%s", exceptionNote(req, name, e))
		}
	}
}
