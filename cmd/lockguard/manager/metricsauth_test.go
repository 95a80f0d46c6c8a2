package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// metricsAuthFake is an API server's answers to the filter's reviews,
// and the reviews it was asked.
type metricsAuthFake struct {
	users      map[string]authnv1.UserInfo // by token
	allowed    map[string]bool             // by user name
	tokenErr   []error                     // returned by the next TokenReviews, in turn
	accessErr  error
	tokenCalls []string
	accessAsk  []string // user verb path
}

func (f *metricsAuthFake) auth() *reviewAuth {
	return newReviewAuth(func(_ context.Context, token string) (authnv1.UserInfo, bool, error) {
		f.tokenCalls = append(f.tokenCalls, token)
		if len(f.tokenErr) > 0 {
			err := f.tokenErr[0]
			f.tokenErr = f.tokenErr[1:]
			if err != nil {
				return authnv1.UserInfo{}, false, err
			}
		}
		u, ok := f.users[token]
		return u, ok, nil
	}, func(_ context.Context, user authnv1.UserInfo, verb, path string) (bool, string, error) {
		f.accessAsk = append(f.accessAsk, strings.Join([]string{user.Username, verb, path}, " "))
		if f.accessErr != nil {
			return false, "", f.accessErr
		}
		return f.allowed[user.Username], "by the fake", nil
	})
}

