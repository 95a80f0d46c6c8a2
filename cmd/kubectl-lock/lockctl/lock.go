package lockctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// fieldManager is the plugin's name in managedFields.
const fieldManager = "kubectl-lock"

// defaultTimeout bounds each wait for lockguard.
const defaultTimeout = 30 * time.Second

const lockExample = `  # Protect the Stack forge in namespace forge against deletion
  kubectl lock stack/forge -n forge --reason "Production environment"

  # Name the Lock yourself and print it once active
  kubectl lock stacks.core.navique.com/forge -n forge --name protect-forge --reason "Production" -o yaml

  # Protect every resource of namespace forge labelled tier=db, now or later
  kubectl lock --selector tier=db -n forge --reason "Databases"

  # Protect namespace forge and every resource in it
  kubectl lock --all -n forge --reason "Production environment"

  # Protect every Namespace labelled env=prod, now or later, with a ClusterLock
  kubectl lock namespaces --selector env=prod --reason "Production"

  # Freeze the Stack forge: its deletion and changes to its spec and metadata are denied
  kubectl lock stack/forge -n forge --read-only --reason "Change freeze until Monday"

  # Freeze every resource of namespace forge labelled tier=db
  kubectl lock --selector tier=db -n forge --read-only --name freeze-db

  # Freeze namespace prod until Monday 06:00 UTC: the Lock expires then by itself
  kubectl lock --all -n prod --read-only --reason "Change freeze" --until 2026-12-07T06:00:00Z

  # Protect the Stack forge for three days
  kubectl lock stack/forge -n forge --for 72h

  # Would the API server create this Lock? (nothing is created)
  kubectl lock stack/forge -n forge --read-only --dry-run=server

  # Try a Lock first: refuse nothing, record what it would refuse
  kubectl lock --selector tier=db -n forge --audit --name try-db

  # What is locked, in every namespace
  kubectl lock list -A

  # One Lock in full: scope, level, expiry, status, what it covers, its last refusal
  kubectl lock show stack-forge -n forge

  # Raise it to ReadOnly (lowering it needs the verb unlock)
  kubectl lock update stack-forge -n forge --level ReadOnly

  # Which Locks would block deleting the Stack forge, and how
  kubectl lock why stack/forge -n forge

  # Protect namespace prod itself with a ClusterLock (crd/, clusterrole/, storageclass/, pv/ too)
  kubectl lock namespace/prod --reason "Production workloads"

  # Lift the protection (kubectl-unlock)
  kubectl unlock stack/forge -n forge

  # Delete one Lock by name, a selector Lock too (needs the verb unlock)
  kubectl lock unlock tier-db -n forge`

// lockOptions are the flags of `kubectl lock TYPE/NAME`.
type lockOptions struct {
	flags    Flags
	reason   string
	name     string
	timeout  time.Duration
	output   string
	selector string
	all      bool
	readOnly bool
	// forDuration and until are --for and --until: the Lock's expiresAt
	// (expiry.go).
	forDuration time.Duration
	until       string
	expiresAt   *metav1.Time
	// audit is --audit: the Lock is created in Audit enforcement
	// (audit.go).
	audit bool
	// dryRun is --dry-run: server sends the create as a dry run, client
	// sends none; either way kubectl lock does not wait.
	dryRun string
}

