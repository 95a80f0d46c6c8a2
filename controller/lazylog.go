package controller

import (
	"slices"

	"github.com/go-logr/logr"
)

// deferValues returns log with the same sink, names, values and
// verbosity, except that the names and values added to it from then on
// (WithName, WithValues) reach its sink only when a line is written.
//
// controller-runtime makes a logger for every pass (the LogConstructor,
// then WithValues of its reconcileID), and zap copies its encoder, with a
// buffer of 1 KiB, for each WithValues: two or three per pass, most of
// which never writes a line. Issue 38: at start, a pass for each of the
// ~150,000 Locks and targets at 100,000 Locks; zap's buffers were 9.5 to
// 17 MB of the start's heap in the scale runs' live profiles (runs AC,
// AF).
func deferValues(log logr.Logger) logr.Logger {
	if log.GetSink() == nil {
		return log
	}
	return logr.New(&deferredSink{sink: log.GetSink()}).V(log.GetV())
}

// deferredSink is a logr.LogSink that keeps the names and values added to
// it and hands them to sink when it writes a line (deferValues).
type deferredSink struct {
	sink   logr.LogSink
	names  []string
	values []any
	// depth is the call depth asked of it (WithCallDepth).
	depth int
}

var (
	_ logr.LogSink          = (*deferredSink)(nil)
	_ logr.CallDepthLogSink = (*deferredSink)(nil)
)

// Init does nothing: sink was initialized when its logger was made.
func (s *deferredSink) Init(logr.RuntimeInfo) {}

// Enabled reports whether sink writes lines at level.
func (s *deferredSink) Enabled(level int) bool { return s.sink.Enabled(level) }

// Info writes a line through sink with the names and values kept.
func (s *deferredSink) Info(level int, msg string, kv ...any) {
	s.resolve().Info(level, msg, kv...)
}

// Error writes an error line through sink with the names and values kept.
func (s *deferredSink) Error(err error, msg string, kv ...any) {
	s.resolve().Error(err, msg, kv...)
}

// WithValues returns a sink that keeps kv too.
func (s *deferredSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.values = append(slices.Clip(s.values), kv...)
	return &c
}

// WithName returns a sink that keeps name too.
func (s *deferredSink) WithName(name string) logr.LogSink {
	c := *s
	c.names = append(slices.Clip(s.names), name)
	return &c
}

// WithCallDepth returns a sink whose lines are attributed depth frames
// further up.
func (s *deferredSink) WithCallDepth(depth int) logr.LogSink {
	c := *s
	c.depth += depth
	return &c
}

// resolve returns sink with the names and values kept, its lines
// attributed to the caller of Info or Error (one frame up, past them).
func (s *deferredSink) resolve() logr.LogSink {
	sink := s.sink
	if d, ok := sink.(logr.CallDepthLogSink); ok {
		sink = d.WithCallDepth(s.depth + 1)
	}
	for _, n := range s.names {
		sink = sink.WithName(n)
	}
	if len(s.values) > 0 {
		sink = sink.WithValues(s.values...)
	}
	return sink
}
