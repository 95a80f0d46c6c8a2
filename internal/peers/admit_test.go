package peers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// TestAdmissionLabelsTheNamespace: the webhook's admission of Lock creates
// (webhook.CreateHandler, announcing through Peers) allows a create only
// after every replica was told and the namespace was labelled; a label
// that cannot be written refuses the create, retryably, and keeps the
// marker until the sweep (a refusal can be forged); a dry run labels
// nothing.
func TestAdmissionLabelsTheNamespace(t *testing.T) {
	lock := &lockv1alpha1.Lock{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", UID: types.UID("u1")},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Stack", Name: "app"}},
	}
	raw, err := json.Marshal(lock)
	if err != nil {
		t.Fatal(err)
	}
	request := func(dryRun bool) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "r", Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Lock"},
			Namespace: "forge", Name: "keep", Object: runtime.RawExtension{Raw: raw}, DryRun: ptr.To(dryRun),
		}}
	}
	cases := map[string]struct {
		reason      string
		dryRun      bool
		labelErr    error
		wantAllowed bool
		wantLabels  []string
		wantMarkers int
	}{
		"Labelled": {
			reason:      "Told (no peers) and labelled: allowed, the marker kept until the cache delivers the Lock.",
			wantAllowed: true, wantLabels: []string{"forge"}, wantMarkers: 1,
		},
		"LabelFails": {
			reason:   "The label cannot be written: refused, retryably; the marker stays until the sweep.",
			labelErr: errors.New("namespaces \"forge\" is forbidden"), wantLabels: []string{"forge"}, wantMarkers: 1,
		},
		"DryRun": {
			reason: "A dry run writes nothing: allowed, no label, no marker.",
			dryRun: true, wantAllowed: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tr := newTracker(trackerConfig{Standalone: true}, &fakeCache{synced: true, uids: map[types.UID]bool{}})
			tr.SetView(nil)
			var labelled []string
			admit := webhook.NewCreateHandler(webhook.CreateOptions{
				Announcer: newPeers(tr, nil, Config{}),
				Labeler: webhook.NamespaceLabelerFunc(func(_ context.Context, ns string) error {
					labelled = append(labelled, ns)
					return tc.labelErr
				}),
			})
			resp := admit.Handle(context.Background(), request(tc.dryRun))
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("%s\nallowed = %v (%v), want %v", tc.reason, resp.Allowed, resp.Result, tc.wantAllowed)
			}
			if !tc.wantAllowed && (resp.Result.Code != 503 || !strings.Contains(resp.Result.Message, lockv1alpha1.CreateRefusedRetry)) {
				t.Errorf("%s\nrefusal %d %q; want 503 saying %q", tc.reason, resp.Result.Code, resp.Result.Message, lockv1alpha1.CreateRefusedRetry)
			}
			if strings.Join(labelled, ",") != strings.Join(tc.wantLabels, ",") {
				t.Errorf("%s\nthe namespace label written on %v, want %v", tc.reason, labelled, tc.wantLabels)
			}
			if got := tr.Markers(); got != tc.wantMarkers {
				t.Errorf("%s\nmarkers %d, want %d", tc.reason, got, tc.wantMarkers)
			}
		})
	}
}
