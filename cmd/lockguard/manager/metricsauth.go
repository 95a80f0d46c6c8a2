package manager

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics filter's bounds. The TTLs and the backoff are those
// kube-apiserver's delegating authenticator and authorizer use
// (k8s.io/apiserver's DelegatingAuthenticatorConfig with a one-minute
// CacheTTL, DelegatingAuthorizerConfig's 5 min / 30 s, and
// DefaultAuthWebhookRetryBackoff).
const (
	// maxBearerToken is the longest token sent for review: a
	// ServiceAccount token is about a kilobyte, an OIDC token a few.
	maxBearerToken = 16 << 10
	// reviewTimeout bounds one TokenReview or SubjectAccessReview, its
	// retries included.
	reviewTimeout = 10 * time.Second
	// maxReviewsInFlight bounds the reviews the filter asks of the API
	// server at once; further requests wait (within their own context).
	maxReviewsInFlight = 8
	// maxCached bounds each cache (tokens, decisions); when full and
	// nothing has expired, a new answer is not cached.
	maxCached = 1024
	tokenTTL  = time.Minute
	allowTTL  = 5 * time.Minute
	denyTTL   = 30 * time.Second
)

// reviewBackoff retries a review the API server failed transiently.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// tokenReviewer asks the API server who holds a bearer token: ok is false
// when the token is not authenticated.
type tokenReviewer func(ctx context.Context, token string) (user authnv1.UserInfo, ok bool, err error)

// accessReviewer asks the API server whether user may use verb on the
// non-resource path.
type accessReviewer func(ctx context.Context, user authnv1.UserInfo, verb, path string) (allowed bool, reason string, err error)

// metricsAuth is the metrics endpoint's filter: the caller must present a
// token the API server authenticates (TokenReview) and be allowed to get
// the path (SubjectAccessReview).
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization
// does, with two differences. A token the API server rejects gets 401, as
// from kube-apiserver itself, where controller-runtime answers 500 and logs
// an error for every bad token (so any stranger could fill the logs and
// trip alerts on 5xx); errors of the SubjectAccessReview stay 500. And it
// calls the two reviews itself rather than through k8s.io/apiserver's
// delegating authenticator and authorizer, whose factories link CEL, gRPC
// and OpenTelemetry into the binary: 28 MB of its 65 (issue 38).
func metricsAuth(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	a := newReviewAuth(reviewToken(authnClient.TokenReviews()), reviewAccess(authzClient.SubjectAccessReviews()))
	return a.filter, nil
}

// reviewAuth authenticates and authorizes metrics requests, caching the
// API server's answers.
type reviewAuth struct {
	token     tokenReviewer
	access    accessReviewer
	now       func() time.Time
	inFlight  chan struct{}
	tokens    ttlCache[tokenAnswer]
	decisions ttlCache[accessAnswer]
}

type tokenAnswer struct {
	user authnv1.UserInfo
	ok   bool
}

type accessAnswer struct {
	allowed bool
	reason  string
}

func newReviewAuth(token tokenReviewer, access accessReviewer) *reviewAuth {
	return &reviewAuth{
		token:     token,
		access:    access,
		now:       time.Now,
		inFlight:  make(chan struct{}, maxReviewsInFlight),
		tokens:    ttlCache[tokenAnswer]{max: maxCached},
		decisions: ttlCache[accessAnswer]{max: maxCached},
	}
}

// filter is a metricsserver.Filter.
func (a *reviewAuth) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, err := a.authenticate(req)
		if err != nil {
			log.V(1).Info("Refused an unauthenticated metrics request", "remote", req.RemoteAddr, "reason", err)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, reason, err := a.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			log.Error(err, "Cannot authorize a metrics request", "user", user.Username)
			http.Error(w, "Authorization failed", http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(1).Info("Refused an unauthorized metrics request", "user", user.Username, "reason", reason)
			http.Error(w, "Authorization denied for user "+user.Username, http.StatusForbidden)
			return
		}
		handler.ServeHTTP(w, req)
	}), nil
}

var errNoToken = errors.New("no bearer token")

// authenticate returns the user the request's bearer token belongs to, or
// an error saying why it has none.
func (a *reviewAuth) authenticate(req *http.Request) (authnv1.UserInfo, error) {
	fields := strings.Fields(req.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "bearer") {
		return authnv1.UserInfo{}, errNoToken
	}
	token := fields[1]
	if len(token) > maxBearerToken {
		return authnv1.UserInfo{}, fmt.Errorf("a bearer token of %d bytes, over %d", len(token), maxBearerToken)
	}
	sum := sha256.Sum256([]byte(token))
	answer, err := cachedReview(req.Context(), a, &a.tokens, string(sum[:]), func(tokenAnswer) time.Duration { return tokenTTL },
		func(ctx context.Context) (t tokenAnswer, err error) {
			t.user, t.ok, err = a.token(ctx, token)
			return t, err
		})
	if err != nil {
		return authnv1.UserInfo{}, err
	}
	if !answer.ok {
		return authnv1.UserInfo{}, errors.New("the API server did not authenticate the token")
	}
	return answer.user, nil
}

