package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/hack/bench/measure"
)

// TestScaleSummary checks issue 38's rows of the Targets table against
// points whose figures are known: run AV's, as section 9 reported them.
func TestScaleSummary(t *testing.T) {
	point := func(locks, objects int, rss, live int64, ready time.Duration) *measure.ScalePoint {
		return &measure.ScalePoint{ScaleSize: measure.ScaleSize{Locks: locks, Objects: objects},
			Memory: &measure.MemoryPoint{RSS: rss, Live: live, Ready: ready}}
	}
	const mi = 1 << 20
	r := &report{scale: &measure.ScaleResult{Points: []*measure.ScalePoint{
		point(0, 0, 41*mi, 7_100_000, 91*time.Millisecond),
		point(100_000, 0, 243*mi, 78_100_000, 135*time.Millisecond),
		point(100_000, 1_000_000, 250*mi, 181_100_000, 163*time.Millisecond),
	}}}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	r.scaleSummary(w)
	got := b.String()
	for _, want := range []string{
		"| 9 | ≤ 256 Mi RSS with 100k Locks and 1M unlocked objects | 250.0 MiB once idle",
		"| 9 | ≤ 1 KiB of heap per Lock and target | 710 bytes of live heap per Lock and its Stack, 0 → 100000 Locks | met |",
		"| 9 | ≤ 150 bytes per unlocked object | 103 bytes of live heap per unlocked object, 0 → 1000000 objects | met |",
		"| 9 | ready ≤ 5 s at 100k Locks | 135ms at 100000 Locks and 0 objects; 163ms at 100000 Locks and 1000000 objects | met |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the scale targets lack %q; got:\n%s", want, got)
		}
	}
	// Over the limit, and sizes that stop short of the target's.
	r.scale.Points[2].Memory.RSS = 257 * mi
	b.Reset()
	r.scaleSummary(w)
	if !strings.Contains(b.String(), "257.0 MiB once idle") || !strings.Contains(strings.SplitN(b.String(), "\n", 2)[0], "**missed**") {
		t.Errorf("an RSS over 256 Mi is not missed:\n%s", b.String())
	}
	r.scale.Points = r.scale.Points[:1]
	b.Reset()
	r.scaleSummary(w)
	if n := strings.Count(b.String(), "not measured"); n != 4 {
		t.Errorf("%d of 4 targets say the run did not reach them:\n%s", n, b.String())
	}
}
