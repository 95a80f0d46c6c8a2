package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
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
// not seen, and that the exception does not name, still refuses).
//
// When the cache has no such exception (or the one it has is gone from
// the API server), the namespace's exceptions are read from the API
// server (attempt.listed), so that one created a moment ago, that the
// cache has not seen, still lets its user through: at most
// exceptionListLimit of them, within exceptionReadTimeout, and at most as
// often as the replica's budget allows (a token bucket,
// DefaultExceptionReads a second, DefaultExceptionReadBurst at once): a
// refusal past the budget stands, counted in
// lockguard_exception_reads_skipped_total, so that a loop of refused
// deletes costs the API server a bounded number of reads. Each read is
// counted as a confirmation (ReasonException). The cascade, namespace and
// CRD guards never honour exceptions.

// ReasonException is the reason a replica reads the LockExceptions of a
// namespace from the API server, as lockguard_confirmations_total counts
// it: enforcing Locks refuse a DELETE or an UPDATE and the replica's cache
// holds no exception that lets it through, which it may not have seen yet.
const ReasonException = "exception"

// DefaultExceptionReads and DefaultExceptionReadBurst are a replica's
// default budget of exception reads from the API server
// (ExceptionConfig.Reads, ReadBurst): a token bucket of
// DefaultExceptionReadBurst tokens, refilled at DefaultExceptionReads a
// second.
const (
	DefaultExceptionReads     = 10
	DefaultExceptionReadBurst = 20
)

// exceptionListLimit bounds a read of a namespace's exceptions from the
// API server: one page, the first by name. A namespace holding more
// exceptions relies on the cache for the others.
const exceptionListLimit = 100

// exceptionReadTimeout bounds a read of a namespace's exceptions from the
// API server (within the review's own deadline).
const exceptionReadTimeout = time.Second

// ExceptionConfig makes the object and update guards honour LockExceptions.
type ExceptionConfig struct {
	// Cache lists a namespace's LockExceptions (in lockguard, the
	// manager's cache, an informer of LockExceptions).
	Cache client.Reader
	// API reads exceptions from the API server (in lockguard, the
	// manager's APIReader): the one the cache found, and the namespace's
	// when the cache has none. The Locks are read through the Handler's
	// reader of the API server; without one, no exception lets anything
	// through.
	API client.Reader
	// Uses is handed every use of an exception that is not a dry run, for
	// the pierced Locks' status.lastException; nil: not recorded.
	Uses DenialRecorder
	// Reads and ReadBurst are the replica's budget of reads of a
	// namespace's exceptions from the API server (a token bucket: Reads a
	// second, ReadBurst at once); zero: DefaultExceptionReads,
	// DefaultExceptionReadBurst.
	Reads     rate.Limit
	ReadBurst int
}

// exceptions finds and confirms the exceptions of the guards.
type exceptions struct {
	cache, api client.Reader
	locks      *lockReader // the Handler's: its API server reader and clock
	// reads is the budget of the reads of a namespace's exceptions from
	// the API server (listed).
	reads   *rate.Limiter
	metrics *Metrics // the Handler's
}

// newExceptions returns the exceptions of c, read through locks's
// Locks and clock, counted in m; nil without a cache or an API reader.
func newExceptions(c *ExceptionConfig, locks *lockReader, m *Metrics) *exceptions {
	if c == nil || c.Cache == nil || c.API == nil {
		return nil
	}
	reads, burst := c.Reads, c.ReadBurst
	if reads <= 0 {
		reads = DefaultExceptionReads
	}
	if burst <= 0 {
		burst = DefaultExceptionReadBurst
	}
	return &exceptions{cache: c.Cache, api: c.API, locks: locks, reads: rate.NewLimiter(reads, burst), metrics: m}
}

// pierced is what a decision an exception let through carries: the
// exception and the Locks (as the API server has them) it pierced.
type pierced struct {
	exception *lockv1alpha1.LockException
	locks     []lockv1alpha1.Lock
}

// pierce returns d, the refusal of req by Locks of object o, allowed when
// an exception lets op through them (the package comment): the cache's,
// confirmed, or else one read from the API server; d unchanged
// otherwise, and when the exceptions or the Locks cannot be read (the
// refusal stands). relevant keeps the API server's Locks that refuse op
// (nil: every enforcing Lock that covers o).
func (x *exceptions) pierce(ctx context.Context, d decision, req Request, o lockv1alpha1.Object, op lockv1alpha1.ExceptionOperation, relevant func(*lockv1alpha1.Lock) bool) decision {
	user := req.UserInfo.Username
	if x == nil || d.resp.Allowed || len(d.locks) == 0 || d.more > 0 || user == "" || x.locks.api == nil {
		return d
	}
	log := ctrl.LoggerFrom(ctx).WithValues("namespace", o.Namespace, "name", o.Name, "user", user)
	a := attempt{x: x, o: o, op: op, user: user, relevant: relevant, now: x.locks.now()}
	live, next := a.cached(ctx, log, lockNamesOf(d.locks))
	if live == nil && next {
		live = a.listed(ctx, log)
	}
	if live == nil {
		return d
	}
	d.resp, d.locks = admission.Allowed("").WithWarnings(ExceptionWarning(live.exception, live.locks)), nil
	d.pierced = live
	return d
}

