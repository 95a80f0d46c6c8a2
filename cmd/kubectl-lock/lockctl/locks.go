package lockctl

import (
	"time"

	"context"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// lockClient reads and writes the Locks of one namespace, or of all.
type lockClient = dynamic.ResourceInterface

// statusActive is lockStatus of an active Lock; the others are the Ready
// condition's reason, statusPending (lockguard has not reported on this
// generation yet) and statusDeleting.
const (
	statusActive   = "Active"
	statusPending  = "Pending"
	statusDeleting = "Deleting"
)

// getLock reads a Lock.
func getLock(ctx context.Context, locks lockClient, name string) (*lockv1alpha1.Lock, error) {
	u, err := locks.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// listLocks lists Locks.
func listLocks(ctx context.Context, locks lockClient) ([]lockv1alpha1.Lock, error) {
	list, err := locks.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]lockv1alpha1.Lock, 0, len(list.Items))
	for i := range list.Items {
		l, err := fromUnstructured(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *l)
	}
	return out, nil
}

func fromUnstructured(u *unstructured.Unstructured) (*lockv1alpha1.Lock, error) {
	l := &lockv1alpha1.Lock{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l); err != nil {
		return nil, fmt.Errorf("decoding Lock %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return l, nil
}

// toUnstructured converts a Lock to create; the status is the server's.
func toUnstructured(l *lockv1alpha1.Lock) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(l)
	if err != nil {
		return nil, err
	}
	delete(obj, "status")
	return &unstructured.Unstructured{Object: obj}, nil
}

// lockStatus sums a Lock's state up in one word, now (lockStatusAt).
func lockStatus(l *lockv1alpha1.Lock) string { return lockStatusAt(l, clock()) }

// lockStatusAt sums a Lock's state up in one word at time now: Active,
// Audit (a live Lock in Audit enforcement: it refuses nothing), Pending,
// Deleting, Expired, or the reason it is not ready (MissingReference,
// InvalidTarget).
func lockStatusAt(l *lockv1alpha1.Lock, now time.Time) string {
	if l.DeletionTimestamp != nil {
		return statusDeleting
	}
	if l.ExpiredAt(now) {
		// docs/contract.md rule 19: expired from its expiresAt on, whether
		// or not lockguard has written so yet.
		return lockv1alpha1.ReasonExpired
	}
	c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady)
	if c == nil || l.Status.ObservedGeneration < l.Generation {
		return statusPending
	}
	switch {
	case c.Status == metav1.ConditionTrue && l.Status.Active:
		return statusActive
	case c.Status == metav1.ConditionTrue && c.Reason == lockv1alpha1.ReasonAudit:
		// docs/contract.md rule 20: live, refusing nothing.
		return lockv1alpha1.ReasonAudit
	case c.Status == metav1.ConditionTrue || c.Reason == "":
		return statusPending
	}
	return c.Reason
}

// readyMessage is the Ready condition's message, if any.
func readyMessage(l *lockv1alpha1.Lock) string {
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// describeStatus is lockStatus with the Ready condition's message.
func describeStatus(l *lockv1alpha1.Lock) string {
	st := lockStatus(l)
	if st == statusPending && len(l.Status.Conditions) == 0 {
		return "no status from lockguard yet"
	}
	if m := readyMessage(l); m != "" {
		return st + ": " + m
	}
	return st
}

// targets reports whether l protects t: same group, the served kind as
// spelled, same name. The version does not matter, as in the webhook.
func targets(l *lockv1alpha1.Lock, t target) bool {
	gk, err := l.Spec.TargetRef.GroupKind()
	return err == nil && gk == t.mapping.GroupVersionKind.GroupKind() && l.Spec.TargetRef.Name == t.name
}

// printObject prints obj as json or yaml, indented like kubectl's.
func printObject(w io.Writer, format string, obj any) error {
	data, err := json.MarshalIndent(obj, "", "    ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