// NewLockCommand returns `kubectl lock`: TYPE/NAME creates a Lock on that
// resource and waits until it is active; its sub-commands are the other
// verbs (list, why, show, update, exception, unlock).
func NewLockCommand(s Streams) *cobra.Command {
	o := &lockOptions{}
	cmd := &cobra.Command{
		Use:   "lock (TYPE/NAME | [TYPE] --selector LABELS | --all) [--read-only] [--audit] [--reason TEXT] [--name LOCK]",
		Short: "Protect core.navique.com resources against deletion, or freeze them, with a Lock",
		Long: `Create a Lock that protects TYPE/NAME, in its namespace, against deletion, and wait
until lockguard reports it active: from then on every DELETE of the resource is
denied until the Lock is deleted (kubectl unlock).

TYPE is resolved as kubectl does (stack, stacks, stacks.core.navique.com; pvc, statefulsets.apps)
and the Lock gets the served kind. Namespaced kinds of core.navique.com can be locked, and those
of other groups the installation opts in (protect.resources; on others the Lock is InvalidTarget,
saying how to opt in). The Lock is named KIND-NAME (for example stack-forge) unless --name is given.

--selector LABELS (kubectl's label selector syntax) creates a selector Lock
instead: it protects every core.navique.com resource of the namespace whose
labels match, including resources created or labelled later, and a resource
relabelled out of it is no longer protected. --all protects every resource of
the namespace and the namespace itself. Such a Lock is named after its
selector (tier-db; all for --all) unless --name is given.

--read-only, with any of these, creates a ReadOnly Lock (spec.level ReadOnly;
the default level is CanNotDelete): besides deletion, lockguard refuses updates
and patches of the spec and metadata of what it covers, except by the
principals the installation exempts (the navique operator's ServiceAccount by
default); the status subresource stays writable. kubectl lock then also waits
until lockguard reports the freeze in force (the Lock's ReadOnly condition
InForce), which it does once every resource the Lock covers carries the
core.navique.com/read-only label that sends their updates to lockguard.

--for DURATION (72h) or --until TIME (RFC 3339, 2026-12-07T06:00:00Z) sets the
Lock's spec.expiresAt: at that second the Lock stops protecting, on every path
at once, and its status says Expired; it stays as a record until it is
deleted. Without either, the Lock never expires.

--audit creates the Lock in Audit enforcement (spec.enforcement Audit): it
refuses nothing, and each request it would refuse is allowed with a warning
and recorded in its status.lastWouldDeny (kubectl lock show NAME). kubectl
lock returns once lockguard reports it live (Ready, reason Audit); kubectl
lock update NAME --enforce makes it refuse.

--dry-run=server sends the create as a server-side dry run: RBAC, lockguard
and validation answer as for the real create, no Lock is created, and kubectl
lock prints what would be created (-o: the Lock as the API server would store
it) without waiting. --dry-run=client sends nothing but the reads (discovery,
the target) and prints the Lock it would send.

A cluster-scoped TYPE/NAME that a ClusterLock protects (namespace/prod,
crd/NAME, clusterrole/NAME, storageclass/NAME, pv/NAME, a cluster-scoped kind
of core.navique.com) gets a ClusterLock, named and waited for as a Lock
(docs/clusterlock.md); it needs the ClusterRole lockguard-cluster-lock.

An existing Lock of the same name and scope is kept as it is: its reason, and
its level unless --read-only asks for ReadOnly and it is CanNotDelete, and its
enforcement unless it is Audit and --audit is not given, which are errors
(raise it with kubectl lock update, or choose another --name).`,
		Example: lockExample,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRoleHint(o.runScope(contextOf(cmd.Context()), s, args))
		},
	}
	pluginCommand(cmd, "kubectl lock", s, &o.flags)
	cmd.Flags().StringVar(&o.reason, "reason", "", "Why the resource is locked: shown in the Lock's status and in every denial message.")
	cmd.Flags().StringVar(&o.name, "name", "", "Name of the Lock (default KIND-NAME, for example stack-forge).")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultTimeout, "How long to wait for lockguard to report the Lock active.")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml prints the Lock once active.")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "Lock the resources of the namespace whose labels match this selector (tier=db,env!=dev), now and later, instead of TYPE/NAME.")
	cmd.Flags().BoolVar(&o.all, "all", false, "Lock the namespace and every resource in it, now and later, instead of TYPE/NAME.")
	addExpiryFlags(cmd, o)
	addAuditFlag(cmd, o)
	addDryRunFlag(cmd, &o.dryRun)
	cmd.Flags().BoolVar(&o.readOnly, "read-only", false, "Create a ReadOnly Lock: also refuse changes to the spec and metadata of what it covers (except by exempt principals), and wait until the freeze is in force.")
	cmd.AddCommand(newListCommand(s, &o.flags), newWhyCommand(s, &o.flags), newShowCommand(s, &o.flags), newUpdateCommand(s, &o.flags), newExceptionCommand(s, &o.flags), newLockUnlockCommand(s, &o.flags))
	return cmd
}

