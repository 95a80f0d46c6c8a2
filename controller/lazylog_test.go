package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
)

// countingSink counts the WithValues and WithName calls of its sink.
type countingSink struct {
	logr.LogSink
	with *int
}

func (s countingSink) WithValues(kv ...any) logr.LogSink {
	*s.with++
	return countingSink{s.LogSink.WithValues(kv...), s.with}
}

func (s countingSink) WithName(name string) logr.LogSink {
	*s.with++
	return countingSink{s.LogSink.WithName(name), s.with}
}

func (s countingSink) WithCallDepth(depth int) logr.LogSink {
	return countingSink{s.LogSink.(logr.CallDepthLogSink).WithCallDepth(depth), s.with}
}

// TestDeferValues: a logger of deferValues writes the lines the logger it
// wraps writes, names, values, verbosity and caller included, and hands
// its sink the names and values only for a line written.
func TestDeferValues(t *testing.T) {
	var lines []string
	newLog := func() logr.Logger {
		return funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{LogCaller: funcr.All, Verbosity: 1}).WithValues("controller", "lock")
	}
	write := func(log logr.Logger) {
		log = log.WithName("pass").WithValues("namespace", "forge").V(1).WithValues("reconcileID", "x")
		log.Info("one", "k", 1)
		log.V(1).Info("dropped")
		log.Error(errors.New("boom"), "two")
	}
	write(newLog())
	want := lines
	lines = nil
	write(deferValues(newLog()))
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-direct +deferred):\n%s", diff)
	}
	if len(lines) != 2 {
		t.Errorf("%d lines written, want 2", len(lines))
	}

	with := 0
	log := deferValues(logr.New(countingSink{newLog().GetSink(), &with}))
	lines = nil
	for range 10 {
		log.WithValues("reconcileID", "x").WithName("n").V(2).Info("never")
	}
	if with != 0 || len(lines) != 0 {
		t.Errorf("10 passes that wrote nothing: %d calls of the sink's WithValues or WithName, %d lines", with, len(lines))
	}
	log.WithValues("reconcileID", "x").Info("once")
	if len(lines) != 1 || !strings.Contains(lines[0], `"reconcileID"="x"`) || !strings.Contains(lines[0], `"controller"="lock"`) {
		t.Errorf("the line written: %q", lines)
	}
}
