package main

import (
	"fmt"
	"strings"

	"github.com/navique/lockguard/hack/bench/measure"
)

// chartMemoryLimit is the chart's default memory limit, drawn on the plot.
const chartMemoryLimit = 256 << 20

// scaleSVG plots the scale section's RSS and heap in use against the
// objects of the group in the cluster (Locks, their Stacks and the
// unlocked Stacks), with the chart's default memory limit.
func scaleSVG(s *measure.ScaleResult) string {
	const w, h, left, right, top, bottom = 720, 420, 70, 30, 40, 60
	objects := func(p *measure.ScalePoint) float64 { return float64(2*p.Locks + p.Objects) }
	var xMax, yMax float64 = 1, chartMemoryLimit * 1.1
	for _, p := range s.Points {
		xMax = max(xMax, objects(p))
		yMax = max(yMax, float64(p.Memory.RSS)*1.1)
	}
	x := func(v float64) float64 { return left + v/xMax*(w-left-right) }
	y := func(v float64) float64 { return h - bottom - v/yMax*(h-top-bottom) }
	var b strings.Builder
	f := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	f(`<text x="%d" y="20" font-size="14">lockguard's memory against the core.navique.com objects in the cluster (issue 38)</text>`+"\n", left)
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, h-bottom, w-right, h-bottom)
	f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, h-bottom)
	for i := 0; i <= 5; i++ {
		xv, yv := xMax*float64(i)/5, yMax*float64(i)/5
		f(`<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", x(xv), h-bottom+16, count(xv))
		f(`<text x="%d" y="%.0f" text-anchor="end">%.0f MiB</text>`+"\n", left-6, y(yv)+4, yv/(1<<20))
		f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left+1, y(yv), w-right, y(yv))
	}
	f(`<text x="%d" y="%d" text-anchor="middle">objects (Locks + the Stacks they cover + unlocked Stacks)</text>`+"\n", (left+w-right)/2, h-bottom+40)
	f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="red" stroke-dasharray="6,4"/>`+"\n", left, y(chartMemoryLimit), w-right, y(chartMemoryLimit))
	f(`<text x="%d" y="%.0f" fill="red" text-anchor="end">chart's default memory limit, 256 MiB</text>`+"\n", w-right-4, y(chartMemoryLimit)-5)
	for _, series := range []struct {
		name, color string
		v           func(*measure.ScalePoint) int64
	}{
		{"RSS", "#1f77b4", func(p *measure.ScalePoint) int64 { return p.Memory.RSS }},
		{"heap in use", "#2ca02c", func(p *measure.ScalePoint) int64 { return p.Memory.HeapInuse }},
	} {
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(objects(p)), y(float64(series.v(p)))))
		}
		f(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", series.color, strings.Join(pts, " "))
		for i, p := range s.Points {
			f(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %d Locks, %d unlocked objects: %.1f MiB</title></circle>`+"\n",
				x(objects(p)), y(float64(series.v(p))), series.color, series.name, p.Locks, p.Objects, float64(series.v(p))/(1<<20))
			if series.name == "RSS" && i > 0 {
				f(`<text x="%.1f" y="%.1f" text-anchor="end" font-size="10">%s Locks, %s unlocked</text>`+"\n", x(objects(p))-6, y(float64(series.v(p)))-6, count(float64(p.Locks)), count(float64(p.Objects)))
			}
		}
	}
	f(`<rect x="%d" y="%d" width="12" height="4" fill="#1f77b4"/><text x="%d" y="%d">RSS</text>`+"\n", left+10, top+6, left+28, top+12)
	f(`<rect x="%d" y="%d" width="12" height="4" fill="#2ca02c"/><text x="%d" y="%d">heap in use</text>`+"\n", left+10, top+22, left+28, top+28)
	f("</svg>\n")
	return b.String()
}

// count formats n with k or M.
func count(n float64) string {
	switch {
	case n >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", n/1e6), ".0") + "M"
	case n >= 1e3:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", n/1e3), ".0") + "k"
	}
	return fmt.Sprintf("%.0f", n)
}
