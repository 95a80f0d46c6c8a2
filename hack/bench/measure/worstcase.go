package measure

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// The worst case's load: what a client that reaches the webhook port
// without credentials can make lockguard hold at the transport's bounds
// (docs/hostile-clients.md): WorstBodies bodies of WorstBodyLength bytes
// less one, each sent whole but its last byte, more than the byte budget
// (64 MiB) holds; and WorstHeaders connections, each sending a header as
// long as the server reads and stalling, more than the connection limit
// (1,024) holds. Each is opened again, after WorstPause, once lockguard
// closes it.
const (
	WorstBodies      = 80
	WorstBodyLength  = transport.MaxReviewSize
	WorstHeaders     = 1100
	WorstHeaderBytes = transport.DefaultMaxHeaderBytes
	WorstPause       = time.Second
)

// WorstCase is lockguard at one size under a container's memory limit,
// its transport held at its bounds by a hostile load from the moment it
// is ready until its first pass over every object is over: the start's
// peak and the transport's at once.
type WorstCase struct {
	ScaleSize
	// Limit is the container's memory limit; Cgroup the cgroup that
	// enforced it, or why none did (the process then ran without one).
	Limit  int64
	Cgroup string
	// Ready is the time to /readyz; Held how long the load held after;
	// FirstPass when, after ready, the first pass over every object was
	// over under the load (firstPassOver; 0: not within Held).
	Ready, Held, FirstPass time.Duration
	// Peak is the largest usage the cgroup was charged (0 without one);
	// PeakAnon the largest anonymous RSS, every 250 ms; OOMKills the
	// processes the kernel killed at the limit.
	Peak, PeakAnon, OOMKills int64
	// AtPeak is the cgroup's largest usage sampled (every 100 ms) and
	// what of it was anonymous, files' pages and the kernel's.
	AtPeak charged
	// Exited is the process's end when it did not run to the end.
	Exited error
	// Refused and Closed are lockguard's refusals and connections closed
	// by reason during the load (nil: not read, the process was gone);
	// Bodies and Headers what the load sent.
	Refused, Closed map[string]float64
	Bodies, Headers int64
	// Passes are the Lock controller's passes by result at the load's
	// end, Queued its queue then (Passes nil: not read).
	Passes map[string]float64
	Queued float64
	// Denied, Allowed and Failed count the dry-run DELETEs sent every
	// two seconds during the load: a locked Stack's denied and an
	// unlocked one's allowed (right), and those that failed otherwise
	// (the webhook not answered: refused, fail closed). Wrong counts a
	// locked Stack's delete allowed: never right.
	Denied, Allowed, Failed, Wrong int
}

