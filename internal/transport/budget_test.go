package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestDecodedCopiesCounted: while a review is decided, what its decoding
// copied out of the body (an update's objects) is still counted against
// the byte budget; the budget is whole again once the answer is written
// (issue 36, item 5).
func TestDecodedCopiesCounted(t *testing.T) {
	g := NewGate(Limits{MaxBufferedBytes: 1 << 20}, nil)
	object := `{"metadata":{"name":"` + string(bytes.Repeat([]byte("x"), 100<<10)) + `"}}`
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"UPDATE","object":` +
		object + `,"oldObject":` + object + `}}`
	var during int64
	decide := func(_ context.Context, req admission.Request) admission.Response {
		during = g.budget.inUse()
		return admission.Allowed("")
	}
	r := httptest.NewRequest(http.MethodPost, "/validate-update", bytes.NewBufferString(review))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	ServeReview(g, w, r, func(b []byte) (admission.Request, types.UID, error) { return DecodeReview(b) }, decide)
	if w.Code != http.StatusOK {
		t.Fatalf("ServeReview: HTTP %d %s", w.Code, w.Body)
	}
	if decoded := int64(2 * len(object)); during < decoded {
		t.Errorf("ServeReview(...): the budget held %d bytes while deciding a review whose decoded objects are %d bytes", during, decoded)
	}
	if used := g.budget.inUse(); used != 0 {
		t.Errorf("ServeReview(...) returned holding %d bytes of the budget beyond the buffers it keeps, want 0", used)
	}
}

// TestKeptBuffersCounted: a buffer kept for reuse after its body is
// released stays charged to the budget at its capacity, and is let go
// when a body needs the room (issue 36, item 5).
func TestKeptBuffersCounted(t *testing.T) {
	// Growing to 1 MiB holds the 512 KiB buffer and the 1 MiB one at once.
	budget := &byteBudget{max: 2 << 20}
	data := bytes.Repeat([]byte("x"), 600<<10) // a 1 MiB buffer
	b, err := readBody(bytes.NewReader(data), -1, MaxReviewSize, budget, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Release()
	if used, keptAll := budget.used.Load(), int64(2<<20-minBodyBuffer); used != keptAll {
		t.Errorf("after Release: budget used %d, want the kept buffers counted: %d (one of every class up to 1 MiB)", used, keptAll)
	}
	// A body of the same size again: the kept buffers make room.
	b, err = readBody(bytes.NewReader(data), -1, MaxReviewSize, budget, nil)
	if err != nil {
		t.Fatalf("a second body of %d bytes within a 2 MiB budget: %v", len(data), err)
	}
	if got := cap(*b.buf); got != 1<<20 {
		t.Errorf("second body: buffer of %d bytes, want %d", got, 1<<20)
	}
	b.Release()
}

// TestShortBudgetMakesNoGarbage is the attack of the scale benchmark's
// worst case (issue 38): a client grows bodies to megabytes on many
// connections while the budget is at its bound. The bodies it releases,
// and those it refuses because the bodies in flight leave no room, keep
// their buffers for the next ones, which reuse them (a larger one where
// none of their class is kept): they make no new buffers. Letting the
// kept buffers go to make new ones, or only because a body did not fit,
// made about 200 MB of garbage a second there, faster than the collector
// could take it under GOMEMLIMIT.
func TestShortBudgetMakesNoGarbage(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 5<<20) // an 8 MiB buffer, grown from 4 MiB
	cases := map[string]struct {
		// held is a body stalled in flight, in a buffer of that many
		// bytes (0: none).
		held int
		// refused: each body is refused (ErrBudget), as it cannot grow
		// to 8 MiB beside the one held.
		refused bool
	}{
		"Released": {},
		"Refused":  {held: 3 << 20, refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// Room for a body of 5 MiB as it grows (its 4 and 8 MiB
			// buffers), or for one held in a 4 MiB buffer and 8 MiB of
			// buffers kept, but not for the 8 MiB one besides.
			budget := &byteBudget{max: 12 << 20}
			if tc.held > 0 {
				r, w := io.Pipe()
				defer w.Close()
				go func() { _, _ = readBody(r, -1, MaxReviewSize, budget, nil) }()
				if _, err := w.Write(data[:tc.held]); err != nil {
					t.Fatal(err)
				}
			}
			read := func() {
				t.Helper()
				b, err := readBody(bytes.NewReader(data), -1, MaxReviewSize, budget, nil)
				switch {
				case tc.refused && !errors.Is(err, ErrBudget):
					t.Fatalf("a body of %d bytes beside one held in 4 MiB, in a budget of 12 MiB: %v, want ErrBudget", len(data), err)
				case !tc.refused && err != nil:
					t.Fatalf("a body of %d bytes in a budget of 12 MiB: %v", len(data), err)
				case err == nil:
					b.Release()
				}
			}
			read()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const bodies = 10
			for range bodies {
				read()
			}
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Errorf("%d bodies of %d bytes, one after the other, in a budget at its bound: %d bytes allocated, want no new buffers (under 1 MiB)",
					bodies, len(data), got)
			}
		})
	}
}
