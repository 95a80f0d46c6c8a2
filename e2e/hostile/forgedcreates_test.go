//go:build e2e

package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// The forged Lock creates of TestForgedCreates.
const (
	// forgedFrom is the loopback address they come from.
	forgedFrom = "127.0.0.9"
	// forgedLongNames are the creates with a 1 MiB name; a replica that
	// kept each name (its marker and its replay) would hold twice that.
	forgedLongNames = 48
	// forgedValid are the creates of valid Locks that do not exist.
	forgedValid = 5
	// forgedHeapSlack bounds how much the Go heap that a collection
	// leaves may grow across the refused creates: the body buffers the
	// Gate keeps for reuse (the reviews, about 2 MiB each with the name
	// twice, are sent one at a time: one buffer of each size class up to
	// 4 MiB, about 8 MiB) and what the process allocated meanwhile; a
	// sixth of what keeping the long names twice would take.
	forgedHeapSlack = 16 << 20
	// forgedWithin bounds how long after pendingTTL the valid creates'
	// markers and namespace label may take to go: the sweep runs every
	// renewal (a few seconds), the leader's reconciler looks again
	// every 5 s, on a loaded machine.
	forgedWithin = 90 * time.Second
)

// pendingTTL is the binary's --pending-ttl (main_test.go): how long a
// forged create of a valid Lock keeps its marker and namespace label.
const pendingTTL = 20 * time.Second

// Messages of the refusals of forged creates (api/v1alpha1
// ValidateCreated).
const (
	forgedPrefix = "lockguard got a Lock create that the API server would not have admitted: "
	subdomainMsg = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
)

// TestForgedCreates: a client without a certificate, from 127.0.0.9,
// posts forged Lock-create reviews to /validate-lock-create (issue 36,
// docs/contract.md rule 17). Those whose Lock the API server would not
// have admitted (48 with a 1 MiB name, half of them also with `/`, `%`
// and capitals; names with `/`, `%` or capitals) are each refused 400
// naming the field, and leave nothing: no pending marker, no namespace
// label, and the Go heap after a collection within forgedHeapSlack of
// what it was. Forged creates of valid Locks that do not exist are
// allowed (nothing in a review tells them from the API server's): each
// adds a marker and the namespace label, which are gone once the sweep
// finds their Locks absent after --pending-ttl.
func TestForgedCreates(t *testing.T) {
	ns := kube.NewNamespace(t, "forged")
	hc := forgedClient()
	defer hc.CloseIdleConnections()
	markersBefore := pendingMarkers(t)
	heapBefore := heapAfterGC(t)

	long := strings.Repeat("a", 1<<20)
	odd := strings.Repeat("A/%", (1<<20)/3+1)[:1<<20]
	cases := map[string]string{
		"a/b":   forgedPrefix + `metadata.name "a/b": ` + subdomainMsg,
		"a%2Fb": forgedPrefix + `metadata.name "a%2Fb": ` + subdomainMsg,
		"Keep":  forgedPrefix + `metadata.name "Keep": ` + subdomainMsg,
		"a%":    forgedPrefix + `metadata.name "a%": ` + subdomainMsg,
	}
	longMsg := forgedPrefix + `metadata.name "` + long[:64] + `"... (1048576 bytes): must be no more than 253 characters`
	oddMsg := forgedPrefix + `metadata.name "` + odd[:64] + `"... (1048576 bytes): must be no more than 253 characters; ` + subdomainMsg
	start := time.Now()
	sent := 0
	for i := range forgedLongNames {
		// A different name each time, as a client that wants its names
		// kept would send.
		name, want := fmt.Sprintf("%07d", i)+long[7:], longMsg
		if i%2 == 1 {
			name, want = fmt.Sprintf("%07d", i)+odd[7:], oddMsg
			want = strings.Replace(want, odd[:64], name[:64], 1)
		} else {
			want = strings.Replace(want, long[:64], name[:64], 1)
		}
		cases[name] = want
	}
	var refusals []string
	for name, want := range cases {
		got := forgeCreate(t, hc, ns, name, fmt.Sprintf("00000000-0000-4000-8000-%012d", sent))
		sent++
		if got != "400 "+want {
			refusals = append(refusals, fmt.Sprintf("name %.80q: got %.400q, want 400 %.400q", name, got, want))
		}
	}
	if len(refusals) > 0 {
		t.Errorf("%d of %d forged creates not refused as wanted:\n%s", len(refusals), len(cases), strings.Join(refusals, "\n"))
	}
	took := time.Since(start)
	heapAfter := heapAfterGC(t)
	if m := pendingMarkers(t); m != markersBefore {
		t.Errorf("lockguard_pending_markers: %v after the refused creates, %v before; want no change", m, markersBefore)
	}
	if labelled(t, ns) {
		t.Errorf("namespace %s has the %s label after refused creates only", ns, lockv1alpha1.HasLocksLabel)
	}
	report(t, "%d forged creates of invalid Locks (%d with 1 MiB names), %d not refused as wanted, in %s; Go heap after GC %.1f -> %.1f MiB (allowed: +%d MiB), pending markers %v -> %v",
		len(cases), forgedLongNames, len(refusals), took.Round(time.Millisecond), heapBefore/(1<<20), heapAfter/(1<<20), forgedHeapSlack>>20, markersBefore, pendingMarkers(t))
	if grown := heapAfter - heapBefore; grown > forgedHeapSlack {
		t.Errorf("the Go heap after GC grew by %.1f MiB across the refused creates, want at most %d MiB", grown/(1<<20), forgedHeapSlack>>20)
	}

	// Valid Locks that do not exist, of Stacks that do not exist.
	for i := range forgedValid {
		name := fmt.Sprintf("forged-%d", i)
		if got := forgeCreate(t, hc, ns, name, fmt.Sprintf("00000000-0000-4000-9000-%012d", i)); got != "allowed" {
			t.Fatalf("forged create of valid Lock %s/%s: got %q, want allowed", ns, name, got)
		}
	}
	allowed := time.Now()
	if m := pendingMarkers(t); m != markersBefore+forgedValid {
		t.Errorf("lockguard_pending_markers: %v after %d allowed forged creates, %v before; want %v", m, forgedValid, markersBefore, markersBefore+forgedValid)
	}
	if !labelled(t, ns) {
		t.Errorf("namespace %s lacks the %s label after allowed creates", ns, lockv1alpha1.HasLocksLabel)
	}
	deadline := allowed.Add(pendingTTL + forgedWithin)
	var markers float64
	for {
		markers = pendingMarkers(t)
		if markers == markersBefore && !labelled(t, ns) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the allowed forged creates (--pending-ttl %s): %v pending markers (%v before), namespace label still on: %v",
				time.Since(allowed).Round(time.Second), pendingTTL, markers, markersBefore, labelled(t, ns))
		}
		time.Sleep(500 * time.Millisecond)
	}
	report(t, "%d forged creates of valid Locks that do not exist allowed; their markers and the namespace label gone %s after (--pending-ttl %s)",
		forgedValid, time.Since(allowed).Round(time.Second), pendingTTL)
}

