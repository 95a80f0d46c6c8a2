package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/eventnote"
)

// TestLongEventNotes: a Lock with the longest reason the CRD accepts (1,024
// characters, here 2,048 bytes) and Locks whose names together exceed an
// Event's note still get their Events, truncated to what the API server
// accepts (1,024 bytes), keeping their start: the target, the Locks' names
// and the start of the reason.
func TestLongEventNotes(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "longnotes")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	reason := strings.Repeat("é", 1024)
	long := kube.CreateLock(t, framework.NewLock(ns, "long-reason", "Stack", "forge", reason))
	var names []string
	for i := range 6 {
		name := fmt.Sprintf("%d-%s", i, strings.Repeat("n", 200))
		names = append(names, name)
		kube.CreateLock(t, framework.NewLock(ns, name, "Stack", "forge", ""))
	}
	kube.WaitActive(t, long)
	if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "forge"); err == nil {
		t.Fatal("delete of a locked Stack was allowed")
	}

	wantStarts := map[string]string{
		"Lock/long-reason/Active":        `deleting Stack "forge" is denied while this Lock exists: ` + reason[:100],
		"Lock/long-reason/DeleteBlocked": `Denied the DELETE of Stack "forge" by `,
		"Stack/forge/DeleteBlocked":      "DELETE by " + "%s" + " denied: protected by Lock(s) " + names[0] + ", " + names[1],
	}
	framework.Eventually(t, framework.DefaultTimeout, "the Events with long notes are recorded", func(context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		got := map[string]string{}
		for _, e := range list.Items {
			got[e.Regarding.Kind+"/"+e.Regarding.Name+"/"+e.Reason] = e.Note
		}
		for key, start := range wantStarts {
			note, ok := got[key]
			if !ok {
				return fmt.Errorf("no Event %s (have %d Events)", key, len(got))
			}
			before, after, templated := strings.Cut(start, "%s")
			if !strings.HasPrefix(note, before) || (templated && !strings.Contains(note, after)) {
				return fmt.Errorf("Event %s: note %.200q..., want it to start with %.200q", key, note, start)
			}
			if len(note) > eventnote.NoteLimit || !utf8.ValidString(note) {
				return fmt.Errorf("Event %s: note of %d bytes, valid UTF-8 %t", key, len(note), utf8.ValidString(note))
			}
		}
		if n := len(got["Lock/long-reason/Active"]); n != eventnote.NoteLimit-1 && n != eventnote.NoteLimit {
			return fmt.Errorf("the Active note is %d bytes, want it cut to about %d", n, eventnote.NoteLimit)
		}
		return nil
	})
}
