//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// What a run must have exercised to prove anything, and the fault phase
// that lasts until it has.
//
// A run's workload is random and its faults take the system away for
// seconds at a time: on a loaded machine (CI's 2 cores at a load of 12) a
// 90-second run can end before some thin kind (a ClusterLock's namespace
// delete, an owner delete onto a locked child) was ever sent while locked.
// Such a run has not failed to be safe; it has failed to prove it. So the
// faults go on past the duration asked for while some coverage is
// missing, by at most half that duration, with the same mix of faults and
// clients; only then does a gap fail the run.

// coverageGaps returns what the run has not yet exercised, one line each:
// too few delete attempts for a run of duration, a delete kind never
// denied on a locked object (an owner delete: never sent onto a locked
// child), no update of a frozen object denied, no delete through a
// break-glass exception, no Lock expired while held or none in Audit.
func coverageGaps(n *counts, duration time.Duration) []string {
	var gaps []string
	if minAttempts := int64(duration.Seconds() * 5); n.attempts() < minAttempts {
		gaps = append(gaps, fmt.Sprintf("only %d delete attempts in %s of faults, want at least %d: the run proves little", n.attempts(), duration, minAttempts))
	}
	// The update kinds count together: in 90 s under faults one of them
	// can get a single update of an object read in force (a dry-run spec
	// update got 1 of 9 in a run whose kube-apiserver was down 27 s), so
	// the floor is a denied update of a frozen object of any of them.
	var updatesDenied, updatesLocked int64
	for k := range numKinds {
		c := &n.byKind[k]
		if kinds[k].update {
			updatesDenied += c.denied.Load()
			updatesLocked += c.locked.Load()
			continue
		}
		if kinds[k].owner && c.locked.Load() == 0 || !kinds[k].owner && c.denied.Load() == 0 {
			gaps = append(gaps, fmt.Sprintf("no %s of a locked object was denied (%d sent, %d on a locked object): the run proves nothing about that kind", k, c.sent.Load(), c.locked.Load()))
		}
	}
	if updatesDenied == 0 {
		gaps = append(gaps, fmt.Sprintf("no update of an object a ReadOnly Lock froze was denied (%d such updates): the run proves nothing about ReadOnly", updatesLocked))
	}
	if n.exceptionUsed.Load() == 0 {
		gaps = append(gaps, fmt.Sprintf("no delete went through a break-glass exception (%d created): the run proves nothing about them", n.exceptions.Load()))
	}
	if n.expiredLocks.Load() == 0 || n.auditLocks.Load() == 0 {
		gaps = append(gaps, fmt.Sprintf("no Lock expired while the client held it (%d created with an expiry), or none was in Audit (%d): the run proves nothing about them", n.expiringLocks.Load(), n.auditLocks.Load()))
	}
	return gaps
}

// coveragePoll is how often the extended fault phase looks at the
// coverage.
const coveragePoll = time.Second

// extension is how long the faults went on past the duration asked for,
// and what was missing when it was up.
type extension struct {
	over    time.Duration
	missing []string
}

// faultsUntilCovered injects faults for duration and then, while
// coverageGaps names something, for up to duration/2 more. It returns how
// long past duration the faults went on (zero when nothing was missing)
// and what was missing at duration.
func (h *harness) faultsUntilCovered(ctx context.Context, n *counts, duration time.Duration) extension {
	faultCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.faults(faultCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	began := time.Now()
	select {
	case <-ctx.Done():
		return extension{}
	case <-time.After(duration):
	}
	limit := duration / 2
	var missing []string
	for {
		gaps := coverageGaps(n, duration)
		over := time.Since(began) - duration
		if len(gaps) == 0 || over >= limit || ctx.Err() != nil {
			if missing == nil {
				return extension{}
			}
			h.logf("coverage: the faults went on %s past %s; still not exercised: %d", over.Round(100*time.Millisecond), duration, len(gaps))
			return extension{over: over, missing: missing}
		}
		if missing == nil {
			missing = gaps
			h.logf("coverage: after %s of faults, not yet exercised (the faults go on, up to %s more): %s", duration, limit, strings.Join(gaps, "; "))
		}
		select {
		case <-ctx.Done():
		case <-time.After(coveragePoll):
		}
	}
}

// text is the summary's note of the extension, if any: how long, and
// what was missing when the duration was up.
func (e extension) text() string {
	if e.missing == nil {
		return ""
	}
	return fmt.Sprintf(" and %s more while some exercise was missing (coverage_test.go; at the duration: %s)", e.over.Round(time.Second), strings.Join(e.missing, "; "))
}
