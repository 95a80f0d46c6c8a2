//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// auditPolicy records every delete and deletecollection at level Metadata
// (which carries the admission webhooks' audit annotations), and
// lockguard's own writes, so that a write Test13StatusTruthAndQuietMinute
// counts can be named; nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["delete", "deletecollection"]
- level: Metadata
  verbs: ["create", "patch", "update"]
  users: ["` + framework.ServiceAccountUser + `"]
- level: None
`

// auditEvent is the part of an audit.k8s.io/v1 Event the test reads.
type auditEvent struct {
	Stage          string    `json:"stage"`
	Verb           string    `json:"verb"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// Test15AuditAnnotations (docs/contract.md rule 14): the API server's audit log
// records, for each guard's decision, lockguard's audit annotations under
// the name of the webhook entry that asked: the decision, the guard and
// the Locks that denied it. Read from a real kube-apiserver's audit log.
func Test15AuditAnnotations(t *testing.T) {
	if s.auditLog == "" {
		t.Skip("the suite cannot read the API server's audit log in this mode")
	}
	ns := kube.NewNamespace(t, "audit")
	kube.CreateObject(t, framework.StackGVK, ns, "app")
	kube.CreateObject(t, framework.StackGVK, ns, "free")
	owner := kube.CreateObject(t, framework.StackGVK, ns, "owner")
	kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "db", owner)
	keepApp := kube.CreateLock(t, framework.NewLock(ns, "keep-app", "Stack", "app", "audited"))
	keepDB := kube.CreateLock(t, framework.NewLock(ns, "keep-db", "PostgresCluster", "db", "audited"))
	kube.WaitActive(t, keepApp, keepDB)

	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "app"), keepApp)
	if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "free"); err != nil {
		t.Fatalf("deleting the unlocked Stack %s/free: %v", ns, err)
	}
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "owner", kube.CascadeDenialError([]*lockv1alpha1.Lock{keepDB}, "PostgresCluster/db"))
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}), webhook.GuardNamespace,
		framework.NamespaceDenialMessage(ns, keepApp, keepDB))
	crd := framework.CRD("stacks.core.navique.com")
	if err := kube.Client.Delete(t.Context(), crd, client.DryRunAll); err == nil {
		t.Fatal("a dry-run delete of the Stack CRD was allowed while Stacks are locked")
	}

	type want struct {
		what, entry, resource, namespace, name string
		decision, guard, locks                 string // locks "*": any, not empty
	}
	// A namespace's audit event names it as its own namespace, too.
	wants := []want{
		{"the locked Stack's delete", "delete", "stacks", ns, "app", webhook.DecisionDenied, webhook.GuardObject, "keep-app"},
		{"the unlocked Stack's delete", "delete", "stacks", ns, "free", webhook.DecisionAllowed, webhook.GuardObject, ""},
		{"the owner's dry-run delete", "delete", "stacks", ns, "owner", webhook.DecisionDenied, webhook.GuardCascade, "keep-db"},
		{"the namespace's delete", "namespace", "namespaces", ns, ns, webhook.DecisionDenied, webhook.GuardNamespace, "keep-app,keep-db"},
		{"the Stack CRD's dry-run delete", "crd", "customresourcedefinitions", "", crd.GetName(), webhook.DecisionDenied, webhook.GuardCRD, "*"},
	}
	for _, w := range wants {
		prefix := w.entry + ".lockguard.core.navique.com/"
		framework.Eventually(t, framework.DefaultTimeout, "the audit event of "+w.what, func(context.Context) error {
			events, err := readAudit(s.auditLog)
			if err != nil {
				return err
			}
			var seen []string
			// The last matching event first: a dry run may have been
			// retried. (A DELETE's dryRun is in its body, which level
			// Metadata does not record.)
			for i := len(events) - 1; i >= 0; i-- {
				e := events[i]
				if e.Stage != "ResponseComplete" || e.Verb != "delete" || e.ObjectRef.Resource != w.resource ||
					e.ObjectRef.Namespace != w.namespace || e.ObjectRef.Name != w.name {
					continue
				}
				got := e.Annotations
				if got[prefix+webhook.AuditDecision] != w.decision || got[prefix+webhook.AuditGuard] != w.guard {
					seen = append(seen, fmt.Sprint(got))
					continue
				}
				locks, has := got[prefix+webhook.AuditLocks]
				if w.locks == "*" && locks != "" || w.locks == locks && has == (w.locks != "") {
					return nil
				}
				seen = append(seen, fmt.Sprint(got))
			}
			return fmt.Errorf("no audit event of %s with %s%s=%s, %s=%s, %s=%q; the matching requests' annotations: %v",
				w.what, prefix, webhook.AuditDecision, w.decision, webhook.AuditGuard, w.guard, webhook.AuditLocks, w.locks, seen)
		})
	}
}

// readAudit returns the events of the audit log at path, in order.
func readAudit(path string) ([]auditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var events []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // A line being written.
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

// lockguardWrites names lockguard's writes (create, patch and update, as
// its ServiceAccount) that the API server completed at since or after,
// from the audit log (auditPolicy): "" where the suite cannot read it.
func lockguardWrites(since time.Time) string {
	if s.auditLog == "" {
		return ""
	}
	events, err := readAudit(s.auditLog)
	if err != nil {
		return fmt.Sprintf("reading the audit log: %v", err)
	}
	var writes []string
	for _, e := range events {
		if e.Stage != "ResponseComplete" || e.User.Username != framework.ServiceAccountUser || e.StageTimestamp.Before(since) || e.Verb == "update" && e.ObjectRef.Resource == "leases" {
			continue
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		writes = append(writes, fmt.Sprintf("%s %s %s/%s (%d) at %s", e.Verb, r, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code, e.StageTimestamp.Format("15:04:05.000")))
	}
	return fmt.Sprintf("lockguard's writes in the audit log since %s, Lease renewals aside: %v", since.Format("15:04:05.000"), writes)
}