// authorize returns whether user may use verb on path.
func (a *reviewAuth) authorize(ctx context.Context, user authnv1.UserInfo, verb, path string) (bool, string, error) {
	answer, err := cachedReview(ctx, a, &a.decisions, accessKey(user, verb, path), accessTTL,
		func(ctx context.Context) (d accessAnswer, err error) {
			d.allowed, d.reason, err = a.access(ctx, user, verb, path)
			return d, err
		})
	return answer.allowed, answer.reason, err
}

// accessTTL is how long a decision is kept: an allowance longer than a
// denial.
func accessTTL(d accessAnswer) time.Duration {
	if d.allowed {
		return allowTTL
	}
	return denyTTL
}

// cachedReview returns the answer cache c holds for key, or asks call
// (through a.review) and keeps what it answers for ttl of the answer. A
// failed review is not kept.
func cachedReview[V any](ctx context.Context, a *reviewAuth, c *ttlCache[V], key string, ttl func(V) time.Duration, call func(context.Context) (V, error)) (V, error) {
	if cached, hit := c.get(key, a.now()); hit {
		return cached, nil
	}
	var answer V
	err := a.review(ctx, func(ctx context.Context) (err error) {
		answer, err = call(ctx)
		return err
	})
	if err != nil {
		var zero V
		return zero, err
	}
	c.put(key, answer, a.now(), ttl(answer))
	return answer, nil
}

// review runs call within the in-flight bound and reviewTimeout, retrying
// what the API server failed transiently.
func (a *reviewAuth) review(ctx context.Context, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	select {
	case a.inFlight <- struct{}{}:
		defer func() { <-a.inFlight }()
	case <-ctx.Done():
		return ctx.Err()
	}
	var err error
	stopped := wait.ExponentialBackoffWithContext(ctx, reviewBackoff, func(ctx context.Context) (bool, error) {
		err = call(ctx)
		return err == nil || !transient(err), nil
	})
	if err == nil {
		// Nothing answered (ctx ended before a call), or the last call did.
		return stopped
	}
	return err
}

// transient reports whether a review's error is worth retrying: the API
// server was overloaded or unreachable, not a refusal.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsInternalError(err) ||
		apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionReset(err) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err)
}

// accessKey identifies a decision: the whole identity, the verb and the path.
func accessKey(user authnv1.UserInfo, verb, path string) string {
	var b strings.Builder
	for _, s := range []string{user.Username, user.UID, verb, path} {
		fmt.Fprintf(&b, "%q;", s)
	}
	fmt.Fprintf(&b, "%q;", user.Groups)
	for _, k := range slices.Sorted(maps.Keys(user.Extra)) {
		fmt.Fprintf(&b, "%q=%q;", k, []string(user.Extra[k]))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return string(sum[:])
}

// reviewToken is the tokenReviewer of a TokenReviews client.
func reviewToken(c authenticationv1.TokenReviewInterface) tokenReviewer {
	return func(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
		r, err := c.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return authnv1.UserInfo{}, false, err
		}
		return r.Status.User, r.Status.Authenticated, nil
	}
}

// reviewAccess is the accessReviewer of a SubjectAccessReviews client.
func reviewAccess(c authorizationv1.SubjectAccessReviewInterface) accessReviewer {
	return func(ctx context.Context, user authnv1.UserInfo, verb, path string) (bool, string, error) {
		extra := make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authzv1.ExtraValue(v)
		}
		r, err := c.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User:                  user.Username,
			UID:                   user.UID,
			Groups:                user.Groups,
			Extra:                 extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, "", err
		}
		return r.Status.Allowed && !r.Status.Denied, r.Status.Reason, nil
	}
}

// ttlCache is a bounded map of answers that expire.
type ttlCache[V any] struct {
	mu      sync.Mutex
	max     int
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func (c *ttlCache[V]) get(key string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores value for ttl from now; when the cache is full it first
// drops what has expired, and if nothing has, it does not store value.
func (c *ttlCache[V]) put(key string, value V, now time.Time, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[string]ttlEntry[V])
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= c.max {
			return
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
