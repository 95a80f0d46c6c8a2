package contract_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// Forged CRD-delete attack: forgedLocks Locks (on Stacks that do not
// exist, so that no decision stops early) and forgedClients clients that
// each post forged AdmissionReviews of the DELETE of the Stack CRD and of
// the Lock CRD to the webhook port, back to back.
const (
	forgedLocks   = 1000
	forgedClients = 32
	// forgedHeapBound is how far above its idle Go heap lockguard's may go
	// while the forged reviews flood it: at most 4 CRD or namespace
	// decisions run at once (webhook's maxClusterDecisions), each holding
	// the Locks of one kind and one page of the API server's list.
	// Measured: +5.0 MiB on 1.37.2 (103 forged reviews answered while
	// the heap was sampled, every one denied).
	forgedHeapBound = 48 << 20
)

// TestForgedCRDReviews runs the lockguard binary with forgedLocks Locks in
// the cluster and floods its webhook port with forged CRD-delete reviews
// (anyone who reaches the port can send one: the API server presents no
// client certificate) while it sends dry-run deletes through the real API
// server: each is answered within the webhook's timeout, and lockguard's
// Go heap stays within forgedHeapBound of its idle heap.
func TestForgedCRDReviews(t *testing.T) {
	inProcess(t)
	lg := startBinary(t)
	reviews, webhookTimeout := dryRunReviews(t, lg, "hostile-forged", "lockguard-hostile-forged")

	// The Locks, in a namespace of their own that no webhook configuration
	// of the test selects.
	ns := kube.NewNamespace(t, "hostile-forged-locks")
	parallel(t, func() []string {
		names := make([]string, forgedLocks)
		for i := range names {
			names[i] = "l-" + strconv.Itoa(i)
		}
		return names
	}(), func(name string) error {
		return kube.Client.Create(context.Background(), &lockv1alpha1.Lock{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "gone-" + name}},
		})
	})

	idle := sampleMemory(t, lg, 10, reviews)
	t.Logf("idle with %d Locks: Go heap max %.1f MiB, RSS max %.1f MiB", forgedLocks, mib(idle.heap), mib(idle.rss))

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(lg.Webhook.CA)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}, MaxIdleConnsPerHost: forgedClients}}
	url := "https://" + net.JoinHostPort(lg.Webhook.Host, strconv.Itoa(lg.Webhook.Port)) + webhook.Path
	bodies := [][]byte{forgedCRDReview(t, "stacks", "Stack"), forgedCRDReview(t, "locks", "Lock")}
	var sent, answered atomic.Int64
	codes := sync.Map{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range forgedClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				res, err := hc.Post(url, "application/json", bytes.NewReader(bodies[(i+j)%len(bodies)]))
				if err != nil {
					continue
				}
				var review admissionv1.AdmissionReview
				if res.StatusCode == http.StatusOK && json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&review) == nil && review.Response != nil {
					answered.Add(1)
					key := fmt.Sprintf("allowed=%t code=%d", review.Response.Allowed, review.Response.Result.Code)
					n, _ := codes.LoadOrStore(key, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				} else {
					n, _ := codes.LoadOrStore("http "+strconv.Itoa(res.StatusCode), new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
				res.Body.Close()
			}
		}()
	}
	attacked := sampleMemory(t, lg, 10, reviews)
	close(stop)
	wg.Wait()
	summary := map[string]int64{}
	codes.Range(func(k, v any) bool { summary[k.(string)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("%d forged CRD-delete reviews from %d clients (%d answered: %v): Go heap max %.1f MiB (%+.1f MiB over idle), RSS max %.1f MiB (%+.1f MiB); slowest real review %s, every one answered within %s",
		sent.Load(), forgedClients, answered.Load(), summary, mib(attacked.heap), mib(attacked.heap-idle.heap), mib(attacked.rss), mib(attacked.rss-idle.rss), attacked.slowest.Round(time.Millisecond), webhookTimeout)
	if answered.Load() == 0 {
		t.Fatal("no forged review was answered: the attack did not reach the guards")
	}
	if attacked.heap > idle.heap+forgedHeapBound {
		t.Errorf("Go heap %.1f MiB under forged CRD-delete reviews, over idle (%.1f MiB) + %.0f MiB", mib(attacked.heap), mib(idle.heap), mib(forgedHeapBound))
	}
}

// forgedCRDReview returns an AdmissionReview of the DELETE of the
// core.navique.com CRD of plural and kind, as the API server would send
// it.
func forgedCRDReview(t *testing.T, plural, kind string) []byte {
	t.Helper()
	crd, err := json.Marshal(map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + lockv1alpha1.Group},
		"spec": map[string]any{"group": lockv1alpha1.Group, "scope": "Namespaced",
			"names": map[string]any{"kind": kind, "plural": plural}},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("forged-" + plural),
			Kind:      metav1.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
			Resource:  metav1.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
			Name:      plural + "." + lockv1alpha1.Group,
			Operation: admissionv1.Delete,
			OldObject: runtime.RawExtension{Raw: crd},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return data
}
