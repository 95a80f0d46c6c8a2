package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// fakeReviews answers SubjectAccessReviews: allowed for the Lock names in
// allow, err for every one when set; it keeps what it was asked.
type fakeReviews struct {
	allow []string
	err   error
	asked []authorizationv1.SubjectAccessReviewSpec
}

func (f *fakeReviews) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	sar := obj.(*authorizationv1.SubjectAccessReview)
	f.asked = append(f.asked, sar.Spec)
	if f.err != nil {
		return f.err
	}
	sar.Status.Allowed = slices.Contains(f.allow, sar.Spec.ResourceAttributes.Name)
	return nil
}

var exceptionNow = time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

func newException(name, user string, expires time.Time, ops []lockv1alpha1.ExceptionOperation, locks ...string) *lockv1alpha1.LockException {
	return &lockv1alpha1.LockException{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "LockException"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name},
		Spec: lockv1alpha1.LockExceptionSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "forge"}, Locks: locks,
			Operations: ops, Reason: "incident 7", User: user, ExpiresAt: metav1.NewTime(expires)},
	}
}

// exceptionCreate is the review of the create of e by user.
func exceptionCreate(t *testing.T, e *lockv1alpha1.LockException, user authenticationv1.UserInfo) admission.Request {
	t.Helper()
	req := createReview(t, "LockException", "forge", e.Name, e, true)
	req.UserInfo = user
	return req
}

