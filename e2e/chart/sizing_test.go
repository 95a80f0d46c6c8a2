package chart_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/transport"
)

// sizingFigures are the memory formula's figures (docs/limits.md, Memory),
// as the chart's lockguard.sizingFigures names them.
type sizingFigures struct {
	IdleMiB         int64 `json:"idleMiB"`
	BodyFloorMiB    int64 `json:"bodyFloorMiB"`
	ConnectionFloor int64 `json:"connectionFloor"`
	ConnectionKiB   int64 `json:"connectionKiB"`
	LockBytes       int64 `json:"lockBytes"`
	ObjectBytes     int64 `json:"objectBytes"`
}

// floor is F, the transport's floor with the chart's default transport
// (64Mi and 1024 connections, over both floors).
func (f sizingFigures) floor() int64 {
	return f.BodyFloorMiB<<20 + f.ConnectionFloor*f.ConnectionKiB<<10
}

// limitsFigures reads the figures from the table of docs/limits.md's
// Memory section: the first number of the value column of the rows R0
// and B0 (MiB), N0 (connections), C (KiB), L and O (bytes).
func limitsFigures(t *testing.T) sizingFigures {
	t.Helper()
	doc := readRepo(t, "docs/limits.md")
	_, memory, ok := strings.Cut(doc, "\n## Memory\n")
	if !ok {
		t.Fatal("docs/limits.md has no Memory section")
	}
	memory, _, _ = strings.Cut(memory, "\n## ")
	row := func(term, unit string) int64 {
		re := regexp.MustCompile(`(?m)^\| ` + term + `, [^|]*\| ([0-9][0-9,]*) ` + unit + ` `)
		m := re.FindStringSubmatch(memory)
		if m == nil {
			t.Fatalf("docs/limits.md, Memory: no table row %q whose value starts with a number of %s", term, unit)
		}
		n, err := strconv.ParseInt(strings.ReplaceAll(m[1], ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return sizingFigures{IdleMiB: row("R0", "MiB"), BodyFloorMiB: row("B0", "MiB"), ConnectionFloor: row("N0", "connections"),
		ConnectionKiB: row("C", "KiB"), LockBytes: row("L", "bytes"), ObjectBytes: row("O", "bytes")}
}

// readRepo reads a file of the repository.
func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestChartSizingFigures checks that the chart's memory check computes
// with the figures docs/limits.md states: the chart holds them in one
// place, templates/_sizing.tpl's lockguard.sizingFigures; and that its
// floors and connection cost are the transport's.
func TestChartSizingFigures(t *testing.T) {
	tpl := readRepo(t, "deploy/chart/lockguard/templates/_sizing.tpl")
	m := regexp.MustCompile(`(?s)\{\{- define "lockguard.sizingFigures" -\}\}\n(.*?)\n\{\{- end \}\}`).FindStringSubmatch(tpl)
	if m == nil {
		t.Fatal(`templates/_sizing.tpl defines no "lockguard.sizingFigures"`)
	}
	var chart sizingFigures
	if err := yaml.UnmarshalStrict([]byte(m[1]), &chart); err != nil {
		t.Fatalf("lockguard.sizingFigures: %v", err)
	}
	if doc := limitsFigures(t); chart != doc {
		t.Errorf("the chart's figures %+v; docs/limits.md (Memory) states %+v", chart, doc)
	}
	if chart.BodyFloorMiB<<20 != transport.DefaultBodyFloor || chart.ConnectionFloor != transport.DefaultConnectionFloor || chart.ConnectionKiB<<10 != transport.ConnectionCost {
		t.Errorf("the chart's floors and connection cost %d MiB, %d connections, %d KiB; internal/transport's %d MiB, %d, %d KiB",
			chart.BodyFloorMiB, chart.ConnectionFloor, chart.ConnectionKiB, transport.DefaultBodyFloor>>20, transport.DefaultConnectionFloor, transport.ConnectionCost>>10)
	}
}

// notes renders the chart's NOTES.txt with the values set.
func notes(t *testing.T, set ...string) string {
	t.Helper()
	requireHelm(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	text, err := framework.Notes(ctx, framework.Release{KubeVersion: "1.37.2", Set: set})
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// mib writes bytes as the chart's NOTES do.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// TestSizingWarning checks the chart's memory check (docs/limits.md,
// Memory): NOTES.txt warns, naming the values, the limits.memory the
// formula requires and the limit, when the expected Locks and objects do
// not fit resources.limits.memory, and says nothing when they do or are
// unknown.
func TestSizingWarning(t *testing.T) {
	f := limitsFigures(t)
	needed := func(locks, objects int64) int64 {
		return f.IdleMiB<<20 + f.floor() + locks*f.LockBytes + objects*f.ObjectBytes
	}
	const limit = 256 << 20 // the chart's default
	goMemLimit := int64(limit) * 9 / 10
	// The most Locks that fit the default limit, and one more.
	most := (goMemLimit - needed(0, 0)) / f.LockBytes
	if most < 1 {
		t.Fatalf("the default limit holds no Lock by docs/limits.md's figures %+v", f)
	}
	for _, tc := range []struct {
		name           string
		locks, objects int64
		limit          string
		warn           bool
	}{
		{"unknown", 0, 0, "", false},
		{"fits", most, 0, "", false},
		{"one Lock too many", most + 1, 0, "", true},
		{"100k Locks and 1M objects", 100000, 1000000, "", true},
		{"100k Locks and 1M objects in 8Gi", 100000, 1000000, "8Gi", false},
		{"no limit", 100000, 1000000, "null", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := []string{fmt.Sprintf("sizing.locks=%d", tc.locks), fmt.Sprintf("sizing.objects=%d", tc.objects)}
			if tc.limit != "" {
				set = append(set, "resources.limits.memory="+tc.limit)
			}
			text := notes(t, set...)
			if !tc.warn {
				if strings.Contains(text, "WARNING") {
					t.Errorf("NOTES warn:\n%s", text)
				}
				return
			}
			n := needed(tc.locks, tc.objects)
			required := (n*10 + 8) / 9
			for _, want := range []string{
				"WARNING: resources.limits.memory 256Mi cannot hold",
				fmt.Sprintf("sizing.locks=%d and sizing.objects=%d", tc.locks, tc.objects),
				"requires limits.memory of at least " + mib(required),
				fmt.Sprintf("(%s under GOMEMLIMIT, which is %s with this limit)", mib(n), mib(goMemLimit)),
				"docs/limits.md (Memory)",
			} {
				if !strings.Contains(strings.Join(strings.Fields(text), " "), want) {
					t.Errorf("NOTES do not say %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestSizingTransportFails checks that the render fails when lockguard
// idle and the webhook's transport at its floor (R0 + F) exceed
// GOMEMLIMIT, which no count of Locks fits, unless no memory limit is
// set; and that the chart passes webhook.maxBufferedBytes and
// webhook.maxConnections to the binary.
func TestSizingTransportFails(t *testing.T) {
	requireHelm(t)
	f := limitsFigures(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 32Mi: GOMEMLIMIT 28.8 MiB, under R0 and the floor.
	floor := f.IdleMiB<<20 + f.floor()
	goMemLimit := int64(32<<20) * 9 / 10
	if floor <= goMemLimit {
		t.Fatalf("R0 and the transport's floor (%s) fit a 32Mi limit by docs/limits.md's figures: pick another case", mib(floor))
	}
	_, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{"resources.limits.memory=32Mi"}})
	want := fmt.Sprintf("lockguard idle (%d MiB) and the webhook's transport at its floor (%s: the bodies' floor of %d MiB or webhook.maxBufferedBytes when less, and %d connections × %d KiB) hold %s, more than GOMEMLIMIT %s (90%% of resources.limits.memory 32Mi)",
		f.IdleMiB, mib(f.floor()), f.BodyFloorMiB, f.ConnectionFloor, f.ConnectionKiB, mib(floor), mib(goMemLimit))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("render with a 32Mi limit: %v; want an error containing %q", err, want)
	}
	// The smallest whole Mi limit whose GOMEMLIMIT holds them renders.
	fits := (floor*10 + 9*(1<<20) - 1) / (9 << 20)
	if _, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{fmt.Sprintf("resources.limits.memory=%dMi", fits)}}); err != nil {
		t.Errorf("render with a %dMi limit: %v; want none", fits, err)
	}
	if _, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{fmt.Sprintf("resources.limits.memory=%dMi", fits-1)}}); err == nil {
		t.Errorf("render with a %dMi limit: no error; want the floor's", fits-1)
	}
	// The transport's bounds no longer fail the render: beyond its floor
	// it holds only what the caches leave (128Mi failed before).
	if _, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{"resources.limits.memory=128Mi"}}); err != nil {
		t.Errorf("render with a 128Mi limit and the default transport: %v; want none", err)
	}
	for _, tc := range []struct {
		set         []string
		conns, body string
	}{
		{[]string{"resources.limits.memory=128Mi", "webhook.maxBufferedBytes=16Mi", "webhook.maxConnections=256"}, "256", "16777216"},
		{[]string{"resources.limits=null", "webhook.maxBufferedBytes=1Gi"}, "1024", "1073741824"},
	} {
		d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{Set: tc.set}), "Deployment", "lockguard"))
		args := d.Spec.Template.Spec.Containers[0].Args
		for _, want := range []string{"--webhook-max-connections=" + tc.conns, "--webhook-max-buffered-bytes=" + tc.body} {
			if !slices.Contains(args, want) {
				t.Errorf("%v: args %v; want %s", tc.set, args, want)
			}
		}
	}
}