// runScope runs kubectl lock with exactly one scope: TYPE/NAME, --selector
// or --all.
func (o *lockOptions) runScope(ctx context.Context, s Streams, args []string) error {
	var err error
	if err = outputFormat(o.output); err != nil {
		return err
	}
	if err = checkDryRun(o.dryRun); err != nil {
		return err
	}
	if o.isClusterSelectorScope(args) {
		if o.expiresAt, err = o.expiry(clock()); err != nil {
			return err
		}
		return o.runClusterSelector(ctx, s, args[0]) // clusterselector.go
	}
	scopes := len(args)
	if o.selector != "" {
		scopes++
	}
	if o.all {
		scopes++
	}
	if scopes != 1 {
		return fmt.Errorf("give exactly one of TYPE/NAME, --selector LABELS or --all")
	}
	if o.expiresAt, err = o.expiry(clock()); err != nil {
		return err
	}
	if len(args) == 1 {
		return o.run(ctx, s, args[0])
	}
	sel := &lockv1alpha1.LockSelector{}
	if o.selector != "" {
		if sel, err = parseSelector(o.selector); err != nil {
			return err
		}
	}
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	name := o.name
	if name == "" {
		if name, err = defaultSelectorLockName(sel); err != nil {
			return err
		}
	}
	lock := o.newLock(c.namespace, name)
	lock.Spec.Selector = sel
	done := func(readOnly bool) string {
		switch {
		case sel.IsEmpty() && readOnly:
			return fmt.Sprintf("namespace %s and every resource in it are locked read-only: deleting any of them, and changing the spec or metadata of its resources (except by exempt principals), is denied until the Lock %s is deleted", c.namespace, name)
		case sel.IsEmpty():
			return fmt.Sprintf("namespace %s and every resource in it are locked: their deletion is denied until the Lock %s is deleted", c.namespace, name)
		case readOnly:
			return fmt.Sprintf("the resources of namespace %s that match %s, now or later, are locked read-only: their deletion, and changes to their spec and metadata (except by exempt principals), are denied until the Lock %s is deleted", c.namespace, o.selector, name)
		}
		return fmt.Sprintf("the resources of namespace %s that match %s, now or later, are locked: their deletion is denied until the Lock %s is deleted", c.namespace, o.selector, name)
	}
	return o.create(ctx, s, c.locks(), lock, done, func(existing *lockv1alpha1.Lock) error {
		if !sameScope(existing, sel) {
			return fmt.Errorf("%s %q already exists and protects %s: choose another name with --name", lockGroupResource, name, scopeString(existing))
		}
		return nil
	})
}

// newLock returns the Lock name in ns with the reason and, with
// --read-only, the level ReadOnly (without, the level is left to the API
// server's default, CanNotDelete), and with --audit the enforcement
// Audit (without, the default, Enforce); its scope unset.
func (o *lockOptions) newLock(ns, name string) *lockv1alpha1.Lock {
	l := &lockv1alpha1.Lock{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       lockv1alpha1.LockSpec{Reason: o.reason, ExpiresAt: o.expiresAt},
	}
	if o.readOnly {
		l.Spec.Level = lockv1alpha1.LevelReadOnly
	}
	if o.audit {
		l.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	}
	return l
}

func (o *lockOptions) run(ctx context.Context, s Streams, arg string) error {
	c, t, err := o.flags.target(ctx, arg)
	if cs := (clusterScoped{}); errors.As(err, &cs) {
		return o.runCluster(ctx, s, c, cs.t)
	}
	if err != nil {
		return err
	}
	// A Lock on a name that does not exist protects nothing now: most
	// likely a typo.
	if _, err := c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{}); err != nil {
		return err
	}
	name, err := o.lockName(t)
	if err != nil {
		return err
	}
	lock := o.newLock(c.namespace, name)
	lock.Spec.TargetRef = lockv1alpha1.TargetReference{
		APIVersion: t.mapping.GroupVersionKind.GroupVersion().String(),
		Kind:       t.kind(),
		Name:       t.name,
	}
	done := func(readOnly bool) string {
		if readOnly {
			return fmt.Sprintf("%s in namespace %s is locked read-only: its deletion, and changes to its spec and metadata (except by exempt principals), are denied until the Lock %s is deleted", t, c.namespace, name)
		}
		return fmt.Sprintf("%s in namespace %s is locked: its deletion is denied until the Lock %s is deleted", t, c.namespace, name)
	}
	return o.create(ctx, s, c.locks(), lock, done, func(existing *lockv1alpha1.Lock) error {
		if !targets(existing, t) {
			return fmt.Errorf("%s %q already exists and protects %s: choose another name with --name",
				lockGroupResource, name, scopeString(existing))
		}
		return nil
	})
}

