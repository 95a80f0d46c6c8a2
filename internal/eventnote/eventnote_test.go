package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
)

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"short":    {reason: "a note that fits is kept", in: "kept", want: "kept"},
		"at limit": {reason: "exactly NoteLimit bytes fit", in: strings.Repeat("a", NoteLimit), want: strings.Repeat("a", NoteLimit)},
		"over":     {reason: "one byte over is cut, with an ellipsis", in: strings.Repeat("a", NoteLimit+1), want: strings.Repeat("a", NoteLimit-3) + "..."},
		"runes": {reason: "a multi-byte character is never split",
			in: "x" + strings.Repeat("é", NoteLimit), want: "x" + strings.Repeat("é", (NoteLimit-4)/2) + "..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tc.in)
			if got != tc.want {
				t.Errorf("%s\nTruncate(%d bytes) = %d bytes %q..., want %d bytes", tc.reason, len(tc.in), len(got), got[:min(len(got), 20)], len(tc.want))
			}
			if len(got) > NoteLimit || !utf8.ValidString(got) {
				t.Errorf("%s\nTruncate(...) is %d bytes, valid UTF-8 %t", tc.reason, len(got), utf8.ValidString(got))
			}
		})
	}
}

type captured struct{ notes []string }

func (c *captured) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	if len(args) != 1 || note != "%s" {
		panic("the recorder must pass the note formatted")
	}
	c.notes = append(c.notes, args[0].(string))
}

func TestRecorder(t *testing.T) {
	c := &captured{}
	Recorder(c).Eventf(nil, nil, "Warning", "Reason", "Action", "Lock %s: %s", "keep-web", strings.Repeat("r", 2000))
	if len(c.notes) != 1 || len(c.notes[0]) != NoteLimit || !strings.HasPrefix(c.notes[0], "Lock keep-web: rrr") {
		t.Errorf("recorded %d notes, the first %d bytes; want one of %d bytes starting with the Lock", len(c.notes), len(c.notes[0]), NoteLimit)
	}
	if Recorder(nil) != nil {
		t.Error("Recorder(nil) is not nil")
	}
}
