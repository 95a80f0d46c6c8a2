package peers

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/certs"
)

// replica is one Peers served over TLS on loopback, as the webhook server
// serves it: client certificates requested, verified by the handlers.
type replica struct {
	p    *Peers
	t    *Tracker
	addr string
	srv  *httptest.Server
}

// pki is a CA, its file, and a certificate it issued for 127.0.0.1.
type pki struct {
	ca   *certs.CAPool
	cert tls.Certificate
}

func newPKI(t *testing.T, name string) pki {
	t.Helper()
	ca, err := certs.NewAuthority(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), certs.CAName)
	if err := os.WriteFile(file, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.NewCAPool(file)
	if err != nil {
		t.Fatal(err)
	}
	return pki{ca: pool, cert: pair}
}

// clientTLS is the peer client configuration of a replica of k.
func (k pki) clientTLS(t *testing.T) *tls.Config {
	t.Helper()
	c, err := certs.PeerClientTLS(k.ca, "", func() (*tls.Certificate, error) { return &k.cert, nil })
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newReplica(t *testing.T, k pki, c *clock) *replica {
	t.Helper()
	r := &replica{t: newTracker(trackerConfig{Now: c.Now}, &fakeCache{synced: true, uids: map[types.UID]bool{}})}
	mux := http.NewServeMux()
	r.srv = httptest.NewUnstartedServer(mux)
	r.srv.TLS = &tls.Config{Certificates: []tls.Certificate{k.cert}}
	certs.RequestClientCertificates()(r.srv.TLS)
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	r.addr = strings.TrimPrefix(r.srv.URL, "https://")
	r.p = newPeers(r.t, nil, Config{Self: r.addr, TLS: k.clientTLS(t),
		Authenticate: func(req *http.Request) error { return certs.VerifyPeer(k.ca, "", req) }})
	for _, path := range Paths() {
		mux.Handle(path, r.p)
	}
	return r
}

// TestTwoReplicasOverMutualTLS runs the protocol between two replicas
// over real TLS on loopback: B subscribes to A, A admits a create and
// tells B, which marks its target. A caller with a certificate of another
// CA, or one that subscribes for an address that is not its own, is
// refused and learns nothing.
func TestTwoReplicasOverMutualTLS(t *testing.T) {
	c := newClock()
	k := newPKI(t, "lockguard-ca")
	a, b := newReplica(t, k, c), newReplica(t, k, c)
	a.t.SetView([]string{b.addr})
	b.t.SetView([]string{a.addr})
	ctx := context.Background()

	if _, err := a.t.Admit(ann("u0", "early")); err == nil {
		t.Fatal("A admitted a create before B subscribed")
	}
	var subErr error
	b.p.renew(ctx, func(_ string, err error) { subErr = err })
	if subErr != nil {
		t.Fatalf("B could not subscribe to A: %v", subErr)
	}
	if err := a.p.Announce(ctx, ann("u1", "db")); err != nil {
		t.Fatalf("A could not tell B: %v", err)
	}
	if b.t.Markers() != 1 {
		t.Fatalf("B holds %d markers after A's announcement, want 1", b.t.Markers())
	}

	post := func(cfg *tls.Config, path, body string) (int, string) {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequest(http.MethodPost, "https://"+a.addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(ProtocolHeader, ProtocolVersion)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(res.Body)
		return res.StatusCode, out.String()
	}
	// The impostor trusts A's serving certificate but has its own CA.
	impostor := newPKI(t, "impostor-ca")
	impostorTLS := &tls.Config{RootCAs: k.clientTLS(t).RootCAs, Certificates: []tls.Certificate{impostor.cert}}
	noCertTLS := &tls.Config{RootCAs: k.clientTLS(t).RootCAs}
	cases := map[string]struct {
		cfg  *tls.Config
		path string
		body string
	}{
		"NoCertificateSubscribes":     {noCertTLS, SubscribePath, `{"address":"` + b.addr + `"}`},
		"OtherCASubscribes":           {impostorTLS, SubscribePath, `{"address":"` + b.addr + `"}`},
		"OtherCAAnnounces":            {impostorTLS, PendingPath, `{"namespace":"ns","name":"l-x","uid":"x","group":"core.navique.com","kind":"Stack","target":"cache"}`},
		"ReplicaSubscribesForAnother": {k.clientTLS(t), SubscribePath, `{"address":"127.0.0.2:9443"}`},
		"AddressNotInView":            {k.clientTLS(t), SubscribePath, `{"address":"127.0.0.1:1"}`},
	}
	for name, tc := range cases {
		markers := a.t.Markers()
		code, body := post(tc.cfg, tc.path, tc.body)
		if code != http.StatusForbidden && code != http.StatusServiceUnavailable {
			t.Errorf("%s: answered %d %q, want 403 (or 503 for an address not in the view)", name, code, body)
		}
		if strings.Contains(body, "u1") {
			t.Errorf("%s: the answer tells of a pending create: %s", name, body)
		}
		if a.t.Markers() != markers {
			t.Errorf("%s: A's markers changed from %d to %d", name, markers, a.t.Markers())
		}
	}
	// A call of another protocol version is refused, even from a replica.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: k.clientTLS(t)}}
	defer hc.CloseIdleConnections()
	res, err := hc.Post("https://"+a.addr+SubscribePath, "application/json", strings.NewReader(`{"address":"`+b.addr+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a subscription without the protocol version answered %d, want 400", res.StatusCode)
	}
}
