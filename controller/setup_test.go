package controller

import (
	"context"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// addRecorder is a manager that records the runnables added to it.
type addRecorder struct {
	ctrl.Manager
	added []manager.Runnable
}

func (m *addRecorder) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return m.Manager.Add(r)
}

// TestSetupRunsOnTheLeaderOnly: everything Setup adds to the manager (the
// reconciler and the discovery of the kinds it watches) waits for
// leadership; the read model's discovery, which every replica runs for
// the webhook, is added elsewhere.
func TestSetupRunsOnTheLeaderOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(lockv1alpha1.GroupVersion.WithKind("Lock"), meta.RESTScopeNamespace)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Namespace"), meta.RESTScopeRoot)
	// Nothing is started: the address is never dialled.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:         scheme,
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mapper, nil },
		Metrics:        metricsserver.Options{BindAddress: "0"},
		LeaderElection: false,
	})
	if err != nil {
		t.Fatal(err)
	}
	locks, err := readmodel.NewLockIndex(context.Background(), mgr.GetCache())
	if err != nil {
		t.Fatal(err)
	}
	rec := &addRecorder{Manager: mgr}
	kinds := readmodel.NewKinds(&fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}})
	if err := Setup(rec, locks, kinds, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(rec.added) < 2 {
		t.Fatalf("Setup added %d runnables, want the reconciler and its kind discovery", len(rec.added))
	}
	for _, r := range rec.added {
		le, ok := r.(manager.LeaderElectionRunnable)
		if !ok || !le.NeedLeaderElection() {
			t.Errorf("Setup added %T, which runs without leadership", r)
		}
	}
}
