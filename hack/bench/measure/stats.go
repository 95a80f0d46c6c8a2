package measure

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// Latencies collects durations; it is safe for concurrent use.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Merge adds every duration of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	d := slices.Clone(o.d)
	o.mu.Unlock()
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// Len is the number of durations.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Quantile returns the q-quantile (0 <= q <= 1), nearest rank; 0 when
// empty.
func (l *Latencies) Quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	i := int(q*float64(len(l.d))+0.5) - 1
	return l.d[min(max(i, 0), len(l.d)-1)]
}

// Summary is "n=…, p50=…, p90=…, p99=…, max=…".
func (l *Latencies) Summary() string {
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", l.Len(),
		ms(l.Quantile(0.5)), ms(l.Quantile(0.9)), ms(l.Quantile(0.99)), ms(l.Quantile(1)))
}

// ms formats d in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// Ms formats d in milliseconds with two decimals.
func Ms(d time.Duration) string { return ms(d) }

// median returns the median of xs (which it sorts); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}