// create creates lock (the same Lock again is not an error: sameScope
// says whether an existing one of its name is, and a CanNotDelete one
// when lock is ReadOnly is not, nor an Audit one when lock enforces),
// waits until it is active (and, for a ReadOnly Lock, its freeze in
// force; for an Audit Lock, live) and prints it, or done of whether it is
// ReadOnly (auditDone for an Audit Lock); under --dry-run, only what it
// would create, waiting for nothing.
func (o *lockOptions) create(ctx context.Context, s Streams, k lockKind, lock *lockv1alpha1.Lock, done func(readOnly bool) string, sameScope func(*lockv1alpha1.Lock) error) error {
	name, locks := lock.Name, k.res
	u, err := k.encode(lock)
	if err != nil {
		return err
	}
	text := o.output == ""
	if o.dryRun == dryRunClient {
		// Nothing is sent: print what would be.
		if !text {
			return printObject(s.Out, o.output, u.Object)
		}
		fmt.Fprintf(s.Out, "%s/%s created%s\n", k.gr, name, dryRunSuffix(o.dryRun))
		return nil
	}
	created := u
	err = CreateRetrying(ctx, o.timeout, func(ctx context.Context) error {
		var err error
		created, err = locks.Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager, DryRun: dryRunAll(o.dryRun)})
		return err
	})
	switch {
	case err == nil:
		if text {
			fmt.Fprintf(s.Out, "%s/%s created%s\n", k.gr, name, dryRunSuffix(o.dryRun))
		}
	case apierrors.IsAlreadyExists(err):
		// The same Lock again is not an error; another target is.
		existing, gerr := getLock(ctx, locks, name)
		if gerr != nil {
			return gerr
		}
		if err := sameScope(existing); err != nil {
			return err
		}
		if err := sameLevel(existing, lock, k.ns); err != nil {
			return err
		}
		if err := sameEnforcement(existing, lock, k.ns); err != nil {
			return err
		}
		if text {
			fmt.Fprintf(s.Out, "%s/%s unchanged%s\n", k.gr, name, dryRunSuffix(o.dryRun))
		}
		if existing.Spec.Reason != o.reason {
			fmt.Fprintf(s.ErrOut, "Warning: the existing %s's reason %q was kept\n", k.kind, existing.Spec.Reason)
		}
		if levelOf(existing) != levelOf(lock) {
			fmt.Fprintf(s.ErrOut, "Warning: the existing %s's level %s was kept\n", k.kind, levelOf(existing))
		}
		if enforcementOf(existing) != enforcementOf(lock) {
			fmt.Fprintf(s.ErrOut, "Warning: the existing %s's enforcement %s was kept\n", k.kind, enforcementOf(existing))
		}
		if existing.ExpiresAtString() != lock.ExpiresAtString() {
			fmt.Fprintf(s.ErrOut, "Warning: the existing %s's expiry (%s) was kept\n", k.kind, expiresText(existing))
		}
		if !text && dryRunning(o.dryRun) {
			existing.ManagedFields = nil // as kubectl prints objects
			return printObject(s.Out, o.output, existing)
		}
	default:
		return err
	}
	if dryRunning(o.dryRun) {
		// Nothing was created: there is nothing to wait for.
		if !text {
			unstructured.RemoveNestedField(created.Object, "metadata", "managedFields") // as kubectl prints objects
			return printObject(s.Out, o.output, created.Object)
		}
		return nil
	}

	active, err := waitActive(ctx, locks, k.gr, name, o.timeout)
	if err != nil {
		return err
	}
	if !text {
		active.ManagedFields = nil // as kubectl prints objects
		return printObject(s.Out, o.output, active)
	}
	if !active.Enforces() {
		fmt.Fprintln(s.Out, auditDone(active))
		return nil
	}
	fmt.Fprintln(s.Out, done(readOnly(active))+expiryNote(active))
	return nil
}
