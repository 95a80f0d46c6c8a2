package webhook

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestUpdateOfLabelledObjectConfirmed (docs/contract.md rule 16, issue
// 39): a Lock raised from CanNotDelete to ReadOnly is not announced as a
// create is, so a warm replica's cache may still hold it as CanNotDelete
// after the reconciler (reading its own, newer cache) has labelled the
// object read-only and reported the Lock InForce. The update guard reads
// the API server's Locks whenever the label says frozen and its cache does
// not, and only then.
func TestUpdateOfLabelledObjectConfirmed(t *testing.T) {
	const labelled, unlabelled = `{"core.navique.com/read-only":"true"}`, `{"tier":"db"}`
	s := lockScheme(t)
	cached := newLock("forge", "freeze", "", "Stack", "forge")
	raised := cached.DeepCopy()
	raised.Spec.Level = lockv1alpha1.LevelReadOnly
	warm := &freshness{calls: new([]string)}
	cases := map[string]struct {
		reason  string
		labels  string
		cached  []lockv1alpha1.Lock
		apiDown bool
		want    result
		reads   []string // lockguard_confirmations_total's reasons
	}{
		"Raised": {
			reason: "The cache holds the Lock as CanNotDelete, the label says frozen: the API server's ReadOnly Lock refuses.",
			labels: labelled, cached: []lockv1alpha1.Lock{*cached},
			want:  result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage([]lockv1alpha1.Lock{*raised}, "spec")},
			reads: []string{ReasonLabelled},
		},
		"CreateUnseen": {
			reason: "The cache holds no Lock of the labelled object: the API server's refuses.",
			labels: labelled,
			want:   result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage([]lockv1alpha1.Lock{*raised}, "spec")},
			reads:  []string{ReasonLabelled},
		},
		"Frozen": {
			reason: "The cache holds the ReadOnly Lock: refused with no read.",
			labels: labelled, cached: []lockv1alpha1.Lock{*raised},
			want: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage([]lockv1alpha1.Lock{*raised}, "spec")},
		},
		"NotLabelled": {
			reason: "Without the label the reconciler has not frozen the object (the Lock says so: Pending): the cache decides, with no read.",
			labels: unlabelled, cached: []lockv1alpha1.Lock{*cached},
			want: result{Allowed: true, Code: 200},
		},
		"APIDown": {
			reason: "The label says frozen, the cache does not, and the API server cannot be read: refused, retryably (fail closed).",
			labels: labelled, cached: []lockv1alpha1.Lock{*cached}, apiDown: true,
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for Stack.core.navique.com forge/forge, so the update is refused; retry when lockguard is ready: reading the Locks of namespace forge from the API server: listing Locks from the API server: connection refused"},
			reads: []string{ReasonLabelled},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(s).WithObjects(raised.DeepCopy())
			if tc.apiDown {
				b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return errors.New("connection refused")
				}})
			}
			index := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return tc.cached, nil })
			f := &freshness{calls: warm.calls}
			u := NewUpdateHandler(NewHandler(Config{Locks: index, Live: b.Build(), Freshness: f}), Exemptions{}, nil)
			resp := u.Handle(t.Context(), updateRequest("alice", nil, stackJSON(1, tc.labels), stackJSON(2, tc.labels)))
			got := resultOf(resp)
			if tc.want.Allowed {
				got.Message = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.reads, f.confirmed); diff != "" {
				t.Errorf("%s\nreads of the API server: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
