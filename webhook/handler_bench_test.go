package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// The handler benchmarks answer DELETE reviews through the real
// readmodel.LockIndex, on controller-runtime's informer cache with
// lockguard's informer, store and index (lockIndexOf), fed by an
// in-memory ListWatch of n Locks: the code path of lockguard, without an
// API server. Each review goes through an
// http.Handler, body and all, so that decoding counts.
//
//	go test -run '^$' -bench . -benchmem ./webhook
//
// make bench runs them and reports the ratios in docs/benchmarks.md.

// benchLockCounts are the numbers of Locks in the cache.
var benchLockCounts = []int{10, 10_000, 100_000}

// benchSizes are the sizes of the oldObject of the reviews.
var benchSizes = []struct {
	name string
	size int
}{{"1KiB", 1 << 10}, {"16KiB", 16 << 10}, {"256KiB", 256 << 10}, {"1MiB", 1 << 20}}

// locksPerNamespace spreads the Locks over namespaces, as in a cluster.
const locksPerNamespace = 100

// BenchmarkHandler measures a DELETE review of an object no Lock targets
// (the common case) through the full HTTP handler path: reading the body,
// decoding the AdmissionReview, deciding, encoding the response. path=
// controller-runtime is admission.Webhook; path=lockguard is what
// cmd/lockguard/manager registers.
func BenchmarkHandler(b *testing.B) {
	for _, n := range benchLockCounts {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := benchHandler(b, n)
			for _, s := range benchSizes {
				body := reviewBody(b, "ns-0", "stack-unlocked", s.size)
				for _, p := range benchPaths(h) {
					b.Run(fmt.Sprintf("oldObject=%s/path=%s", s.name, p.name), func(b *testing.B) {
						serveBench(b, p.handler, body, true)
					})
				}
			}
		})
	}
}

// BenchmarkHandlerScaling compares the cost of a review at 10k and 100k
// Locks with its cost at 10 Locks, side by side: the three caches live in
// the same heap, and the benchmark alternates between them in short
// batches, so that a noisy machine slows all three alike. It reports the
// time of each (ns/review-<n>) and the median of the per-round ratios
// (ratio-<n>/10); the ns/op of the benchmark itself is meaningless.
func BenchmarkHandlerScaling(b *testing.B) {
	handlers := make([]http.Handler, len(benchLockCounts))
	for i, n := range benchLockCounts {
		handlers[i] = benchHandler(b, n)
	}
	for _, s := range benchSizes {
		body := reviewBody(b, "ns-0", "stack-unlocked", s.size)
		b.Run("oldObject="+s.name, func(b *testing.B) {
			// About 1ms per batch, whatever the size.
			batch := max(1, 64<<10/len(body))
			w := &discardWriter{header: http.Header{}}
			rd := &bodyReader{}
			req, err := http.NewRequest(http.MethodPost, "https://lockguard.invalid"+webhook.Path, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.ContentLength = int64(len(body))
			total := make([]time.Duration, len(handlers))
			ratios := make([][]float64, len(handlers))
			for b.Loop() {
				var took [8]time.Duration
				for i, h := range handlers {
					start := time.Now()
					for range batch {
						rd.Reset(body)
						req.Body = rd
						w.reset()
						h.ServeHTTP(w, req)
					}
					took[i] = time.Since(start)
					total[i] += took[i]
				}
				for i := range handlers {
					ratios[i] = append(ratios[i], float64(took[i])/float64(took[0]))
				}
			}
			rounds := float64(len(ratios[0]) * batch)
			for i, n := range benchLockCounts {
				b.ReportMetric(float64(total[i].Nanoseconds())/rounds, fmt.Sprintf("ns/review-%d", n))
				if i > 0 {
					b.ReportMetric(median(ratios[i]), fmt.Sprintf("ratio-%d/10", n))
				}
			}
		})
	}
}

// median returns the median of xs, which it sorts.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// BenchmarkHandlerDenied is BenchmarkHandler for an object one Lock
// protects, with a 1 KiB oldObject.
func BenchmarkHandlerDenied(b *testing.B) {
	for _, n := range benchLockCounts {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := benchHandler(b, n)
			body := reviewBody(b, "ns-0", "stack-0", 1<<10)
			for _, p := range benchPaths(h) {
				b.Run("path="+p.name, func(b *testing.B) { serveBench(b, p.handler, body, false) })
			}
		})
	}
}

