package transport

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// BenchmarkReadBody compares readBody (pooled buffers that double as bytes
// arrive) with what it replaced, one buffer of the declared length filled
// by io.ReadFull, side by side in ~1 ms batches, so that a noisy machine
// slows both alike. It reports the time of each (ns/read-pooled,
// ns/read-declared) and the median of the per-round ratios
// (ratio-pooled/declared); the ns/op of the benchmark itself is
// meaningless.
func BenchmarkReadBody(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			data := bytes.Repeat([]byte("x"), size)
			budget := &byteBudget{max: 1 << 30}
			rd := bytes.NewReader(nil)
			batch := max(1, 64<<10/size)
			var pooled, declared time.Duration
			var ratios []float64
			for b.Loop() {
				start := time.Now()
				for range batch {
					rd.Reset(data)
					body, err := readBody(rd, int64(size), MaxReviewSize, budget, nil)
					if err != nil {
						b.Fatal(err)
					}
					body.Release()
				}
				p := time.Since(start)
				start = time.Now()
				for range batch {
					rd.Reset(data)
					buf := make([]byte, size)
					if _, err := io.ReadFull(rd, buf); err != nil {
						b.Fatal(err)
					}
				}
				d := time.Since(start)
				pooled += p
				declared += d
				ratios = append(ratios, float64(p)/float64(d))
			}
			n := float64(len(ratios) * batch)
			b.ReportMetric(float64(pooled.Nanoseconds())/n, "ns/read-pooled")
			b.ReportMetric(float64(declared.Nanoseconds())/n, "ns/read-declared")
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "ratio-pooled/declared")
		})
	}
}