// TestExceptionCreate (docs/contract.md rule 20): lockguard admits a
// LockException only from the user it names, expiring within 24 hours,
// and only when a SubjectAccessReview of the request's whole identity
// grants break-glass on every Lock it names; a review it cannot make
// refuses the create.
func TestExceptionCreate(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", UID: "a-1", Groups: []string{"sre", "system:authenticated"},
		Extra: map[string]authenticationv1.ExtraValue{"scopes": {"admin"}}}
	hour := exceptionNow.Add(time.Hour)
	del := []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}
	denied := func(msg string) result {
		return result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	cases := map[string]struct {
		e       *lockv1alpha1.LockException
		user    authenticationv1.UserInfo
		reviews *fakeReviews
		besides bool
		want    result
		asked   int
	}{
		"Allowed":        {e: newException("x", "alice", hour, del, "b", "a"), user: alice, reviews: &fakeReviews{allow: []string{"a", "b"}}, want: result{Allowed: true, Code: 200}, asked: 2},
		"OneLockMissing": {e: newException("x", "alice", hour, del, "a", "b"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, want: denied(lockv1alpha1.BreakGlassMessage("forge", "b")), asked: 2},
		"AnotherUser":    {e: newException("x", "bob", hour, del, "a"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, want: denied(`LockException refused: spec.user must be the username of the exception's creator ("alice"), not "bob"`)},
		"TooLong":        {e: newException("x", "alice", exceptionNow.Add(25*time.Hour), del, "a"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, want: denied("LockException refused: spec.expiresAt 2026-12-04T18:00:00Z is more than 24h0m0s ahead: an exception lives at most 24h0m0s")},
		"Expired":        {e: newException("x", "alice", exceptionNow, del, "a"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, want: denied("LockException refused: spec.expiresAt 2026-12-03T17:00:00Z is not in the future")},
		"ReviewFails":    {e: newException("x", "alice", hour, del, "a"), user: alice, reviews: &fakeReviews{err: errors.New("timeout")}, want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: `lockguard could not check the verb break-glass on Lock forge/a, so the LockException is refused; retry: timeout`}, asked: 1},
		"BesidePolicy":   {e: newException("x", "alice", hour, del, "a"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, besides: true, want: result{Allowed: true, Code: 200}, asked: 1},
		"HugeIdentity":   {e: newException("x", "alice", hour, del, "a"), user: authenticationv1.UserInfo{Username: "alice", Groups: []string{strings.Repeat("g", maxIdentityBytes)}}, reviews: &fakeReviews{allow: []string{"a"}}, want: result{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not check the verb break-glass: the request's identity is 65541 bytes, over 65536"}},
		"NoReviewer":     {e: newException("x", "alice", hour, del, "a"), user: alice, want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable, Message: "lockguard could not check the verb break-glass: it has no access reviewer"}},
		"DuplicateLocks": {e: newException("x", "alice", hour, del, "a", "a"), user: alice, reviews: &fakeReviews{allow: []string{"a"}}, want: result{Allowed: true, Code: 200}, asked: 1},
		"SeventeenLocks": {e: newException("x", "alice", hour, del, "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"), user: alice, reviews: &fakeReviews{}, want: denied("LockException refused: spec.locks names 17 Locks, at most 16")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := ExceptionOptions{Now: func() time.Time { return exceptionNow }, BesidePolicy: tc.besides}
			if tc.reviews != nil {
				o.Reviews = tc.reviews
			}
			resp := NewExceptionHandler(o).Handle(context.Background(), exceptionCreate(t, tc.e, tc.user))
			if diff := cmp.Diff(tc.want, resultOf(resp)); diff != "" {
				t.Errorf("Handle: -want, +got:\n%s", diff)
			}
			if got := slices.Contains(resp.Warnings, PolicyWarning); got != (tc.besides && resp.Allowed) {
				t.Errorf("warnings %q: the policy warning %v, want %v", resp.Warnings, got, tc.besides)
			}
			if tc.reviews == nil {
				return
			}
			if len(tc.reviews.asked) != tc.asked {
				t.Fatalf("%d SubjectAccessReviews, want %d", len(tc.reviews.asked), tc.asked)
			}
			for _, s := range tc.reviews.asked {
				want := authorizationv1.SubjectAccessReviewSpec{User: tc.user.Username, UID: tc.user.UID, Groups: tc.user.Groups,
					Extra: map[string]authorizationv1.ExtraValue{"scopes": {"admin"}},
					ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "forge", Verb: "break-glass", Group: lockv1alpha1.Group, Resource: "locks",
						Name: s.ResourceAttributes.Name}}
				if diff := cmp.Diff(want, s); diff != "" {
					t.Errorf("SubjectAccessReview: -want, +got:\n%s", diff)
				}
			}
		})
	}
	// Not a LockException create: allowed without a review.
	other := exceptionCreate(t, newException("x", "bob", hour, del, "a"), alice)
	other.Kind.Kind = "Lock"
	reviews := &fakeReviews{}
	if resp := NewExceptionHandler(ExceptionOptions{Reviews: reviews}).Handle(context.Background(), other); !resp.Allowed || len(reviews.asked) > 0 {
		t.Errorf("a Lock create: allowed %v after %d reviews, want allowed without one", resp.Allowed, len(reviews.asked))
	}
}

// recordedUses keeps what a DenialRecorder is handed.
type recordedUses struct {
	locks [][]string
	uses  []lockv1alpha1.DeniedRequest
}

func (r *recordedUses) RecordDenial(locks []lockv1alpha1.Lock, d lockv1alpha1.DeniedRequest) {
	r.locks = append(r.locks, lockNamesOf(locks))
	r.uses = append(r.uses, d)
}

// RecordClusterDenial keeps the names of locks as ClusterLock/NAME: no
// exception pierces a ClusterLock, so no test expects one.
func (r *recordedUses) RecordClusterDenial(locks []lockv1alpha1.ClusterLock, d lockv1alpha1.DeniedRequest) {
	var names []string
	for _, c := range locks {
		names = append(names, "ClusterLock/"+c.Name)
	}
	r.locks = append(r.locks, names)
	r.uses = append(r.uses, d)
}

// TestExceptionPierce (docs/contract.md rule 20): a DELETE the Locks
// refuse is allowed for the user of an exception that names the target,
// the operation and every refusing Lock, has not expired, and that the
// API server still has (read from it when the cache has none); the API
// server's Locks decide which refuse, so a Lock the cache lags on, not
// named in the exception, still refuses. The use is warned about and,
// unless a dry run, recorded.
func TestExceptionPierce(t *testing.T) {
	hour := exceptionNow.Add(time.Hour)
	del := []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}
	a, b := newLock("forge", "a", "", "Stack", "forge"), newLock("forge", "b", "", "Stack", "forge")
	xA := newException("x-a", "alice", hour, del, "a")
	cases := map[string]struct {
		cached, live []client.Object // exceptions (cache) and Locks and exceptions (API server)
		cacheLocks   []lockv1alpha1.Lock
		user         string
		at           time.Time
		dryRun       bool
		allowed      bool
	}{
		"Pierced":          {cached: []client.Object{xA}, live: []client.Object{a, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: exceptionNow, allowed: true},
		"PiercedDryRun":    {cached: []client.Object{xA}, live: []client.Object{a, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: exceptionNow, dryRun: true, allowed: true},
		"AnotherUser":      {cached: []client.Object{xA}, live: []client.Object{a, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "bob", at: exceptionNow},
		"Expired":          {cached: []client.Object{xA}, live: []client.Object{a, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: hour},
		"DeletedFromAPI":   {cached: []client.Object{xA}, live: []client.Object{a}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: exceptionNow},
		"NotCached":        {live: []client.Object{a, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: exceptionNow, allowed: true},
		"LockCacheLags":    {cached: []client.Object{xA}, live: []client.Object{a, b, xA}, cacheLocks: []lockv1alpha1.Lock{*a}, user: "alice", at: exceptionNow},
		"TwoLocksOneNamed": {cached: []client.Object{xA}, live: []client.Object{a, b, xA}, cacheLocks: []lockv1alpha1.Lock{*a, *b}, user: "alice", at: exceptionNow},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := func() time.Time { return tc.at }
			s := lockScheme(t)
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live...).Build()
			uses := &recordedUses{}
			h := NewHandler(Config{Locks: readmodeltest.Index(t, clock, tc.cacheLocks...), Live: api, Now: clock,
				Exceptions: &ExceptionConfig{Cache: fake.NewClientBuilder().WithScheme(s).WithObjects(tc.cached...).Build(), API: api, Uses: uses}})
			req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "forge")
			req.UserInfo.Username, req.DryRun = tc.user, tc.dryRun
			resp := h.Decide(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v (%+v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			wantWarning := ExceptionWarning(xA, []lockv1alpha1.Lock{*a})
			if got := slices.Contains(resp.Warnings, wantWarning); got != tc.allowed {
				t.Errorf("warnings %q: with %q %v, want %v", resp.Warnings, wantWarning, got, tc.allowed)
			}
			if got := resp.AuditAnnotations[AuditException]; (got == "x-a") != tc.allowed {
				t.Errorf("audit annotation %s = %q", AuditException, got)
			}
			// The exception is named in this answer's annotations alone,
			// not in those every allowed review shares.
			shared := map[string]string{AuditDecision: DecisionAllowed, AuditGuard: GuardObject}
			if diff := cmp.Diff(shared, sharedAudit[[2]string{GuardObject, DecisionAllowed}]); diff != "" {
				t.Errorf("the shared audit annotations changed: -want, +got:\n%s", diff)
			}
			var want []lockv1alpha1.DeniedRequest
			if tc.allowed && !tc.dryRun {
				want = []lockv1alpha1.DeniedRequest{{User: "alice", Operation: "DELETE", Kind: "Stack", Name: "forge", Exception: "x-a"}}
			}
			for i := range uses.uses {
				uses.uses[i].Time = metav1.Time{}
				if !slices.Equal(uses.locks[i], []string{"a"}) {
					t.Errorf("recorded on Locks %v, want [a]", uses.locks[i])
				}
			}
			if diff := cmp.Diff(want, uses.uses); diff != "" {
				t.Errorf("recorded uses: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestExceptionPierceUpdate (docs/contract.md rule 20): under a ReadOnly
// Lock, an UPDATE exception lets its user change the object, whether the
// cache has seen it or only the API server has it; a DELETE exception
// does not, nor does an UPDATE exception for another user.
func TestExceptionPierceUpdate(t *testing.T) {
	const labelled = `{"core.navique.com/read-only":"true"}`
	before, after := stackJSON(1, labelled), stackJSON(2, labelled)
	ro := newLock("forge", "ro", "", "Stack", "forge")
	ro.Spec.Level = lockv1alpha1.LevelReadOnly
	hour := exceptionNow.Add(time.Hour)
	update := newException("x-update", "alice", hour, []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionUpdate}, "ro")
	del := newException("x-delete", "alice", hour, []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}, "ro")
	for _, tc := range []struct {
		name     string
		x        *lockv1alpha1.LockException
		user     string
		uncached bool // the cache has not seen the exception
		allowed  bool
	}{
		{"UpdateException", update, "alice", false, true},
		{"UpdateExceptionNotCached", update, "alice", true, true},
		{"DeleteException", del, "alice", false, false},
		{"DeleteExceptionNotCached", del, "alice", true, false},
		{"AnotherUser", update, "bob", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := func() time.Time { return exceptionNow }
			s := lockScheme(t)
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(ro, tc.x).Build()
			cache := client.Reader(api)
			if tc.uncached {
				cache = fake.NewClientBuilder().WithScheme(s).Build()
			}
			h := NewHandler(Config{Locks: readmodeltest.Index(t, clock, *ro), Live: api, Now: clock,
				Exceptions: &ExceptionConfig{Cache: cache, API: api}})
			resp := NewUpdateHandler(h, Exemptions{}, nil).Handle(context.Background(), updateRequest(tc.user, nil, before, after))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v (%+v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if want := ExceptionWarning(tc.x, []lockv1alpha1.Lock{*ro}); slices.Contains(resp.Warnings, want) != tc.allowed {
				t.Errorf("warnings %q, want %q: %v", resp.Warnings, want, tc.allowed)
			}
		})
	}
}

// TestExceptionWhileCacheLags (docs/contract.md rule 20): when the cache
// holds no exception that lets a refused request through, the
// namespace's exceptions are read from the API server (one page of
// exceptionListLimit, within exceptionReadTimeout, counted as a
// confirmation for ReasonException) and one there lets it through, by
// the same checks: its user, its expiry, every refusing Lock (as the API
// server has them) named. Past the replica's budget of such reads the
// refusal stands, counted in lockguard_exception_reads_skipped_total.
func TestExceptionWhileCacheLags(t *testing.T) {
	hour := exceptionNow.Add(time.Hour)
	del := []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}
	a, b := newLock("forge", "a", "", "Stack", "forge"), newLock("forge", "b", "", "Stack", "forge")
	xA, xAB := newException("x-a", "alice", hour, del, "a"), newException("x-ab", "alice", hour, del, "a", "b")
	gone := newException("x-0-gone", "alice", hour, del, "a")
	expired := newException("x-a", "alice", exceptionNow, del, "a")
	cases := map[string]struct {
		cached, live []client.Object     // exceptions (cache) and Locks and exceptions (API server)
		cacheLocks   []lockv1alpha1.Lock // default: a
		user         string
		listFails    bool
		want         string // the exception that lets it through; "": refused
		wantReads    int    // reads of the exceptions from the API server
	}{
		"OnlyTheAPIServerHasIt":  {live: []client.Object{a, xA}, user: "alice", want: "x-a", wantReads: 1},
		"CachedOneGone":          {cached: []client.Object{gone}, live: []client.Object{a, xA}, user: "alice", want: "x-a", wantReads: 1},
		"CachedOneFound":         {cached: []client.Object{xA}, live: []client.Object{a, xA}, user: "alice", want: "x-a"},
		"AnotherUser":            {live: []client.Object{a, xA}, user: "bob", wantReads: 1},
		"Expired":                {live: []client.Object{a, expired}, user: "alice", wantReads: 1},
		"ALockItDoesNotName":     {live: []client.Object{a, b, xA}, user: "alice", wantReads: 1},
		"EveryLockNamed":         {live: []client.Object{a, b, xA, xAB}, user: "alice", want: "x-ab", wantReads: 1},
		"CachedNamesTooFewLocks": {cached: []client.Object{xA}, live: []client.Object{a, b, xA, xAB}, user: "alice", want: "x-ab", wantReads: 1},
		"ReadFails":              {live: []client.Object{a, xA}, user: "alice", listFails: true, wantReads: 1},
		// The cache lags the delete of Lock b, which x-a does not name:
		// the API server's Locks decide.
		"LockCacheLagsADelete": {cached: []client.Object{xA}, cacheLocks: []lockv1alpha1.Lock{*a, *b}, live: []client.Object{a, xA}, user: "alice", want: "x-a", wantReads: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clock := func() time.Time { return exceptionNow }
			s := lockScheme(t)
			var reads []client.ListOptions
			api := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.live...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*lockv1alpha1.LockExceptionList); ok {
						var o client.ListOptions
						o.ApplyOptions(opts)
						reads = append(reads, o)
						if deadline, ok := ctx.Deadline(); !ok || time.Until(deadline) > exceptionReadTimeout {
							t.Errorf("the read of the exceptions: deadline %v (%v), want within %v", deadline, ok, exceptionReadTimeout)
						}
						if tc.listFails {
							return errors.New("etcd is slow")
						}
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			f := &freshness{calls: new([]string)}
			if tc.cacheLocks == nil {
				tc.cacheLocks = []lockv1alpha1.Lock{*a}
			}
			h := NewHandler(Config{Locks: readmodeltest.Index(t, clock, tc.cacheLocks...), Live: api, Now: clock, Freshness: f,
				Exceptions: &ExceptionConfig{Cache: fake.NewClientBuilder().WithScheme(s).WithObjects(tc.cached...).Build(), API: api}})
			req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "forge")
			req.UserInfo.Username = tc.user
			resp := h.Decide(context.Background(), req)
			if got := resp.AuditAnnotations[AuditException]; resp.Allowed != (tc.want != "") || got != tc.want {
				t.Fatalf("allowed %v through %q (%+v), want through %q", resp.Allowed, got, resp.Result, tc.want)
			}
			if len(reads) != tc.wantReads {
				t.Fatalf("%d reads of the exceptions from the API server, want %d", len(reads), tc.wantReads)
			}
			for _, o := range reads {
				if o.Namespace != "forge" || o.Limit != exceptionListLimit {
					t.Errorf("read of the exceptions in %q, limit %d: want forge, %d", o.Namespace, o.Limit, exceptionListLimit)
				}
			}
			if want := slices.Repeat([]string{ReasonException}, tc.wantReads); !slices.Equal(slices.DeleteFunc(f.confirmed, func(r string) bool { return r != ReasonException }), want) {
				t.Errorf("confirmations %q, want %q", f.confirmed, want)
			}
		})
	}
}

// TestExceptionReadBudget: the reads of exceptions from the API server
// are a replica's token bucket; past it, a refusal whose exception the
// cache has not seen stands, counted in
// lockguard_exception_reads_skipped_total, and no read is made.
func TestExceptionReadBudget(t *testing.T) {
	clock := func() time.Time { return exceptionNow }
	s := lockScheme(t)
	a := newLock("forge", "a", "", "Stack", "forge")
	xA := newException("x-a", "alice", exceptionNow.Add(time.Hour), []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}, "a")
	reads := 0
	api := fake.NewClientBuilder().WithScheme(s).WithObjects(a, xA).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*lockv1alpha1.LockExceptionList); ok {
				reads++
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	m := NewMetrics()
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Config{Locks: readmodeltest.Index(t, clock, *a), Live: api, Now: clock, Metrics: m,
		Exceptions: &ExceptionConfig{Cache: fake.NewClientBuilder().WithScheme(s).Build(), API: api, Reads: rate.Every(time.Hour), ReadBurst: 2}})
	del := func(user string) bool {
		req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "forge")
		req.UserInfo.Username = user
		return h.Decide(context.Background(), req).Allowed
	}
	if del("bob") || !del("alice") {
		t.Fatal("within the budget: bob refused and alice allowed through x-a, want so")
	}
	if del("alice") || reads != 2 {
		t.Fatalf("past the budget: alice allowed %v after %d reads, want refused after 2", !del("alice"), reads)
	}
	if got := testutil.ToFloat64(m.skippedReads); got != 1 {
		t.Errorf("lockguard_exception_reads_skipped_total = %v, want 1", got)
	}
}
