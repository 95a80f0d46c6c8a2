package peers

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Subscribe records a subscription from addr and returns the answer: the
// recent admissions when it was not live. It fails when addr is not a
// replica in the view (or the view is not known yet), and when
// MaxSubscribers others hold live subscriptions.
func (t *Tracker) Subscribe(addr string) (SubscribeResponse, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	if !slices.Contains(t.view, addr) {
		return SubscribeResponse{}, fmt.Errorf("%s is not a lockguard replica that this one knows of (yet)", addr)
	}
	t.pruneLocked(now)
	_, live := t.subscribers[addr]
	if !live && len(t.subscribers) >= t.cfg.MaxSubscribers {
		return SubscribeResponse{}, fmt.Errorf("this replica holds %d subscriptions already", len(t.subscribers))
	}
	t.subscribers[addr] = now.Add(t.cfg.Lease)
	resp := SubscribeResponse{New: !live, Complete: true}
	if !live {
		resp.Complete = !now.Before(t.replayIncomplete)
		for _, r := range t.recent {
			resp.Recent = append(resp.Recent, r.a)
		}
	}
	return resp, nil
}

// pruneLocked forgets expired subscriptions and admissions older than TTL.
func (t *Tracker) pruneLocked(now time.Time) {
	for a, until := range t.subscribers {
		if !now.Before(until) {
			delete(t.subscribers, a)
		}
	}
	i := 0
	for i < len(t.recent) && t.recent[i].at.Before(now.Add(-t.cfg.TTL)) {
		i++
	}
	t.recent = t.recent[i:]
}

// ErrNotSubscribed is wrapped by Admit's error when a peer in the view
// holds no live subscription.
var ErrNotSubscribed = errors.New("has not subscribed to this replica")

// Admit prepares the admission of a's create: it fails when a peer in the
// view holds no live subscription (it could not be told); otherwise it
// marks a, keeps it for replay and returns the subscribers to tell. A
// subscription made after Admit returns is answered with a replay that
// holds a.
func (t *Tracker) Admit(a Announcement) ([]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	t.pruneLocked(now)
	if err := t.admittingLocked(now); err != nil {
		return nil, err
	}
	for _, p := range t.view {
		if _, ok := t.subscribers[p]; !ok {
			return nil, fmt.Errorf("replica %s %w", p, ErrNotSubscribed)
		}
	}
	t.markLocked(a, now)
	if len(t.recent) >= t.cfg.MaxMarkers {
		// The oldest drops out of the replay: a replica that subscribes
		// within TTL of now must not trust the replay.
		t.recent = t.recent[1:]
		t.replayIncomplete = now.Add(t.cfg.TTL)
	}
	t.recent = append(t.recent, admitted{a: a, at: now})
	subs := make([]string, 0, len(t.subscribers))
	for s := range t.subscribers {
		subs = append(subs, s)
	}
	slices.Sort(subs)
	return subs, nil
}

// SubscribeResponse is a replica's answer to a subscription.
type SubscribeResponse struct {
	// New is true when the subscription was not live: Recent then holds
	// the creates admitted in the last TTL.
	New bool `json:"new"`
	// Complete is false when Recent may miss some (over the bound).
	Complete bool           `json:"complete"`
	Recent   []Announcement `json:"recent,omitempty"`
}

// Admitting returns why this replica cannot admit Lock creates on its own
// account (Admit also needs every peer subscribed): it does not know its
// peers yet, or its identity Lease is not fresh; nil once it can.
func (t *Tracker) Admitting() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.admittingLocked(t.cfg.Now())
}

// admittingLocked is Admitting at now.
func (t *Tracker) admittingLocked(now time.Time) error {
	if !t.viewKnown {
		return errors.New("this replica does not know its peers yet")
	}
	if !t.selfFreshLocked(now) {
		return errors.New("this replica's identity Lease is not fresh: the others may not count it as a replica")
	}
	return nil
}

// Renewed records a successful subscription to peer, renewed by a request
// sent at sent: the replay is marked, and the subscription trusted until
// sent+Trust. A subscription that was not trusted until then, or that the
// peer answered as new (it restarted, or dropped us), breaks the chain.
func (t *Tracker) Renewed(peer string, sent time.Time, resp SubscribeResponse) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	if !slices.Contains(t.view, peer) {
		return
	}
	for _, a := range resp.Recent {
		if a.validate() == nil {
			t.markLocked(a, now)
		}
	}
	if resp.New && !resp.Complete {
		t.lostLocked(now)
	}
	if prev := t.trusted[peer]; resp.New || prev.Before(sent) {
		t.breakLocked(now)
	}
	if until := sent.Add(t.cfg.Trust); until.After(t.trusted[peer]) {
		t.trusted[peer] = until
	}
}