// BenchmarkDecide measures Handler.Decide alone, on an already decoded
// request: the decision, without HTTP and JSON.
func BenchmarkDecide(b *testing.B) {
	for _, n := range benchLockCounts {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			h := benchHandler(b, n)
			for _, tc := range decideCases {
				b.Run(tc.name, func(b *testing.B) { decideBench(b, h, benchDelete(tc.object, false), tc.allowed) })
			}
		})
	}
}

// BenchmarkDecideWarm is BenchmarkDecide on lockguard's default path: a
// handler that confirms with the API server what its cache would allow,
// on a warm replica (a Freshness that says the cache lacks no Lock), so
// that the index alone decides these deletes and the API server is never
// read. lookups=one reads the index once per review (the LockIndex is a
// webhook.Coverage); lookups=separate hides that, so the same index is
// asked LiveLocks, LiveSelectorLocksCovering and, for an allowed delete,
// StandingLocksCover, as the handler did before.
func BenchmarkDecideWarm(b *testing.B) {
	for _, n := range benchLockCounts[:2] {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			index := lockIndexOf(b, benchLocks(n))
			for _, tc := range decideCases {
				for _, lookups := range []struct {
					name  string
					locks webhook.Locks
				}{{"one", index}, {"separate", separateLookups{index}}} {
					h := webhook.NewHandler(webhook.Config{Locks: lookups.locks, Live: unreadAPI{b}, Freshness: warm{}})
					b.Run(tc.name+"/lookups="+lookups.name, func(b *testing.B) { decideBench(b, h, benchDelete(tc.object, true), tc.allowed) })
				}
			}
		})
	}
}

// decideCases are the deletes of the Decide benchmarks: of an object no
// Lock protects, and of one a Lock protects.
var decideCases = []struct {
	name, object string
	allowed      bool
}{{"allowed", "stack-unlocked", true}, {"denied", "stack-0", false}}

// benchDelete is the decoded review of the DELETE of Stack ns-0/object,
// with an oldObject (of no labels) when old is set.
func benchDelete(object string, old bool) webhook.Request {
	req := webhook.Request{
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
		Operation: admissionv1.Delete,
		Kind:      metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
		Namespace: "ns-0",
		Name:      object,
	}
	if old {
		req.OldObject.Metadata.Name = object
	}
	return req
}

// decideBench decides req with h b.N times, each answer allowed or not.
func decideBench(b *testing.B, h *webhook.Handler, req webhook.Request, allowed bool) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Decide(ctx, req); resp.Allowed != allowed {
			b.Fatalf("allowed %v, want %v: %+v", resp.Allowed, allowed, resp.Result)
		}
	}
}

// separateLookups is a Locks that is no webhook.Coverage.
type separateLookups struct{ webhook.Locks }

// warm is the Freshness of a warm replica without pending creates: the
// cache lacks no Lock.
type warm struct{}

func (warm) MayLack(lockv1alpha1.TargetKey) (string, bool) { return "", false }
func (warm) PendingCreate(lockv1alpha1.TargetKey) bool     { return false }
func (warm) Confirmed(string)                              {}

// unreadAPI is an API server the benchmark must not read.
type unreadAPI struct{ b *testing.B }

func (a unreadAPI) List(context.Context, client.ObjectList, ...client.ListOption) error {
	a.b.Fatal("the API server was read")
	return nil
}

type benchPath struct {
	name    string
	handler http.Handler
}

// benchPaths are the HTTP handlers to compare: controller-runtime's
// admission.Webhook around the Handler, and the one cmd/lockguard/manager
// registers.
func benchPaths(h *webhook.Handler) []benchPath {
	paths := []benchPath{{"controller-runtime", &admission.Webhook{Handler: h}}}
	if hh, ok := any(h).(http.Handler); ok {
		paths = append(paths, benchPath{"lockguard", hh})
	}
	return paths
}

// serveBench posts body to h b.N times.
func serveBench(b *testing.B, h http.Handler, body []byte, allowed bool) {
	req, err := http.NewRequest(http.MethodPost, "https://lockguard.invalid"+webhook.Path+"?timeout=5s", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	w := &discardWriter{header: http.Header{}}
	rd := &bodyReader{}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		req.Body = rd
		w.reset()
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("HTTP %d", w.code)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(body)), "body-B")
	// Check the last answer once, outside the timed loop.
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(w.last.Bytes(), &ar); err != nil || ar.Response == nil {
		b.Fatalf("decoding the response %q: %v", w.last.String(), err)
	}
	if ar.Response.Allowed != allowed {
		b.Fatalf("allowed %v, want %v: %+v", ar.Response.Allowed, allowed, ar.Response.Result)
	}
}

