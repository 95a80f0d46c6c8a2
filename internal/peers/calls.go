package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// renewLoop renews the subscriptions every RenewEvery until ctx ends.
func (p *Peers) renewLoop(ctx context.Context) {
	failing := map[string]bool{}
	var mu sync.Mutex
	for {
		p.renew(ctx, func(peer string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if was := failing[peer]; err != nil && !was {
				ctrl.LoggerFrom(ctx).Info("Could not subscribe to a replica; cold until it answers", "replica", peer, "error", err.Error())
			} else if err == nil && was {
				ctrl.LoggerFrom(ctx).Info("Subscribed to a replica again", "replica", peer)
			}
			failing[peer] = err != nil
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.o.RenewEvery):
		}
	}
}

// renew renews the subscription to every peer in the view, in parallel,
// and reports each outcome to done.
func (p *Peers) renew(ctx context.Context, done func(peer string, err error)) {
	view, _ := p.t.View()
	var wg sync.WaitGroup
	for _, peer := range view {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := p.t.Now()
			resp, err := p.subscribe(ctx, peer)
			if err == nil {
				p.t.Renewed(peer, sent, resp)
			}
			done(peer, err)
		}()
	}
	wg.Wait()
}

func (p *Peers) subscribe(ctx context.Context, peer string) (SubscribeResponse, error) {
	var resp SubscribeResponse
	body, _ := json.Marshal(subscribeRequest{Address: p.o.Self})
	err := p.call(ctx, peer, SubscribePath, body, func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, maxSubscribeResponse)).Decode(&resp)
	})
	if err == nil && len(resp.Recent) > DefaultMaxMarkers {
		err = fmt.Errorf("replay of %d announcements, over %d", len(resp.Recent), DefaultMaxMarkers)
	}
	return resp, err
}

// call POSTs body to peer's path and hands a 200 response to read.
func (p *Peers) call(ctx context.Context, peer, path string, body []byte, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// ?timeout= as the API server sends it: the other's deadlines on the
	// body and the answer (transport.ReviewTimeout) follow this call's.
	// The URL is built from its parts: peer is only ever the host.
	u := url.URL{Scheme: "https", Host: peer, Path: path, RawQuery: url.Values{"timeout": {callTimeout.String()}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ProtocolHeader, ProtocolVersion)
	res, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s%s answered %s: %s", peer, path, res.Status, bytes.TrimSpace(msg))
	}
	if read == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil
	}
	return read(res.Body)
}

// AnnounceLock is Announce of the create of l, when l protects something
// (webhook.Announcer: the webhook calls it before it allows the create).
func (p *Peers) AnnounceLock(ctx context.Context, l *lockv1alpha1.Lock) error {
	a, ok := AnnouncementOf(l)
	if !ok {
		return nil // No delete can depend on it.
	}
	return p.Announce(ctx, a)
}

// Announce admits a Lock create: it marks it, and tells every subscriber,
// in parallel. It returns an error, which refuses the create, when a peer
// in the view is not subscribed or a subscriber could not be told.
func (p *Peers) Announce(ctx context.Context, a Announcement) error {
	if err := a.validate(); err != nil {
		// The webhook refuses such a create before it announces it
		// (Lock.ValidateAdmitted): checked again where it is kept.
		return err
	}
	subs, err := p.t.Admit(a)
	if err != nil {
		p.refused.Inc()
		return err
	}
	body, _ := json.Marshal(a)
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.call(ctx, s, PendingPath, body, nil); err != nil {
				errs[i] = fmt.Errorf("lockguard could not tell replica %s about this Lock; retry: %w", s, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The marker and the replay keep the create until the sweep
		// clears it (TTL): a refusal proves nothing about who else holds
		// a create of that UID, since a review can be forged.
		p.refused.Inc()
		return err
	}
	return nil
}
