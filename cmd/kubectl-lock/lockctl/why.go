package lockctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

const whyExample = `  # Why can't I delete (or change) the Stack forge? Which selector Locks match its labels?
  kubectl lock why stack/forge -n forge

  # Which Locks would stop deleting the namespace forge, as JSON
  kubectl lock why namespace/forge -o json

  # Which Locks hold objects of the kind a CRD serves
  kubectl lock why crd/stacks.core.navique.com`

// whyOptions are the flags of `kubectl lock why`.
type whyOptions struct {
	flags  *Flags
	output string
}

// newWhyCommand returns `kubectl lock why`.
func newWhyCommand(s Streams, flags *Flags) *cobra.Command {
	o := &whyOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "why TYPE/NAME | namespace/NAME | crd/NAME [-o json|yaml]",
		Short: "Show which Locks would block deleting or changing a resource, a namespace or a CRD, and how",
		Long: `Show what lockguard decides for a DELETE of TYPE/NAME (a core.navique.com resource
in the namespace of -n), of a namespace or of a core.navique.com
CustomResourceDefinition, and which Locks decide it:

- directly: the live Locks that cover the resource: those that target it and
  the selector Locks whose selectors match its labels. The verdict is computed
  by lockguard's own webhook code, run on the Locks listed from the API server;
- through descendants: the locked objects of core.navique.com in its namespace
  that it owns, transitively, through ownerReferences, which the garbage
  collector would delete with it (as lockguard's cascade guard walks them:
  when one is locked, the verdict is the cascade guard's denial);
- inside it: for a namespace, its live Locks whose targets exist; for a CRD, the
  live Locks on existing objects of its kind (for the Lock CRD, every live Lock);
- ClusterLocks: for a cluster-scoped object a ClusterLock protects (a namespace,
  a CRD of any group, clusterrole/NAME, storageclass/NAME, pv/NAME...), the
  ClusterLocks that name it, and the ClusterLock guard's verdict.

For a resource, it also shows every live selector Lock of its namespace with
whether it covers the resource and why: each requirement of its selector, met
or not, next to the resource's label; and what happens to an UPDATE or PATCH of
the resource: under a ReadOnly Lock, its spec and metadata are frozen (refused
except for the principals the installation exempts; the status subresource stays
writable) once the freeze is in force, which the Lock's ReadOnly condition says
(InForce, Pending or GuardDisabled); whether lockguard refuses your update is
the API server's answer to a server-side dry-run PATCH of its metadata as you
(it changes nothing), which lockguard's update guard decides with your identity
and the installation's exemptions; under no ReadOnly Lock, lockguard never
blocks its updates.
Which Locks cover the resource is decided by the rule lockguard's guards and
reconciler use (Lock.Covers).

It deletes nothing and writes nothing (the PATCH is a dry run). It exits 0 whatever the verdict; it
fails only when the lookup does.`,
		Example:       whyExample,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(contextOf(cmd.Context()), s, args[0])
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml.")
	return cmd
}

func (o *whyOptions) run(ctx context.Context, s Streams, arg string) error {
	if err := outputFormat(o.output); err != nil {
		return err
	}
	typ, name, ok := strings.Cut(arg, "/")
	if !ok || typ == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not TYPE/NAME, namespace/NAME or crd/NAME (for example stack/forge)", arg)
	}
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	var r *whyReport
	var cluster *target // the cluster-scoped object, for its update verdict
	switch strings.ToLower(typ) {
	case "namespace", "namespaces", "ns":
		r, err = whyNamespace(ctx, c, name)
		cluster = &target{mapping: &meta.RESTMapping{GroupVersionKind: namespaceGVK, Resource: namespaceGVK.GroupVersion().WithResource("namespaces")}, name: name}
	case "crd", "crds", "customresourcedefinition", "customresourcedefinitions",
		"customresourcedefinition.apiextensions.k8s.io", "customresourcedefinitions.apiextensions.k8s.io":
		r, err = whyCRD(ctx, c, name)
		cluster = &target{mapping: &meta.RESTMapping{GroupVersionKind: crdGVK, Resource: crdGVK.GroupVersion().WithResource("customresourcedefinitions")}, name: name}
	default:
		r, err = whyObject(ctx, s, c, arg)
		if cs := (clusterScoped{}); errors.As(err, &cs) {
			r, err = whyClusterObject(ctx, c, cs.t)
			cluster = &cs.t
		}
	}
	if err == nil && cluster != nil {
		// ReadOnly ClusterLocks (rules 16 and 22): whyclusterupdate.go.
		err = addClusterUpdate(ctx, c, r, *cluster)
	}
	if err != nil {
		return err
	}
	if o.output != "" {
		return printObject(s.Out, o.output, r)
	}
	return r.print(s.Out)
}