// bodyReader is a reusable request body.
type bodyReader struct{ bytes.Reader }

func (*bodyReader) Close() error { return nil }

// discardWriter is a reusable http.ResponseWriter that keeps the last
// response, so that the benchmark measures the handler, not the recorder.
type discardWriter struct {
	header http.Header
	code   int
	last   bytes.Buffer
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.last.Write(p)
}
func (w *discardWriter) reset() {
	w.code = 0
	w.last.Reset()
	clear(w.header)
}

// benchHandler returns a cache-only Handler whose index is an informer
// cache of n Locks; the cache stops at the end of the benchmark.
func benchHandler(b *testing.B, n int) *webhook.Handler {
	b.Helper()
	// Same metrics as in lockguard, in a fresh registry.
	m := webhook.NewMetrics()
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		b.Fatal(err)
	}
	return webhook.NewHandler(webhook.Config{Locks: lockIndexOf(b, benchLocks(n)), Metrics: m})
}

// benchLocks returns n active Locks, locksPerNamespace per namespace ns-<i>;
// Lock lock-<j> protects Stack stack-<j>.
func benchLocks(n int) *lockv1alpha1.LockList {
	list := &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	list.Items = make([]lockv1alpha1.Lock, n)
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for i := range list.Items {
		ns := fmt.Sprintf("ns-%d", i/locksPerNamespace)
		j := i % locksPerNamespace
		list.Items[i] = lockv1alpha1.Lock{
			TypeMeta: metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: fmt.Sprintf("lock-%d", j),
				UID:             types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
				ResourceVersion: "1", Generation: 1, CreationTimestamp: created,
			},
			Spec: lockv1alpha1.LockSpec{
				TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.DefaultTargetAPIVersion, Kind: "Stack", Name: fmt.Sprintf("stack-%d", j)},
				Reason:    "Production environment - remove this Lock deliberately before deleting.",
			},
			Status: lockv1alpha1.LockStatus{
				Active:             true,
				ObservedGeneration: 1,
				Conditions: []metav1.Condition{{
					Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive,
					Message: fmt.Sprintf("deleting Stack %q is denied while this Lock exists", fmt.Sprintf("stack-%d", j)), ObservedGeneration: 1, LastTransitionTime: created,
				}},
			},
		}
	}
	return list
}

// reviewBody returns a JSON AdmissionReview of the DELETE of Stack ns/name
// whose oldObject (with managedFields, as the API server sends it) is about
// size bytes.
func reviewBody(b *testing.B, ns, name string, size int) []byte {
	b.Helper()
	old := map[string]any{
		"apiVersion": "core.navique.com/v1alpha1",
		"kind":       "Stack",
		"metadata": map[string]any{
			"name": name, "namespace": ns, "uid": "6f1d9c1e-2b4a-4d7e-9f0a-1c2b3d4e5f60",
			"resourceVersion": "123456", "generation": 3, "creationTimestamp": "2026-01-02T03:04:05Z",
			"labels": map[string]any{"app.kubernetes.io/name": "forge", "app.kubernetes.io/part-of": "navique"},
			"managedFields": []any{map[string]any{
				"manager": "navique-operator", "operation": "Apply", "apiVersion": "core.navique.com/v1alpha1",
				"time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:environment": map[string]any{}, "f:payload": map[string]any{}}},
			}},
		},
		"spec": map[string]any{"environment": "production", "payload": ""},
	}
	raw, err := json.Marshal(old)
	if err != nil {
		b.Fatal(err)
	}
	if pad := size - len(raw); pad > 0 {
		old["spec"].(map[string]any)["payload"] = strings.Repeat("x", pad)
		if raw, err = json.Marshal(old); err != nil {
			b.Fatal(err)
		}
	}
	dryRun := false
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             "705ab4f5-6393-11e8-b7cc-42010a800002",
			Kind:            metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
			Resource:        metav1.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"},
			RequestKind:     &metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
			RequestResource: &metav1.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"},
			Name:            name,
			Namespace:       ns,
			Operation:       admissionv1.Delete,
			UserInfo: authenticationv1.UserInfo{
				Username: "kubernetes-admin", UID: "admin-uid",
				Groups: []string{"kubeadm:cluster-admins", "system:authenticated"},
			},
			OldObject: runtime.RawExtension{Raw: raw},
			DryRun:    &dryRun,
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}`)},
		},
	}
	body, err := json.Marshal(ar)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

var _ io.ReadCloser = &bodyReader{}
