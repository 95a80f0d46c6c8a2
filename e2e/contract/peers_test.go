package contract_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// TestPeerEndpointSlices runs the EndpointSlice view of the peer protocol
// (what the chart's --peer-service does) as lockguard's ServiceAccount,
// with the chart's RBAC, on the real API server: the other replicas are
// every address of the webhook Service's EndpointSlices, ready or not,
// except this replica's, and a change of the slices changes the view.
func TestPeerEndpointSlices(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const ns, svc = framework.ServiceAccountNamespace, "lockguard-webhook"
	slice := func(name, service string, ips ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for i, ip := range ips {
			// Every other endpoint terminating and not ready: it may still
			// admit creates, so it is a peer all the same.
			ready := i%2 == 0
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Terminating: ptr.To(!ready)}})
		}
		return s
	}
	ours := slice("lockguard-webhook-test", svc, "10.9.0.1", "10.9.0.2", "10.9.0.3")
	other := slice("someone-else-test", "someone-else", "10.9.0.9")
	for _, s := range []*discoveryv1.EndpointSlice{ours, other} {
		if err := kube.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), s) })
	}

	saCfg, err := suite.env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var views [][]string
	src := peers.EndpointSlices{Client: cs, Namespace: ns, Service: svc, SelfIP: "10.9.0.2", Port: 9443}
	errs := make(chan error, 1)
	go func() {
		errs <- src.Run(ctx, func(v []string) {
			mu.Lock()
			defer mu.Unlock()
			views = append(views, v)
		})
	}()
	wantView := func(want ...string) {
		t.Helper()
		framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("view %v", want), func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if len(views) == 0 || !slices.Equal(views[len(views)-1], want) {
				return fmt.Errorf("views so far %v", views)
			}
			return nil
		})
	}
	wantView("10.9.0.1:9443", "10.9.0.3:9443")

	ours.Endpoints = ours.Endpoints[:1]
	if err := kube.Client.Update(ctx, ours); err != nil {
		t.Fatal(err)
	}
	wantView("10.9.0.1:9443")

	cancel()
	select {
	case err := <-errs:
		if err != nil {
			t.Fatalf("the EndpointSlice view as lockguard's ServiceAccount: %v", err)
		}
	case <-time.After(framework.DefaultTimeout):
		t.Fatal("the EndpointSlice view did not stop with its context")
	}
}
