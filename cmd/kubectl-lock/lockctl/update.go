package lockctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// updateOptions are the flags of `kubectl lock update`.
type updateOptions struct {
	flags       *Flags
	reason      string
	level       string
	forDuration time.Duration
	until       string
	noExpiry    bool
	audit       bool
	enforce     bool
	dryRun      string
	output      string
}

// lockChange is what kubectl lock update changes in a Lock's spec: each
// field set is set (noExpiry removes expiresAt).
type lockChange struct {
	reason      *string
	level       lockv1alpha1.LockLevel
	expiresAt   *metav1.Time
	noExpiry    bool
	enforcement lockv1alpha1.Enforcement
}

// newUpdateCommand returns `kubectl lock update`.
func newUpdateCommand(s Streams, flags *Flags) *cobra.Command {
	o := &updateOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "update (NAME | clusterlock/NAME) [--reason TEXT] [--level CanNotDelete|ReadOnly] [--until TIME | --for DURATION | --no-expiry] [--audit | --enforce] [--dry-run=server|client]",
		Short: "Change a Lock's or a ClusterLock's reason, level, expiry or enforcement",
		Long: `Change the Lock NAME of the namespace (-n), or the ClusterLock NAME with
clusterlock/NAME (clusterlocks/NAME, clusterlock.core.navique.com/NAME): its
reason, its level, its expiry or its enforcement. Its scope (targetRef or
selector) cannot change: delete it and create another.

The change is a JSON merge patch of the fields given, carrying the Lock's
resourceVersion as read: the API server refuses it (409 Conflict) when the Lock
has changed since, and kubectl lock update then reads it again and decides
again, so it never overwrites a change it has not seen. A change that leaves
the Lock as it is sends nothing.

A change that lowers what the Lock protects (docs/contract.md rule 18): its
level from ReadOnly to CanNotDelete, its expiry made earlier or set where it
had none, or its enforcement from Enforce to Audit, needs the RBAC verb unlock
on the Lock besides patch (the ClusterRole lockguard-unlock, which edit and
admin do not include). kubectl lock update says so before it sends the
change, and when the API server refuses it, names the role you lack. Raising
the level, extending or removing the expiry, --enforce and the reason need no
unlock.

A ClusterLock follows the same rules (docs/clusterlock.md): patch on
clusterlocks (the ClusterRole lockguard-cluster-lock), and to lower it the verb
unlock on the ClusterLock (the ClusterRole lockguard-cluster-unlock).

--dry-run=server sends the patch as a server-side dry run: the API server
(RBAC, the unlock check, validation) answers as for the real change, and
nothing is changed. --dry-run=client sends nothing but the read.

lockguard reports the new state in the Lock's status: kubectl lock show NAME
(kubectl lock show clusterlock/NAME).`,
		Example: `  # Raise a Lock to ReadOnly
  kubectl lock update stack-forge -n forge --level ReadOnly

  # Extend it by a week, and say why
  kubectl lock update stack-forge -n forge --for 168h --reason "Release week"

  # Make a Lock in Audit refuse (kubectl lock --audit)
  kubectl lock update try-db -n forge --enforce

  # Would the API server let me put it in Audit? (it needs unlock)
  kubectl lock update stack-forge -n forge --audit --dry-run=server

  # Freeze the namespace prod: raise its ClusterLock namespace-prod to ReadOnly
  kubectl lock update clusterlock/namespace-prod --level ReadOnly --reason "Change freeze"`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			change, err := o.change(cmd.Flags().Changed("reason"), clock())
			if err != nil {
				return err
			}
			cluster, name, err := updateName(args[0])
			if err != nil {
				return err
			}
			c, err := o.flags.clients()
			if err != nil {
				return err
			}
			k := c.locks()
			if cluster {
				k = c.clusterLocks()
			}
			return withRoleHint(o.update(contextOf(cmd.Context()), s, k, name, change))
		},
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "Set the Lock's reason (--reason \"\" clears it).")
	cmd.Flags().StringVar(&o.level, "level", "", "Set the Lock's level: CanNotDelete or ReadOnly (ReadOnly to CanNotDelete needs the verb unlock).")
	cmd.Flags().StringVar(&o.until, "until", "", "Let the Lock expire at this time, RFC 3339 (2026-12-07T06:00:00Z); earlier than now set, or where it had none, needs the verb unlock.")
	cmd.Flags().DurationVar(&o.forDuration, "for", 0, "Let the Lock expire this long from now (72h), rounded up to the second; earlier than now set, or where it had none, needs the verb unlock.")
	cmd.Flags().BoolVar(&o.noExpiry, "no-expiry", false, "Remove the Lock's expiry: it never expires.")
	cmd.Flags().BoolVar(&o.audit, "audit", false, "Put the Lock in Audit enforcement: it refuses nothing and records what it would refuse (needs the verb unlock).")
	cmd.Flags().BoolVar(&o.enforce, "enforce", false, "Put the Lock in Enforce enforcement: it refuses what its level refuses.")
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"server": the API server answers as for the change and changes nothing; "client": nothing is sent but the read.`)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml prints the Lock as changed.")
	return cmd
}

// change checks the flags, before anything is sent, and returns the
// change they ask for; now is when --for counts from. reasonSet says
// whether --reason was given (empty clears the reason).
func (o *updateOptions) change(reasonSet bool, now time.Time) (lockChange, error) {
	var ch lockChange
	if err := outputFormat(o.output); err != nil {
		return ch, err
	}
	if err := checkDryRun(o.dryRun); err != nil {
		return ch, err
	}
	if reasonSet {
		ch.reason = &o.reason
	}
	if o.level != "" {
		for _, l := range []lockv1alpha1.LockLevel{lockv1alpha1.LevelCanNotDelete, lockv1alpha1.LevelReadOnly} {
			if strings.EqualFold(o.level, string(l)) {
				ch.level = l
			}
		}
		if ch.level == "" {
			return ch, fmt.Errorf("--level %q: it must be CanNotDelete or ReadOnly", o.level)
		}
	}
	expiries := 0
	for _, set := range []bool{o.until != "", o.forDuration != 0, o.noExpiry} {
		if set {
			expiries++
		}
	}
	if expiries > 1 {
		return ch, errors.New("give one of --until, --for and --no-expiry")
	}
	var err error
	if ch.expiresAt, err = (&lockOptions{forDuration: o.forDuration, until: o.until}).expiry(now); err != nil {
		return ch, err
	}
	ch.noExpiry = o.noExpiry
	switch {
	case o.audit && o.enforce:
		return ch, errors.New("give --audit or --enforce, not both")
	case o.audit:
		ch.enforcement = lockv1alpha1.EnforcementAudit
	case o.enforce:
		ch.enforcement = lockv1alpha1.EnforcementEnforce
	}
	if ch == (lockChange{}) {
		return ch, errors.New("nothing to change: give at least one of --reason, --level, --until, --for, --no-expiry, --audit and --enforce " +
			"(the scope cannot change: delete the Lock and create another)")
	}
	return ch, nil
}

// apply returns spec with the change made.
func (ch lockChange) apply(spec lockv1alpha1.LockSpec) lockv1alpha1.LockSpec {
	if ch.reason != nil {
		spec.Reason = *ch.reason
	}
	if ch.level != "" {
		spec.Level = ch.level
	}
	if ch.expiresAt != nil {
		spec.ExpiresAt = ch.expiresAt
	}
	if ch.noExpiry {
		spec.ExpiresAt = nil
	}
	if ch.enforcement != "" {
		spec.Enforcement = ch.enforcement
	}
	return spec
}

// patch is the JSON merge patch of the change to a Lock read at
// resourceVersion: the fields the change sets, and the resourceVersion,
// which makes the API server refuse it (Conflict) if the Lock has
// changed since.
func (ch lockChange) patch(resourceVersion string) ([]byte, error) {
	spec := map[string]any{}
	if ch.reason != nil {
		spec["reason"] = *ch.reason
	}
	if ch.level != "" {
		spec["level"] = ch.level
	}
	if ch.expiresAt != nil {
		spec["expiresAt"] = ch.expiresAt
	}
	if ch.noExpiry {
		spec["expiresAt"] = nil
	}
	if ch.enforcement != "" {
		spec["enforcement"] = ch.enforcement
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "spec": spec})
}

// update changes the Lock name of k (a Lock of k's namespace, or a
// ClusterLock) by ch, and says what changed: reads it, sends nothing when ch
// leaves it as it is, says before sending when ch lowers it (it then
// needs the verb unlock), and sends ch's patch with the resourceVersion
// read, reading and deciding again on a Conflict (retry.DefaultRetry).
// The caller names the role a refusal lacks (withRoleHint).
func (o *updateOptions) update(ctx context.Context, s Streams, k lockKind, name string, ch lockChange) error {
	var (
		noted   []lockv1alpha1.Lowered
		current *lockv1alpha1.Lock // as read
		result  *lockv1alpha1.Lock // as changed
		changes []string
	)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if current, err = getLock(ctx, k.res, name); err != nil {
			return notFoundHint(err, k.ns)
		}
		next := ch.apply(current.Spec)
		if changes = specChanges(&current.Spec, &next); len(changes) == 0 {
			return nil
		}
		if lowered := loweredBy(&current.Spec, &next); len(lowered) > 0 && !slices.Equal(lowered, noted) {
			fmt.Fprintln(s.ErrOut, lowerNote(lowered, k, name))
			noted = lowered
		}
		if o.dryRun == dryRunClient {
			result = current.DeepCopy()
			result.Spec = next
			return nil
		}
		patch, err := ch.patch(current.ResourceVersion)
		if err != nil {
			return err
		}
		u, err := k.res.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager, DryRun: dryRunAll(o.dryRun)})
		if err != nil {
			return err
		}
		result, err = fromUnstructured(u)
		return err
	})
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w\nThe %s changed each of the %d times it was read: nothing was changed; run kubectl lock update again", err, k.kind, retry.DefaultRetry.Steps)
	case err != nil:
		return err
	case len(changes) == 0:
		result = current
	}
	if o.output != "" {
		result.ManagedFields = nil // as kubectl prints objects
		return printObject(s.Out, o.output, k.printable(result))
	}
	if len(changes) == 0 {
		fmt.Fprintf(s.Out, "%s/%s unchanged\n", k.gr, name)
		return nil
	}
	fmt.Fprintf(s.Out, "%s/%s patched%s\n", k.gr, name, dryRunSuffix(o.dryRun))
	for _, c := range changes {
		fmt.Fprintf(s.Out, "  %s\n", c)
	}
	if !dryRunning(o.dryRun) {
		fmt.Fprintf(s.Out, "lockguard reports the change in the %s's status: %s\n", k.kind, showCommand(k, name))
	}
	return nil
}

// specChanges says what differs from old to next, one field a line
// ("level: CanNotDelete -> ReadOnly"); none when nothing does. An unset
// level or enforcement is the API server's default.
func specChanges(old, next *lockv1alpha1.LockSpec) []string {
	var out []string
	if old.Reason != next.Reason {
		out = append(out, fmt.Sprintf("reason: %q -> %q", old.Reason, next.Reason))
	}
	oldL, nextL := levelOf(&lockv1alpha1.Lock{Spec: *old}), levelOf(&lockv1alpha1.Lock{Spec: *next})
	if oldL != nextL {
		out = append(out, fmt.Sprintf("level: %s -> %s", oldL, nextL))
	}
	oldE, nextE := expiresText(&lockv1alpha1.Lock{Spec: *old}), expiresText(&lockv1alpha1.Lock{Spec: *next})
	if oldE != nextE {
		out = append(out, fmt.Sprintf("expiresAt: %s -> %s", oldE, nextE))
	}
	oldF, nextF := enforcementOf(&lockv1alpha1.Lock{Spec: *old}), enforcementOf(&lockv1alpha1.Lock{Spec: *next})
	if oldF != nextF {
		out = append(out, fmt.Sprintf("enforcement: %s -> %s", oldF, nextF))
	}
	return out
}

// loweredBy returns each part of a Lock's protection that the update of
// its spec from old to next lowers, as the API server decides it
// (lockv1alpha1.Lowers, asked of one field at a time): an update that
// lowers any needs the verb unlock (docs/contract.md rule 18).
func loweredBy(old, next *lockv1alpha1.LockSpec) []lockv1alpha1.Lowered {
	var out []lockv1alpha1.Lowered
	for _, one := range []func(*lockv1alpha1.LockSpec){
		func(s *lockv1alpha1.LockSpec) { s.Level = next.Level },
		func(s *lockv1alpha1.LockSpec) { s.ExpiresAt = next.ExpiresAt },
		func(s *lockv1alpha1.LockSpec) { s.Enforcement = next.Enforcement },
	} {
		s := *old
		one(&s)
		if what, ok := lockv1alpha1.Lowers(old, &s); ok {
			out = append(out, what)
		}
	}
	return out
}
