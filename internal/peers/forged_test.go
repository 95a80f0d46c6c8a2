package peers

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// lockCreate is the AdmissionReview request of a Lock create of a's Lock
// and target, as the API server sends it (or as a forger would).
func lockCreate(t *testing.T, a Announcement) admission.Request {
	t.Helper()
	l := &lockv1alpha1.Lock{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Name, UID: a.UID},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: a.Kind, Name: a.Target}},
	}
	raw, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "forged", Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Lock"},
		Namespace: a.Namespace, Name: a.Name, Object: runtime.RawExtension{Raw: raw},
	}}
}

// TestForgedRefusedCreateKeepsTheGenuineMarker is issue 22's first attack:
// a caller that learnt the UID of a pending Lock create sends a review of
// a create with that UID built to be refused (here its namespace cannot be
// labelled, as for a namespace that does not exist). The refusal must not
// remove the genuine marker: the target's deletes stay confirmed until
// the cache holds the Lock.
func TestForgedRefusedCreateKeepsTheGenuineMarker(t *testing.T) {
	_, _, tr := warmStandalone(t)

	genuine := ann("u1", "db")
	tr.Mark(genuine) // told by the replica that admitted it
	admit := webhook.NewCreateHandler(webhook.CreateOptions{
		Announcer: newPeers(tr, nil, Config{}),
		Labeler: webhook.NamespaceLabelerFunc(func(context.Context, string) error {
			return errors.New(`namespaces "nowhere" not found`)
		}),
	})

	cases := map[string]Announcement{
		"SameLockAndTarget": genuine,
		"OtherNamespace":    {Namespace: "nowhere", Name: genuine.Name, UID: genuine.UID, Group: genuine.Group, Kind: genuine.Kind, Target: genuine.Target},
		"OtherTarget":       {Namespace: genuine.Namespace, Name: "forged", UID: genuine.UID, Group: genuine.Group, Kind: genuine.Kind, Target: "decoy"},
	}
	for name, forged := range cases {
		resp := admit.Handle(context.Background(), lockCreate(t, forged))
		if resp.Allowed {
			t.Fatalf("%s: the forged create was allowed, want refused (its namespace cannot be labelled)", name)
		}
		if reason, may := tr.MayLack(key("db")); !may || reason != ReasonMarker {
			t.Fatalf("%s: after a refused forged create with the pending UID, MayLack(db) = %q, %v; want marker, true", name, reason, may)
		}
	}
	// The replay keeps it too: a replica that subscribes now hears of it.
	if _, err := tr.Admit(genuine); err != nil {
		t.Fatal(err)
	}
	tr.SetView([]string{"late:1"})
	resp, err := tr.Subscribe("late:1")
	if err != nil {
		t.Fatal(err)
	}
	if !hasAnnouncement(resp.Recent, genuine) {
		t.Fatalf("replay %v lacks the genuine create after forged refusals", resp.Recent)
	}
}

// TestPreClaimedUIDCannotShadowATarget is the variant: a forged
// announcement marks the UID of a Lock create about to be admitted with
// another target first. The genuine mark must still mark its own target.
func TestPreClaimedUIDCannotShadowATarget(t *testing.T) {
	c, cache, tr := warmStandalone(t)

	tr.Mark(ann("u1", "decoy")) // the forger's, first
	tr.Mark(ann("u1", "db"))    // the genuine create
	if reason, may := tr.MayLack(key("db")); !may || reason != ReasonMarker {
		t.Fatalf("MayLack(db) = %q, %v after a pre-claimed UID; want marker, true", reason, may)
	}
	// The sweep clears the forged marker (its Lock is absent), not the
	// genuine one.
	c.add(DefaultTTL + time.Second)
	for _, a := range tr.Expired() {
		if a.Target == "decoy" {
			tr.Clear(a)
		}
	}
	if _, may := tr.MayLack(key("db")); !may {
		t.Fatal("clearing the forged marker of a UID removed the genuine marker of that UID")
	}
	if _, may := tr.MayLack(key("decoy")); may {
		t.Fatal("the forged marker was not cleared")
	}
	// The informer delivering the genuine Lock clears every mark of its UID.
	cache.uids["u1"] = true
	tr.Observe("u1")
	if tr.Markers() != 0 {
		t.Fatalf("Markers() = %d after the Lock was delivered, want 0", tr.Markers())
	}
}

func hasAnnouncement(as []Announcement, want Announcement) bool {
	for _, a := range as {
		if a == want {
			return true
		}
	}
	return false
}
