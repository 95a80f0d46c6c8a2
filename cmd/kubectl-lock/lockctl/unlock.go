package lockctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// unlockOptions are the flags of `kubectl unlock TYPE/NAME`.
type unlockOptions struct {
	flags   Flags
	yes     bool
	timeout time.Duration
	// dryRun is --dry-run: server sends the deletes as dry runs, client
	// sends none; either way nothing is asked or waited for.
	dryRun string
}

// NewUnlockCommand returns `kubectl unlock` (the kubectl-unlock binary):
// it shows the Locks that protect TYPE/NAME, deletes them once confirmed,
// and waits until lockguard no longer denies the resource's deletion.
func NewUnlockCommand(s Streams) *cobra.Command {
	o := &unlockOptions{}
	cmd := &cobra.Command{
		Use:   "unlock TYPE/NAME [--yes]",
		Short: "Delete the Locks that protect a core.navique.com resource",
		Long: `Show the Locks that protect TYPE/NAME in its namespace, delete them (after asking,
unless --yes), and wait until lockguard allows the resource's deletion (checked
with a server-side dry-run DELETE, which deletes nothing).

It deletes only Locks that target TYPE/NAME (spec.targetRef), never a selector
Lock (kubectl lock --selector or --all), which protects other resources too.
When selector Locks cover TYPE/NAME, it names them, deletes nothing and fails:
delete them by name (kubectl lock unlock NAME, or kubectl delete lock NAME) if
nothing else needs them, then run kubectl unlock again.

Deleting a Lock needs the RBAC verb unlock on it besides delete (the
ClusterRole lockguard-unlock, which edit and admin do not include): when it
is refused, kubectl unlock says which role you lack.

--dry-run=server sends each delete as a server-side dry run: RBAC and the
unlock check answer as for the real delete, and the Locks stay; --dry-run=client
sends no delete. Neither asks or waits.

To delete one Lock by name, a selector Lock too: kubectl lock unlock NAME.

For a cluster-scoped TYPE/NAME (namespace/prod, crd/NAME, clusterrole/NAME...)
it deletes the ClusterLocks that target it (the ClusterRole
lockguard-cluster-unlock).

TYPE is resolved as kubectl does (stack, stacks, Stack or stacks.core.navique.com;
pvc or statefulsets.apps for kinds of other groups).`,
		Example: `  # Lift the protection of the Stack forge, after confirming
  kubectl unlock stack/forge -n forge

  # Without the question, then delete the Stack
  kubectl unlock stack/forge -n forge --yes && kubectl delete stack forge -n forge

  # Lift the ClusterLocks of namespace prod
  kubectl unlock namespace/prod --yes

  # May I? (the API server answers; nothing is deleted)
  kubectl unlock stack/forge -n forge --dry-run=server`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withRoleHint(o.run(contextOf(cmd.Context()), s, args[0]))
		},
	}
	pluginCommand(cmd, "kubectl unlock", s, &o.flags)
	cmd.Flags().BoolVarP(&o.yes, "yes", "y", false, "Delete the Locks without asking.")
	cmd.Flags().DurationVar(&o.timeout, "timeout", defaultTimeout, "How long to wait for the Locks to be gone and the deletion allowed.")
	addDryRunFlag(cmd, &o.dryRun)
	return cmd
}

func (o *unlockOptions) run(ctx context.Context, s Streams, arg string) error {
	if err := checkDryRun(o.dryRun); err != nil {
		return err
	}
	c, t, err := o.flags.target(ctx, arg)
	if cs := (clusterScoped{}); errors.As(err, &cs) {
		return o.runCluster(ctx, s, c, cs.t)
	}
	if err != nil {
		return err
	}
	locks := c.dynamic.Resource(locksResource).Namespace(c.namespace)
	all, err := listLocks(ctx, locks)
	if err != nil {
		return err
	}
	protecting := targeting(all, t)
	selectors, err := coveringSelectors(ctx, c, t, all)
	if err != nil {
		return err
	}
	if len(selectors) > 0 {
		return refuseSelectors(s, c.locks(), t, selectors, protecting)
	}
	if len(protecting) == 0 {
		fmt.Fprintf(s.ErrOut, "No Locks protect %s in namespace %s.\n", t, c.namespace)
		return nil
	}
	return o.unlock(ctx, s, c.locks(), protecting, c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace), t)
}