// forgedClient is an HTTP client of lockguard's webhook that dials from
// forgedFrom and presents no client certificate.
func forgedClient() *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(forgedFrom)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: target.tls.Clone(), DialContext: d.DialContext}}
}

// forgeCreate posts the review of the create of Lock ns/name (uid, of a
// Stack that does not exist) to the Lock-create path, and returns
// "allowed", or the refusal's code and message.
func forgeCreate(t *testing.T, hc *http.Client, ns, name, uid string) string {
	t.Helper()
	lock := framework.NewLock(ns, name, "Stack", "ghost-"+uid[len(uid)-3:], "forged")
	lock.TypeMeta = metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"}
	lock.UID = types.UID(uid)
	raw, err := json.Marshal(lock)
	if err != nil {
		t.Fatal(err)
	}
	kind := metav1.GroupVersionKind{Group: lockv1alpha1.GroupVersion.Group, Version: lockv1alpha1.GroupVersion.Version, Kind: "Lock"}
	resource := metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: "locks"}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("forged-" + uid), Kind: kind, Resource: resource, RequestKind: &kind, RequestResource: &resource,
			Name: name, Namespace: ns, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "hostile"},
			Object:   runtime.RawExtension{Raw: raw},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://"+target.lg.Webhook.Address()+webhook.CreatePath+"?timeout=10s", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("forged create of %.80q: %v", name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil || out.Response == nil {
		return fmt.Sprintf("HTTP %d %.200s", resp.StatusCode, data)
	}
	switch r := out.Response; {
	case r.Allowed:
		return "allowed"
	case r.Result == nil:
		return "refused without a status"
	default:
		return fmt.Sprintf("%d %s", r.Result.Code, r.Result.Message)
	}
}

// pendingMarkers reads lockguard_pending_markers from the binary.
func pendingMarkers(t *testing.T) float64 {
	t.Helper()
	m, err := target.lg.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := m["lockguard_pending_markers"]
	if !ok {
		t.Fatal("no lockguard_pending_markers in lockguard's metrics")
	}
	return v
}

// labelled reports whether namespace ns carries the namespace guard's
// label, read from the API server.
func labelled(t *testing.T, ns string) bool {
	t.Helper()
	var n corev1.Namespace
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	return n.Labels[lockv1alpha1.HasLocksLabel] == "true"
}