// attempt is one search for an exception that lets user send op on o
// (pierce), at now.
type attempt struct {
	x        *exceptions
	o        lockv1alpha1.Object
	op       lockv1alpha1.ExceptionOperation
	user     string
	relevant func(*lockv1alpha1.Lock) bool
	now      time.Time
	// locks are the API server's Locks that refuse the request, once read.
	locks []lockv1alpha1.Lock
	read  bool
}

// cached returns the cache's exception that lets the request through
// the Locks named refusing (the cache's), confirmed with the API server
// (confirmed), or nil; next is whether the exceptions should then be read
// from the API server: the cache has none, cannot be read, or has one the
// API server no longer has, or that its Locks do not let through.
func (a *attempt) cached(ctx context.Context, log logr.Logger, refusing []string) (_ *pierced, next bool) {
	var list lockv1alpha1.LockExceptionList
	if err := a.x.cache.List(ctx, &list, client.InNamespace(a.o.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		log.V(1).Info("Cannot read the LockExceptions from the cache: reading them from the API server", "error", err.Error())
		return nil, true
	}
	key := a.o.Key()
	var found *lockv1alpha1.LockException
	for i := range list.Items {
		e := &list.Items[i]
		if e.Pierces(key, a.op, a.user, refusing, a.now) && (found == nil || e.Name < found.Name) {
			found = e
		}
	}
	if found == nil {
		return nil, true
	}
	var live lockv1alpha1.LockException
	if err := a.x.api.Get(ctx, client.ObjectKeyFromObject(found), &live); err != nil {
		if !apierrors.IsNotFound(err) {
			log.Info("Cannot confirm a LockException with the API server: the refusal stands", "exception", found.Name, "error", err.Error())
			return nil, false
		}
		return nil, true
	}
	p, err := a.confirmed(ctx, []lockv1alpha1.LockException{live})
	if err != nil {
		log.Info("Cannot read the Locks from the API server to confirm a LockException: the refusal stands", "exception", found.Name, "error", err.Error())
		return nil, false
	}
	return p, p == nil
}

// listed returns an exception of o's namespace, read from the API server,
// that lets the request through the API server's Locks, or nil: none
// does, the read fails, or the replica's budget of such reads is spent
// (counted in lockguard_exception_reads_skipped_total).
func (a *attempt) listed(ctx context.Context, log logr.Logger) *pierced {
	if !a.x.reads.Allow() {
		a.x.metrics.exceptionReadSkipped()
		log.V(1).Info("Not reading the LockExceptions from the API server: this replica's budget of such reads is spent; the refusal stands")
		return nil
	}
	if f := a.x.locks.fresh; f != nil {
		f.Confirmed(ReasonException)
	}
	rctx, cancel := context.WithTimeout(ctx, exceptionReadTimeout)
	defer cancel()
	var list lockv1alpha1.LockExceptionList
	if err := a.x.api.List(rctx, &list, client.InNamespace(a.o.Namespace), client.Limit(exceptionListLimit)); err != nil {
		log.Info("Cannot read the LockExceptions from the API server: the refusal stands", "error", err.Error())
		return nil
	}
	// Which Locks refuse is the API server's to say (confirmed): here,
	// only the exceptions of the request count.
	key := a.o.Key()
	candidates := slices.DeleteFunc(list.Items, func(e lockv1alpha1.LockException) bool {
		return !e.Pierces(key, a.op, a.user, e.Spec.Locks, a.now)
	})
	if len(candidates) == 0 {
		return nil
	}
	p, err := a.confirmed(ctx, candidates)
	if err != nil {
		log.Info("Cannot read the Locks from the API server to confirm a LockException: the refusal stands", "error", err.Error())
	}
	return p
}

// confirmed returns the first of exceptions (read from the API server),
// by name, that lets the request through the Locks of o that the API
// server has and refuse it, or nil; an error when those Locks cannot be
// read (once per attempt).
func (a *attempt) confirmed(ctx context.Context, exceptions []lockv1alpha1.LockException) (*pierced, error) {
	if !a.read {
		all, err := a.x.locks.api.namespace(ctx, a.o.Namespace)
		if err != nil {
			return nil, err
		}
		for i := range all {
			if l := &all[i]; l.Enforces() && l.Covers(a.o, a.now) && (a.relevant == nil || a.relevant(l)) {
				a.locks = append(a.locks, *l.DeepCopy())
			}
		}
		a.read = true
	}
	names := lockNamesOf(a.locks)
	var found *lockv1alpha1.LockException
	for i := range exceptions {
		if e := &exceptions[i]; e.Pierces(a.o.Key(), a.op, a.user, names, a.now) && (found == nil || e.Name < found.Name) {
			found = e
		}
	}
	if found == nil {
		return nil, nil
	}
	return &pierced{exception: found.DeepCopy(), locks: a.locks}, nil
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