// targeting returns the Locks (or ClusterLocks) of all that name t by
// targetRef and are not being deleted.
func targeting(all []lockv1alpha1.Lock, t target) []lockv1alpha1.Lock {
	var out []lockv1alpha1.Lock
	for i := range all {
		if targets(&all[i], t) && all[i].DeletionTimestamp == nil {
			out = append(out, all[i])
		}
	}
	return out
}

// unlock shows the Locks or ClusterLocks (k) protecting t, deletes them
// once confirmed and waits until a dry-run DELETE of t (through res) is
// allowed.
func (o *unlockOptions) unlock(ctx context.Context, s Streams, k lockKind, protecting []lockv1alpha1.Lock, res dynamic.ResourceInterface, t target) error {
	sortLocks(protecting)
	fmt.Fprintf(s.Out, "%ss protecting %s%s:\n", k.kind, t, inNamespace(k.ns))
	tw := tabwriter.NewWriter(s.Out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSTATUS\tREASON")
	for i := range protecting {
		l := &protecting[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Name, lockStatus(l), reasonCell(l.Spec.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := confirmDelete(s, o.yes || dryRunning(o.dryRun), len(protecting), k.kind); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	names, err := deleteLocks(ctx, s, k, protecting, o.dryRun)
	if err != nil || dryRunning(o.dryRun) {
		return err
	}
	return waitDeletable(ctx, s, res, t, k.ns, names, true)
}

// confirmDelete asks whether to delete n Locks (or ClusterLocks: kind), unless skip (--yes, or a
// dry run, which deletes nothing), and returns an error unless the
// answer is yes.
func confirmDelete(s Streams, skip bool, n int, kind string) error {
	if skip {
		return nil
	}
	ok, err := confirm(s, fmt.Sprintf("Delete %d %s(s)? [y/N]: ", n, kind))
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not confirmed: no %s deleted (--yes skips the question)", kind)
	}
	return nil
}

// deleteLocks deletes ls through locks, each with a UID precondition (a
// Lock of the same name created since it was read is left alone), and
// prints a line for each; under --dry-run dryRun, server sends the
// deletes as dry runs and client sends none. For real, it returns once
// they are gone. It returns their names. The caller names the role a
// refusal lacks (withRoleHint).
func deleteLocks(ctx context.Context, s Streams, k lockKind, ls []lockv1alpha1.Lock, dryRun string) ([]string, error) {
	locks := k.res
	names := make([]string, 0, len(ls))
	for i := range ls {
		l := &ls[i]
		if dryRun != dryRunClient {
			err := locks.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID}, DryRun: dryRunAll(dryRun)})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
		fmt.Fprintf(s.Out, "%s/%s deleted%s\n", k.gr, l.Name, dryRunSuffix(dryRun))
		names = append(names, l.Name)
	}
	if dryRunning(dryRun) {
		return names, nil
	}
	for i := range ls {
		if err := waitGone(ctx, k, &ls[i]); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// coveringSelectors returns the selector Locks among locks that cover t
// as it is now (Lock.Covers, with its labels: the rule lockguard's guards
// decide with), sorted; none when t does not exist.
func coveringSelectors(ctx context.Context, c *clients, t target, locks []lockv1alpha1.Lock) ([]lockv1alpha1.Lock, error) {
	obj, err := c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	gk := t.mapping.GroupVersionKind.GroupKind()
	o := lockv1alpha1.Object{Namespace: c.namespace, Group: gk.Group, Kind: gk.Kind, Name: t.name, Labels: obj.GetLabels()}
	var out []lockv1alpha1.Lock
	now := clock()
	for i := range locks {
		if locks[i].HasSelector() && locks[i].Covers(o, now) {
			out = append(out, locks[i])
		}
	}
	sortLocks(out)
	return out, nil
}

// refuseSelectors prints the selector Locks of k (a namespace's Locks,
// or the ClusterLocks) that cover t and returns the error that says
// kubectl unlock deletes none of them, nor those that name t
// (protecting), and how to proceed.
func refuseSelectors(s Streams, k lockKind, t target, selectors, protecting []lockv1alpha1.Lock) error {
	what, verb, where, del := "resources", "target", " in namespace "+k.ns, "kubectl delete lock %s -n "+k.ns
	if k.ns == "" {
		what, verb, where, del = "objects", "name", "", "kubectl delete clusterlock %s"
	}
	fmt.Fprintf(s.Out, "Selector %ss covering %s%s (they protect other %s too):\n", k.kind, t, where, what)
	if err := printScopeTable(s.Out, selectors); err != nil {
		return err
	}
	names := make([]string, 0, len(selectors))
	for i := range selectors {
		names = append(names, selectors[i].Name)
	}
	kept := ""
	if len(protecting) > 0 {
		naming := make([]string, 0, len(protecting))
		for i := range protecting {
			naming = append(naming, protecting[i].Name)
		}
		slices.Sort(naming)
		kept = fmt.Sprintf(", not even the %s(s) %v that %s it", k.kind, naming, verb)
	}
	return fmt.Errorf("no %s deleted%s: kubectl unlock never deletes a selector %s, which protects other %s too; "+
		"if nothing else needs them, delete the selector %s(s) by name (%s), then run kubectl unlock again",
		k.kind, kept, k.kind, what, k.kind, fmt.Sprintf(del, strings.Join(names, " ")))
}

// printScopeTable prints ls as a table: each Lock's name, scope, level,
// status, how many resources it protects, and reason.
func printScopeTable(w io.Writer, ls []lockv1alpha1.Lock) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tSCOPE\tLEVEL\tSTATUS\tPROTECTED\tREASON")
	for i := range ls {
		l := &ls[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, scopeString(l), levelString(l), lockStatus(l), protectedCount(l), reasonCell(l.Spec.Reason))
	}
	return tw.Flush()
}

// confirm asks a yes/no question on the streams; only y or yes is yes.
func confirm(s Streams, question string) (bool, error) {
	fmt.Fprint(s.Out, question)
	line, err := bufio.NewReader(s.In).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	if errors.Is(err, io.EOF) {
		fmt.Fprintln(s.Out)
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}

// waitGone waits until the Lock (this UID) no longer exists.
func waitGone(ctx context.Context, k lockKind, l *lockv1alpha1.Lock) error {
	for {
		cur, err := getLock(ctx, k.res, l.Name)
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != l.UID) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s/%s is still there: %w", k.gr, l.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDeletable waits until a server-side dry-run DELETE of the target is
// no longer denied by the deleted Locks: lockguard's cache drops a deleted
// Lock a moment after the API server. A denial by other Locks (a cascade
// to locked dependents, say) is reported at once: an error when
// othersFail (kubectl unlock meant to unlock the target), a line saying
// which Locks still protect it otherwise (kubectl lock unlock deleted one
// Lock). A dry run refused for another reason (RBAC) only means it could
// not be checked.
func waitDeletable(ctx context.Context, s Streams, res dynamic.ResourceInterface, t target, ns string, deleted []string, othersFail bool) error {
	for {
		err := res.Delete(ctx, t.name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil:
			fmt.Fprintf(s.Out, "%s%s is unlocked: it can be deleted\n", t, inNamespace(ns))
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("the Locks are deleted, but deleting %s is still denied: %w", t, err)
		}
		blocking := deniedBy(err)
		if blocking == nil {
			fmt.Fprintf(s.ErrOut, "Warning: could not check that %s can be deleted now: %v\n", t, err)
			return nil
		}
		if !slices.ContainsFunc(blocking, func(n string) bool { return slices.Contains(deleted, n) }) {
			if !othersFail {
				fmt.Fprintf(s.Out, "%s%s is still protected by Lock(s) %v\n", t, inNamespace(ns), blocking)
				return nil
			}
			return fmt.Errorf("the Locks are deleted, but deleting %s is still denied: %w", t, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// deniedBy returns the Lock names of a lockguard denial ("... Lock(s)
// [a b]; ..."), or nil when err is not one.
func deniedBy(err error) []string {
	if !apierrors.IsForbidden(err) {
		return nil
	}
	return lockNamesIn(err.Error())
}
