package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/navique/lockguard/internal/transport"
)

// Paths returns the paths of the peer endpoints on the webhook server,
// each served by Peers.ServeHTTP.
func Paths() []string { return []string{SubscribePath, PendingPath} }

// ServeHTTP serves the endpoints the other replicas call: SubscribePath
// and PendingPath. Any other path is not found.
func (p *Peers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case SubscribePath:
		p.serveSubscribe(w, r)
	case PendingPath:
		p.servePending(w, r)
	default:
		http.NotFound(w, r)
	}
}

// subscribeRequest is the body of POST /peers/subscribe.
type subscribeRequest struct {
	Address string `json:"address"`
}

// serveSubscribe serves POST /peers/subscribe, from an authenticated
// replica, for its own address (the host it calls from) as this replica's
// view lists it. The answer is streamed, one announcement at a time.
func (p *Peers) serveSubscribe(w http.ResponseWriter, r *http.Request) {
	if !p.authenticated(w, r) {
		return
	}
	p.o.Gate.Serve(w, r, maxSubscribeRequest, func(_ context.Context, body *transport.Body) {
		var req subscribeRequest
		if !decodeJSON(w, body, &req) {
			return
		}
		if err := callerOwns(r, req.Address); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		resp, err := p.t.Subscribe(req.Address)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(ProtocolHeader, ProtocolVersion)
		_ = writeSubscribeResponse(w, resp)
	})
}

// writeSubscribeResponse writes resp as JSON, encoding one announcement
// at a time: a replay of MaxMarkers announcements is never held whole.
func writeSubscribeResponse(w io.Writer, resp SubscribeResponse) error {
	if _, err := fmt.Fprintf(w, `{"new":%t,"complete":%t,"recent":[`, resp.New, resp.Complete); err != nil {
		return err
	}
	for i, a := range resp.Recent {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if i > 0 {
			b = append([]byte{','}, b...)
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]}\n")
	return err
}

// callerOwns checks that address is host:port with the host r came from:
// a replica subscribes for itself only.
func callerOwns(r *http.Request, address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil || len(address) > maxAddressLen {
		return fmt.Errorf("a subscription needs this replica's host:port (at most %d bytes), got %.64q", maxAddressLen, address)
	}
	from, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil || !sameHost(host, from) {
		return fmt.Errorf("a replica subscribes for its own address only: %s called from %s", address, r.RemoteAddr)
	}
	return nil
}

// sameHost compares two hosts, as IP addresses where both are.
func sameHost(a, b string) bool {
	ia, ib := net.ParseIP(a), net.ParseIP(b)
	if ia != nil && ib != nil {
		return ia.Equal(ib)
	}
	return a == b
}

// maxAddressLen bounds a subscriber's host:port.
const maxAddressLen = 300

// servePending serves POST /peers/pending, from an authenticated replica:
// one announcement, marked before the answer.
func (p *Peers) servePending(w http.ResponseWriter, r *http.Request) {
	if !p.authenticated(w, r) {
		return
	}
	p.o.Gate.Serve(w, r, maxPendingRequest, func(_ context.Context, body *transport.Body) {
		var a Announcement
		if !decodeJSON(w, body, &a) {
			return
		}
		if err := a.validate(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		p.t.Mark(a)
		w.Header().Set(ProtocolHeader, ProtocolVersion)
		w.WriteHeader(http.StatusOK)
	})
}

// authenticated answers a call that does not come from an authenticated
// replica speaking this protocol version, before its body is read, and
// returns false for it.
func (p *Peers) authenticated(w http.ResponseWriter, r *http.Request) bool {
	if p.o.Authenticate == nil {
		http.Error(w, "this replica accepts no calls from other replicas", http.StatusForbidden)
		return false
	}
	if err := p.o.Authenticate(r); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return false
	}
	if v := r.Header.Get(ProtocolHeader); v != ProtocolVersion {
		http.Error(w, fmt.Sprintf("peer protocol version %.16q; this replica speaks %q", v, ProtocolVersion), http.StatusBadRequest)
		return false
	}
	return true
}

// decodeJSON decodes body into v, or answers the error and returns false.
func decodeJSON(w http.ResponseWriter, body *transport.Body, v any) bool {
	if err := json.Unmarshal(body.Bytes(), v); err != nil {
		http.Error(w, "decoding the body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}