// worstCase runs binary again at p's size in a memory cgroup of limit
// bytes (the chart's default), with the hostile load from ready until
// hold has passed (the first run's time to idle, and some) and its first
// pass over every object is over (firstPassOver), for at most
// WorstMaxHold(hold), and p's DELETE probes (over namespaces namespaces)
// every two seconds meanwhile. The load slows the start: a run held for
// the first run's time alone ended at a million objects before the
// Stacks' cache had synced (2026-12-07 14:02), the caches short of their
// size.
func (c *Cluster) worstCase(ctx context.Context, binary string, p *ScalePoint, namespaces int, limit int64, hold time.Duration, args []string) (*WorstCase, error) {
	w := &WorstCase{ScaleSize: p.ScaleSize, Limit: limit}
	cg, err := newMemCgroup(fmt.Sprintf("lockguard-bench-%d", time.Now().UnixNano()), limit)
	if err != nil {
		w.Cgroup = err.Error()
	} else {
		w.Cgroup = cg.kind()
		defer cg.remove()
	}
	lg, err := c.StartLockguard(binary, args...)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			lg.Stop()
		}
	}()
	if cg != nil {
		// Moved at once: the runtime's first megabytes stay charged to
		// the benchmark (cgroup v1 moves no charge).
		if err := cg.add(lg.Pid()); err != nil {
			return nil, fmt.Errorf("moving lockguard into its memory cgroup: %w", err)
		}
	}
	peakAnon := lg.watchAnon(250 * time.Millisecond)
	atPeak := func() charged { return charged{} }
	if cg != nil {
		atPeak = cg.watch(100 * time.Millisecond)
	}
	readyCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if w.Ready, err = lg.WaitReady(readyCtx); err != nil {
		return nil, err
	}
	before, _ := lg.Metrics()
	load := startHostileLoad(lg.Webhook.Address())
	start := time.Now()
	probes := p.probeTargets(namespaces)
	for lg.ExitError() == nil {
		if held := time.Since(start); held >= hold && w.FirstPass > 0 || held >= WorstMaxHold(hold) {
			break
		}
		for _, pr := range probes {
			err := c.Client.Delete(ctx, Stack(pr.ns, pr.name, 0), client.DryRunAll)
			switch {
			case pr.deny && apierrors.IsForbidden(err):
				w.Denied++
			case !pr.deny && err == nil:
				w.Allowed++
			case pr.deny && err == nil:
				w.Wrong++
			default:
				w.Failed++
			}
		}
		if w.FirstPass == 0 {
			if m, err := lg.Metrics(); err == nil && firstPassOver(m, p.Locks) {
				w.FirstPass = time.Since(start)
			}
		}
		time.Sleep(2 * time.Second)
	}
	w.Held = time.Since(start)
	after, err := lg.Metrics()
	w.Bodies, w.Headers = load.stop()
	if err == nil {
		w.Refused, w.Closed = counterDeltas(before, after, "lockguard_webhook_requests_refused_total"), counterDeltas(before, after, "lockguard_webhook_connections_closed_total")
		w.Passes, w.Queued = lockPasses(after)
	}
	w.Exited = lg.ExitError()
	stopped = true
	lg.Stop()
	w.PeakAnon, w.AtPeak = peakAnon(), atPeak()
	if cg != nil {
		if w.Peak, err = cg.peak(); err != nil {
			return nil, err
		}
		if w.OOMKills, err = cg.oomKills(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// WorstHold is how long the worst case's load holds at least at p: the
// first run's time to ready and idle, and 30 s.
func WorstHold(p *ScalePoint) time.Duration {
	return p.Memory.Ready + p.Memory.Settled + 30*time.Second
}

// WorstMaxHold is how long the worst case's load holds at most, when
// the first pass is not over: three times hold, and a minute. Twice was
// too short at a million objects: under the load the first pass was not
// over after 11m46s-13m55s in three runs of 2026-12-07 (01a23d5,
// 964f144, 90d73ab; docs/history/scale-runs.md), where idle took 5-6 min.
func WorstMaxHold(hold time.Duration) time.Duration { return 3*hold + time.Minute }

// firstPassOver reports, from lockguard's metrics m, whether its first
// pass over every object is over: its Lock controller has reconciled
// with success at least locks times (a pass that waits for its kind's
// cache to sync requeues instead) and its queue is empty.
func firstPassOver(m map[string]float64, locks int) bool {
	passes, queued := lockPasses(m)
	return passes["success"] >= float64(locks) && queued == 0
}

// lockPasses returns, from lockguard's metrics m, its Lock controller's
// passes by result and the items in its queue.
func lockPasses(m map[string]float64) (map[string]float64, float64) {
	passes, queued := map[string]float64{}, 0.0
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, "controller_runtime_reconcile_total{") && strings.Contains(k, `controller="lock"`):
			if _, rest, ok := strings.Cut(k, `result="`); ok {
				result, _, _ := strings.Cut(rest, `"`)
				passes[result] += v
			}
		case strings.HasPrefix(k, "workqueue_depth{") && strings.Contains(k, `name="lock"`):
			queued += v
		}
	}
	return passes, queued
}

// counterDeltas returns, by reason, how much each series of name grew
// from before to after.
func counterDeltas(before, after map[string]float64, name string) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if rest, ok := strings.CutPrefix(k, name+`{reason="`); ok {
			if v -= before[k]; v > 0 {
				d[strings.TrimSuffix(rest, `"}`)] = v
			}
		}
	}
	return d
}

// hostileLoad holds the webhook port at its bounds (WorstBodies,
// WorstHeaders) until stop.
type hostileLoad struct {
	ctx             context.Context
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	bodies, headers atomic.Int64
}

// startHostileLoad starts the load on addr, from loopback addresses the
// API server does not use: the bodies from 127.0.0.5, the headers from
// 127.0.0.3 and 127.0.0.4.
func startHostileLoad(addr string) *hostileLoad {
	l := &hostileLoad{}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	body := "POST " + webhook.Path + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(WorstBodyLength) + "\r\n\r\n" + strings.Repeat("x", WorstBodyLength-1)
	header := "POST " + webhook.Path + " HTTP/1.1\r\nHost: lockguard\r\nX-Pad: " + strings.Repeat("a", WorstHeaderBytes)
	for i := range WorstBodies + WorstHeaders {
		from, send, count := "127.0.0.5", body, &l.bodies
		if i >= WorstBodies {
			from, send, count = "127.0.0."+strconv.Itoa(3+i%2), header, &l.headers
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for l.ctx.Err() == nil {
				l.hold(addr, from, send, count)
				select {
				case <-l.ctx.Done():
				case <-time.After(WorstPause):
				}
			}
		}()
	}
	return l
}

// hold opens a connection from from, sends what, counting it, and waits
// until lockguard closes it or the load stops.
func (l *hostileLoad) hold(addr, from, what string, count *atomic.Int64) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}},
		Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}}
	conn, err := d.DialContext(l.ctx, "tcp", addr)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(l.ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := io.WriteString(conn, what); err == nil {
		count.Add(1)
	}
	_, _ = io.Copy(io.Discard, conn)
}

// stop ends the load and returns the bodies and headers it sent.
func (l *hostileLoad) stop() (bodies, headers int64) {
	l.cancel()
	l.wg.Wait()
	return l.bodies.Load(), l.headers.Load()
}