func serveMetrics(t *testing.T, a *reviewAuth, authorization string) (int, bool) {
	t.Helper()
	reached := false
	h, err := a.filter(logr.Discard(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, reached
}

// TestMetricsAuth: the metrics filter answers 401 to a request without a
// bearer token, with a token the API server does not authenticate, with a
// token too long to send for review, or when the TokenReview fails; 403
// when the SubjectAccessReview denies; 500 when it fails; and reaches the
// handler only when both reviews allow. What it asks of the API server is
// exact: one TokenReview a token, one SubjectAccessReview of the user, the
// lower-cased verb and the path.
func TestMetricsAuth(t *testing.T) {
	scraper := authnv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus", UID: "u1", Groups: []string{"system:serviceaccounts"}}
	nobody := authnv1.UserInfo{Username: "nobody"}
	unavailable := apierrors.NewServiceUnavailable("etcd is down")
	cases := map[string]struct {
		reason        string
		authorization string
		tokenErr      []error
		accessErr     error
		wantCode      int
		wantTokens    []string
		wantAsked     []string
	}{
		"NoHeader":    {reason: "no token, no review", wantCode: http.StatusUnauthorized},
		"BasicAuth":   {reason: "another scheme is no token", authorization: "Basic YWRtaW46YWRtaW4=", wantCode: http.StatusUnauthorized},
		"EmptyBearer": {reason: "a scheme without a token", authorization: "Bearer", wantCode: http.StatusUnauthorized},
		"ThreeFields": {reason: "a token has no spaces", authorization: "Bearer a b", wantCode: http.StatusUnauthorized},
		"Oversize": {reason: "a token over the bound is not sent", authorization: "Bearer " + strings.Repeat("x", maxBearerToken+1),
			wantCode: http.StatusUnauthorized},
		"Unknown": {reason: "the API server does not know the token", authorization: "Bearer stranger",
			wantCode: http.StatusUnauthorized, wantTokens: []string{"stranger"}},
		"TokenReviewFails": {reason: "a refused review is no authentication", authorization: "Bearer scraper",
			tokenErr: []error{apierrors.NewForbidden(schema.GroupResource{Resource: "tokenreviews"}, "", errors.New("no"))},
			wantCode: http.StatusUnauthorized, wantTokens: []string{"scraper"}},
		"TokenReviewRetried": {reason: "an unavailable API server is asked again", authorization: "Bearer scraper",
			tokenErr: []error{unavailable}, wantCode: http.StatusOK, wantTokens: []string{"scraper", "scraper"},
			wantAsked: []string{scraper.Username + " get /metrics"}},
		"Forbidden": {reason: "authenticated, not authorized", authorization: "Bearer nobody",
			wantCode: http.StatusForbidden, wantTokens: []string{"nobody"}, wantAsked: []string{"nobody get /metrics"}},
		"AccessReviewFails": {reason: "the SubjectAccessReview failing is a server error", authorization: "Bearer scraper",
			accessErr: errors.New("boom"), wantCode: http.StatusInternalServerError, wantTokens: []string{"scraper"},
			wantAsked: []string{scraper.Username + " get /metrics"}},
		"Allowed": {reason: "both reviews allow", authorization: "bearer  scraper ",
			wantCode: http.StatusOK, wantTokens: []string{"scraper"}, wantAsked: []string{scraper.Username + " get /metrics"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &metricsAuthFake{
				users:     map[string]authnv1.UserInfo{"scraper": scraper, "nobody": nobody},
				allowed:   map[string]bool{scraper.Username: true},
				tokenErr:  tc.tokenErr,
				accessErr: tc.accessErr,
			}
			code, reached := serveMetrics(t, f.auth(), tc.authorization)
			if code != tc.wantCode || reached != (tc.wantCode == http.StatusOK) {
				t.Errorf("%s\nHTTP %d, handler reached %v; want %d", tc.reason, code, reached, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantTokens, f.tokenCalls); diff != "" {
				t.Errorf("%s\nTokenReviews: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantAsked, f.accessAsk); diff != "" {
				t.Errorf("%s\nSubjectAccessReviews: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMetricsAuthCaches: a scraper's token and decision are asked once
// and reused until their TTL ends; a denial is kept for 30 s, an
// allowance for 5 min; an unknown token is asked again only after a
// minute.
func TestMetricsAuthCaches(t *testing.T) {
	scraper := authnv1.UserInfo{Username: "scraper"}
	f := &metricsAuthFake{users: map[string]authnv1.UserInfo{"scraper": scraper, "nobody": {Username: "nobody"}},
		allowed: map[string]bool{"scraper": true}}
	a := f.auth()
	now := time.Unix(1_000_000, 0)
	a.now = func() time.Time { return now }
	for range 3 {
		for _, auth := range []string{"Bearer scraper", "Bearer nobody", "Bearer stranger"} {
			serveMetrics(t, a, auth)
		}
	}
	want := []string{"scraper", "nobody", "stranger"}
	if diff := cmp.Diff(want, f.tokenCalls); diff != "" {
		t.Errorf("TokenReviews within a minute: -want, +got:\n%s", diff)
	}
	now = now.Add(45 * time.Second)
	serveMetrics(t, a, "Bearer nobody")
	serveMetrics(t, a, "Bearer scraper")
	wantAsked := []string{"scraper get /metrics", "nobody get /metrics", "nobody get /metrics"}
	if diff := cmp.Diff(wantAsked, f.accessAsk); diff != "" {
		t.Errorf("SubjectAccessReviews after 45 s: -want, +got:\n%s", diff)
	}
	now = now.Add(30 * time.Second)
	serveMetrics(t, a, "Bearer stranger")
	if diff := cmp.Diff(append(want, "stranger"), f.tokenCalls); diff != "" {
		t.Errorf("TokenReviews after 75 s: -want, +got:\n%s", diff)
	}
}

// TestTTLCacheBound: a full cache drops what has expired to make room,
// and stores nothing new while every entry is live.
func TestTTLCacheBound(t *testing.T) {
	c := ttlCache[int]{max: 2}
	now := time.Unix(0, 0)
	c.put("a", 1, now, time.Second)
	c.put("b", 2, now, time.Minute)
	c.put("c", 3, now, time.Minute)
	if _, ok := c.get("c", now); ok {
		t.Errorf("a full cache stored a third entry")
	}
	c.put("a", 4, now, time.Second)
	if v, ok := c.get("a", now); !ok || v != 4 {
		t.Errorf("get(a) = %d, %v after replacing it; want 4, true", v, ok)
	}
	later := now.Add(2 * time.Second)
	c.put("c", 3, later, time.Minute)
	if v, ok := c.get("c", later); !ok || v != 3 {
		t.Errorf("get(c) = %d, %v once a had expired; want 3, true", v, ok)
	}
	if _, ok := c.get("a", later); ok || len(c.entries) != 2 {
		t.Errorf("after the sweep: a still there or %d entries; want a gone, 2", len(c.entries))
	}
}

// TestMetricsAuthInFlight: however many requests arrive at once, the
// filter asks the API server at most maxReviewsInFlight reviews at a
// time; the others wait their turn and are answered.
func TestMetricsAuthInFlight(t *testing.T) {
	var mu sync.Mutex
	in, most := 0, 0
	release := make(chan struct{})
	a := newReviewAuth(func(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
		mu.Lock()
		in++
		most = max(most, in)
		mu.Unlock()
		<-release
		mu.Lock()
		in--
		mu.Unlock()
		return authnv1.UserInfo{Username: token}, true, nil
	}, func(context.Context, authnv1.UserInfo, string, string) (bool, string, error) { return true, "", nil })
	const requests = 3 * maxReviewsInFlight
	codes := make(chan int, requests)
	for i := range requests {
		go func() {
			code, _ := serveMetrics(t, a, fmt.Sprintf("Bearer token-%d", i))
			codes <- code
		}()
	}
	// Wait for the first reviews to start, give the rest a moment to
	// overrun the bound (they would, without it), then answer them all.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		started := in
		mu.Unlock()
		if started >= maxReviewsInFlight || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(100 * time.Millisecond)
	close(release)
	for range requests {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("HTTP %d, want 200", code)
		}
	}
	if most != maxReviewsInFlight {
		t.Errorf("at most %d reviews at once, want %d", most, maxReviewsInFlight)
	}
}