// whyReport is the answer of `kubectl lock why`; -o json and -o yaml print
// it as is.
type whyReport struct {
	// Target is what would be deleted.
	Target whyTarget `json:"target"`
	// Deletion is what lockguard decides for its DELETE.
	Deletion whyDecision `json:"deletion"`
	// Direct are the Locks that target it (a resource only).
	Direct []whyLock `json:"direct"`
	// Descendants are the locked objects that it owns, transitively, and
	// that the garbage collector would delete with it (a resource only).
	Descendants []whyDescendant `json:"descendants"`
	// Inside are the live Locks inside a namespace or on a CRD's kind whose
	// targets exist.
	Inside []whyLock `json:"inside"`
	// ProtectNothing are live Locks that target it or are inside it, but
	// whose targets do not exist: they protect nothing until the target is
	// created.
	ProtectNothing []whyLock `json:"protectNothing"`
	// Selectors are the live selector Locks of the resource's namespace,
	// each with whether it covers the resource and its requirements, met
	// or not by the resource's labels (a resource only; empty otherwise).
	Selectors []whySelector `json:"selectors"`
	// Update is what lockguard does with an UPDATE or PATCH of the
	// resource's spec and metadata: refused under a ReadOnly Lock (a
	// resource only; absent otherwise).
	Update *whyUpdate `json:"update,omitempty"`
	// ClusterLocks are the ClusterLocks that name a cluster-scoped object,
	// live or not (absent for a resource in a namespace).
	ClusterLocks []whyLock `json:"clusterLocks,omitempty"`
	// Notes explain the verdict in sentences.
	Notes []string `json:"notes"`
}

// whyTarget names the object of a why.
type whyTarget struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Labels are a resource's labels, which selector Locks match.
	Labels map[string]string `json:"labels,omitempty"`
}

// whyDecision is lockguard's answer to a DELETE.
type whyDecision struct {
	// Blocked is true when lockguard would deny the DELETE now.
	Blocked bool `json:"blocked"`
	// DecidedBy says where the verdict comes from: "webhook" (lockguard's
	// webhook code, run by the plugin on the Locks it read) or
	// "not-guarded" (lockguard's webhook is not sent such deletes).
	DecidedBy string `json:"decidedBy"`
	// Locks are the Locks the denial names (sorted), when Blocked.
	Locks []string `json:"locks,omitempty"`
	// Message is the webhook's message: the denial, or why it allows.
	Message string `json:"message,omitempty"`
	// Warnings are the admission warnings the delete would carry.
	Warnings []string `json:"warnings,omitempty"`
}

// whyLock is a Lock as a why shows it.
type whyLock struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Target    string `json:"target"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
}

// whyDescendant is a locked object that a cascade would reach.
type whyDescendant struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// OwnerPath is the chain of owners from the target down to the
	// descendant's owner, as Kind/name.
	OwnerPath []string `json:"ownerPath"`
	// Locks are the Locks that deny the collector's delete of it.
	Locks []string `json:"locks"`
	// Message is the denial the collector's delete gets.
	Message string `json:"message"`
}

// Where a verdict comes from (whyDecision.DecidedBy).
const (
	decidedByWebhook    = "webhook"
	decidedByNotGuarded = "not-guarded"
)

// newWhyLock describes a Lock.
func newWhyLock(l *lockv1alpha1.Lock) whyLock {
	return whyLock{Namespace: l.Namespace, Name: l.Name, Target: scopeString(l), Status: lockStatus(l), Reason: l.Spec.Reason}
}

// decisionOf reads an admission response into a whyDecision.
func decisionOf(resp admission.Response, by string) whyDecision {
	d := whyDecision{Blocked: !resp.Allowed, DecidedBy: by, Warnings: resp.Warnings}
	if resp.Result != nil {
		d.Message = resp.Result.Message
	}
	if d.Blocked {
		d.Locks = lockNamesIn(d.Message)
	}
	return d
}

// lockNamesIn returns the Lock names of a lockguard denial message ("...
// Lock(s) [a b]; ..."), or nil.
func lockNamesIn(msg string) []string {
	_, rest, ok := strings.Cut(msg, "Lock(s) [")
	if !ok {
		return nil
	}
	names, _, ok := strings.Cut(rest, "]")
	if !ok {
		return nil
	}
	return strings.Fields(names)
}

// deleteRequest is the admission request of a server-side dry-run DELETE
// of obj (the object as read from the API server, any JSON-marshalable
// form), built as the API server sends it: decoded from an
// AdmissionRequest's JSON, so every field the webhook reads of the object
// is filled, whatever webhook.Request holds.
func deleteRequest(gvk schema.GroupVersionKind, namespace, name string, obj any) (webhook.Request, error) {
	raw, err := json.Marshal(map[string]any{
		"uid":       "kubectl-lock-why",
		"kind":      map[string]string{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
		"name":      name,
		"namespace": namespace,
		"operation": admissionv1.Delete,
		"userInfo":  map[string]string{"username": "kubectl-lock-why"},
		"dryRun":    true,
		"oldObject": obj,
	})
	if err != nil {
		return webhook.Request{}, err
	}
	var r webhook.Request
	if err := json.Unmarshal(raw, &r); err != nil {
		return webhook.Request{}, fmt.Errorf("building the admission request of %s %s: %w", gvk.Kind, name, err)
	}
	return r, nil
}
