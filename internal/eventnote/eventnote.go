// Package eventnote keeps the notes of the Events lockguard records within
// what the API server accepts. lockguard records Events through
// controller-runtime's recorder, which writes events.k8s.io/v1 Events (on
// every supported version, 1.29 included); the API server refuses a note
// over NoteLimit bytes, and the recorder neither truncates nor retries, so
// a longer note (a Lock's 1,024-character reason in its status message)
// lost the whole Event.
package eventnote

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// NoteLimit is the most bytes the API server accepts in an Event's note
// (NoteLengthLimit in Kubernetes' pkg/apis/core/validation, 1024 from 1.19
// to 1.37 at least).
const NoteLimit = 1024

// ellipsis ends a truncated note.
const ellipsis = "..."

// Truncate returns s if it fits in NoteLimit bytes, and otherwise its
// start, cut at a character boundary, followed by "...", within NoteLimit
// bytes. The start is what matters in lockguard's notes: the Lock's name
// or target first, then the reason.
func Truncate(s string) string {
	if len(s) <= NoteLimit {
		return s
	}
	cut := NoteLimit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// Recorder returns an EventRecorder that records through r with every
// note formatted and then truncated by Truncate. Every Event lockguard
// records goes through one.
func Recorder(r events.EventRecorder) events.EventRecorder {
	if r == nil {
		return nil
	}
	return recorder{r}
}

type recorder struct{ next events.EventRecorder }

// Eventf records an Event with the note truncated to NoteLimit bytes.
func (r recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.next.Eventf(regarding, related, eventtype, reason, action, "%s", Truncate(fmt.Sprintf(note, args...)))
}
