package contract_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// watchLag holds back the events of the suite lockguard's watches on
// Locks by this long (0: not at all).
var watchLag atomic.Int64

// lockPages counts the suite lockguard's lists of Locks that ask for a
// page after the first (a continue token).
var lockPages atomic.Int64

// exceptionLag holds back the events of the suite lockguard's watches on
// LockExceptions by this long (0: not at all).
var exceptionLag atomic.Int64

// lagWatches wraps the transport of the suite's lockguard: the bodies of
// its watches on Locks deliver their events watchLag late, and those on
// LockExceptions exceptionLag late. It also counts lockPages.
func lagWatches(rt http.RoundTripper) http.RoundTripper {
	return lateWatches(lagWatchesBy(&watchLag)(rt), "/lockexceptions", &exceptionLag)
}

// lateWatches wraps rt: the bodies of its watches of the resources whose
// path ends in suffix deliver their events lag late.
func lateWatches(rt http.RoundTripper, suffix string, lag *atomic.Int64) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" && strings.HasSuffix(req.URL.Path, suffix) {
			resp.Body = lateBody{resp.Body, lag}
		}
		return resp, err
	})
}

// lagWatchesBy returns lagWatches with its own lag: a test's cache that
// must lag while the suite's lockguard does not.
func lagWatchesBy(lag *atomic.Int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return lagged(rt, lag) }
}

func lagged(rt http.RoundTripper, lag *atomic.Int64) http.RoundTripper {
	late := lateWatches(rt, "/locks", lag)
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Query().Get("continue") != "" && strings.HasSuffix(req.URL.Path, "/locks") {
			lockPages.Add(1)
		}
		return late.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// lateBody hands on what it reads lag after it arrived.
type lateBody struct {
	io.ReadCloser
	lag *atomic.Int64
}

func (b lateBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if d := time.Duration(b.lag.Load()); d > 0 && n > 0 {
		time.Sleep(d)
	}
	return n, err
}

// TestLaggingCacheStillDenies: while lockguard's Lock cache lags behind
// the API server (its watch events arrive late, as they do for
// milliseconds always, and for seconds while a watch reconnects), a delete
// sent right after a Lock's create was answered must still be denied.
// Regression test for the violations the chaos run found (issue 7).
func TestLaggingCacheStillDenies(t *testing.T) {
	inProcess(t)
	ctx := context.Background()
	c := kube.Client
	// A webhook configuration for the suite's lockguard, for this
	// namespace only.
	ns, vwc := webhookForNamespace(t, suite.webhook, "hostile-lagging", "lockguard-hostile")

	const rounds = 5
	for i := range rounds {
		name := "forge-" + string(rune('a'+i))
		if err := c.Create(ctx, framework.Object(framework.StackGVK, ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	watchLag.Store(int64(3 * time.Second))
	defer watchLag.Store(0)
	for i := range rounds {
		name := "forge-" + string(rune('a'+i))
		lock := &lockv1alpha1.Lock{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-" + name},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: name}},
		}
		if err := c.Create(ctx, lock); err != nil {
			t.Fatal(err)
		}
		err := c.Delete(ctx, framework.Object(framework.StackGVK, ns, name))
		if !isDenial(err, vwc.Webhooks[0].Name, lock.Name) {
			t.Fatalf("delete of Stack %s right after its Lock was created, while lockguard's cache lags: got %v, want the denial", name, err)
		}
	}
}
