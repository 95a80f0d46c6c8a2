package lockctl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// exceptionsResource is the LockException API's resource.
var exceptionsResource = lockv1alpha1.GroupVersion.WithResource("lockexceptions")

// defaultExceptionLifetime is how long an exception lives without --for
// or --until.
const defaultExceptionLifetime = time.Hour

// exceptionOptions are the flags of `kubectl lock exception create`.
type exceptionOptions struct {
	flags      *Flags
	reason     string
	name       string
	forD       time.Duration
	until      string
	operations []string
	locks      []string
	dryRun     string
}

// newExceptionCommand returns `kubectl lock exception` and its verbs
// create, list and delete (docs/contract.md rule 20).
func newExceptionCommand(s Streams, flags *Flags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exception",
		Short: "Create, list and revoke break-glass LockExceptions",
		Long: `A LockException lets one user (its creator) DELETE or UPDATE one locked resource
through the Locks it names until it expires (at most 24 hours), without deleting
the Locks. Creating one needs the verb break-glass on each Lock it names (the
ClusterRole lockguard-break-glass).`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newExceptionCreateCommand(s, flags), newExceptionListCommand(s, flags), newExceptionDeleteCommand(s, flags))
	return cmd
}

func newExceptionCreateCommand(s Streams, flags *Flags) *cobra.Command {
	o := &exceptionOptions{flags: flags}
	cmd := &cobra.Command{
		Use:   "create TYPE/NAME --reason REASON [--for DURATION | --until TIME] [--operations delete,update] [--lock LOCK ...]",
		Short: "Let yourself delete or update a locked resource for a while",
		Long: `Create a LockException for TYPE/NAME in its namespace: spec.user is you, as the
API server names you (a SelfSubjectReview); spec.locks are the --lock Locks or,
by default, the live enforcing Locks that cover TYPE/NAME now (its targetRef
Locks and the selector Locks that match its labels; only the ReadOnly ones for
--operations update); operations default to
delete; it expires after --for (default 1h) or at --until (RFC 3339), at most
24h ahead. It is named TYPE-NAME- plus a suffix the API server generates,
unless --name is given.`,
		Example: `  # Delete the locked Stack forge within the hour
  kubectl lock exception create stack/forge -n forge --reason "INC-42 rebuild" && kubectl delete stack forge -n forge`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := contextOf(cmd.Context())
			c, t, err := o.flags.target(ctx, args[0])
			if err != nil {
				return err
			}
			return withRoleHint(o.run(ctx, s, c, t))
		},
	}
	cmd.Flags().StringVar(&o.reason, "reason", "", "Why the glass is broken (required): kept with the exception and shown in each use's warning.")
	cmd.Flags().StringVar(&o.name, "name", "", "Name of the exception (default: generated from TYPE-NAME-).")
	cmd.Flags().DurationVar(&o.forD, "for", 0, "How long the exception lives (default 1h, at most 24h).")
	cmd.Flags().StringVar(&o.until, "until", "", "When the exception expires (RFC 3339, at most 24h ahead).")
	cmd.Flags().StringSliceVar(&o.operations, "operations", []string{"delete"}, "What it lets through: delete, update or both.")
	cmd.Flags().StringSliceVar(&o.locks, "lock", nil, "A Lock it pierces (repeatable; default: the enforcing Locks that cover TYPE/NAME now).")
	addDryRunFlag(cmd, &o.dryRun)
	return cmd
}

// expiresAt returns the exception's expiry from --for or --until at now,
// a whole second, refused when not in (now, now+MaxExceptionLifetime].
func (o *exceptionOptions) expiresAt(now time.Time) (time.Time, error) {
	var at time.Time
	switch {
	case o.forD != 0 && o.until != "":
		return at, errors.New("--for and --until cannot both be given")
	case o.until != "":
		u, err := time.Parse(time.RFC3339, o.until)
		if err != nil {
			return at, fmt.Errorf("--until %q is not an RFC 3339 time (2026-12-07T06:00:00Z): %w", o.until, err)
		}
		at = u
	case o.forD != 0:
		at = now.Add(o.forD)
	default:
		at = now.Add(defaultExceptionLifetime)
	}
	at = at.Truncate(time.Second)
	if !at.After(now) {
		return at, fmt.Errorf("the exception would expire at %s, which is not in the future", at.UTC().Format(time.RFC3339))
	}
	if at.Sub(now) > lockv1alpha1.MaxExceptionLifetime {
		return at, fmt.Errorf("the exception would expire at %s, %s from now: a LockException lives at most %s",
			at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second), lockv1alpha1.MaxExceptionLifetime)
	}
	return at, nil
}

// ops parses --operations (delete, update, any case) into the spec's.
func (o *exceptionOptions) ops() ([]lockv1alpha1.ExceptionOperation, error) {
	var out []lockv1alpha1.ExceptionOperation
	for _, s := range o.operations {
		op := lockv1alpha1.ExceptionOperation(strings.ToUpper(strings.TrimSpace(s)))
		if op != lockv1alpha1.ExceptionDelete && op != lockv1alpha1.ExceptionUpdate {
			return nil, fmt.Errorf("--operations %q: an exception lets through delete and update only", s)
		}
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--operations is empty: give delete, update or both")
	}
	return out, nil
}

// build returns the LockException o asks for on t, checking the flags
// before asking the API server anything.
func (o *exceptionOptions) build(ctx context.Context, c *clients, t target) (*lockv1alpha1.LockException, error) {
	if strings.TrimSpace(o.reason) == "" {
		return nil, errors.New("--reason is required: say why the glass is broken")
	}
	if err := checkDryRun(o.dryRun); err != nil {
		return nil, err
	}
	now := clock()
	at, err := o.expiresAt(now)
	if err != nil {
		return nil, err
	}
	ops, err := o.ops()
	if err != nil {
		return nil, err
	}
	locks := slices.Clone(o.locks)
	if len(locks) == 0 {
		readOnly := !slices.Contains(ops, lockv1alpha1.ExceptionDelete)
		if locks, err = enforcingLocks(ctx, c, t, now, readOnly); err != nil {
			return nil, err
		}
		if len(locks) == 0 {
			return nil, fmt.Errorf("no enforcing Lock covers %s in namespace %s: there is nothing to break (name Locks with --lock)", t, c.namespace)
		}
	}
	user, err := selfUser(ctx, c)
	if err != nil {
		return nil, err
	}
	e := &lockv1alpha1.LockException{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "LockException"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: o.name},
		Spec: lockv1alpha1.LockExceptionSpec{
			TargetRef:  lockv1alpha1.TargetReference{APIVersion: t.mapping.GroupVersionKind.GroupVersion().String(), Kind: t.kind(), Name: t.name},
			Locks:      locks,
			Operations: ops,
			Reason:     o.reason,
			User:       user,
			ExpiresAt:  metav1.NewTime(at),
		},
	}
	if o.name == "" {
		e.GenerateName = strings.ToLower(t.kind()) + "-" + t.name + "-"
	}
	return e, nil
}

func (o *exceptionOptions) run(ctx context.Context, s Streams, c *clients, t target) error {
	e, err := o.build(ctx, c, t)
	if err != nil {
		return err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		return err
	}
	got := &unstructured.Unstructured{Object: obj}
	if o.dryRun != dryRunClient {
		got, err = c.dynamic.Resource(exceptionsResource).Namespace(c.namespace).Create(ctx, got, metav1.CreateOptions{DryRun: dryRunAll(o.dryRun)})
		if err != nil {
			return err
		}
	}
	name := got.GetName()
	if name == "" {
		name = got.GetGenerateName() + "<generated>" // a client dry run: the API server would name it
	}
	fmt.Fprintf(s.Out, "lockexception.%s/%s created%s: %s may %s %s through Lock(s) %v until %s\n",
		lockv1alpha1.Group, name, dryRunSuffix(o.dryRun), e.Spec.User, opsString(e.Spec.Operations), t, e.Spec.Locks, e.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	return nil
}

// enforcingLocks returns the names of the Locks that cover t (as it is
// now, with its labels) and enforce at now, only the ReadOnly ones when
// readOnly (an UPDATE-only exception: the others refuse no update),
// sorted: those a request on t is refused by, so those an exception must
// name.
func enforcingLocks(ctx context.Context, c *clients, t target, now time.Time, readOnly bool) ([]string, error) {
	all, err := listLocks(ctx, c.dynamic.Resource(locksResource).Namespace(c.namespace))
	if err != nil {
		return nil, err
	}
	var labels map[string]string
	u, err := c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{})
	switch {
	case err == nil:
		labels = u.GetLabels()
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	gk := t.mapping.GroupVersionKind.GroupKind()
	o := lockv1alpha1.Object{Namespace: c.namespace, Group: gk.Group, Kind: gk.Kind, Name: t.name, Labels: labels}
	var names []string
	for i := range all {
		if all[i].Enforcing(now) && all[i].Covers(o, now) && (!readOnly || all[i].Spec.Level == lockv1alpha1.LevelReadOnly) {
			names = append(names, all[i].Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// selfUser returns the caller's username as the API server authenticates
// it (a SelfSubjectReview): the only spec.user lockguard accepts.
func selfUser(ctx context.Context, c *clients) (string, error) {
	review := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
	got, err := c.dynamic.Resource(selfSubjectReviews).Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who you are (SelfSubjectReview): %w", err)
	}
	user, _, _ := unstructured.NestedString(got.Object, "status", "userInfo", "username")
	if user == "" {
		return "", errors.New("the API server's SelfSubjectReview names no username: a LockException needs one")
	}
	return user, nil
}

// opsString spells operations for people: delete, update.
func opsString(ops []lockv1alpha1.ExceptionOperation) string {
	s := make([]string, len(ops))
	for i, op := range ops {
		s[i] = strings.ToLower(string(op))
	}
	return strings.Join(s, ",")
}

func newExceptionListCommand(s Streams, flags *Flags) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list [-A]",
		Short: "List the LockExceptions of the namespace (or of all with -A)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.clients()
			if err != nil {
				return err
			}
			return withRoleHint(listExceptions(contextOf(cmd.Context()), s, c, all))
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the exceptions of every namespace.")
	return cmd
}

// listExceptions prints the exceptions of c's namespace (or all) as a
// table, sorted by namespace and name, each expired or not at clock().
func listExceptions(ctx context.Context, s Streams, c *clients, all bool) error {
	res := c.dynamic.Resource(exceptionsResource)
	var ri = res.Namespace(c.namespace)
	if all {
		ri = res
	}
	list, err := ri.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	items := make([]lockv1alpha1.LockException, len(list.Items))
	for i := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &items[i]); err != nil {
			return err
		}
	}
	if len(items) == 0 {
		where := "namespace " + c.namespace
		if all {
			where = "any namespace"
		}
		fmt.Fprintf(s.ErrOut, "No LockExceptions found in %s.\n", where)
		return nil
	}
	slices.SortFunc(items, func(a, b lockv1alpha1.LockException) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	now := clock()
	tw := tabwriter.NewWriter(s.Out, 0, 8, 3, ' ', 0)
	if all {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tTARGET\tOPERATIONS\tUSER\tEXPIRES\tREASON")
	for i := range items {
		e := &items[i]
		expires := e.Spec.ExpiresAt.UTC().Format(time.RFC3339)
		if e.ExpiredAt(now) {
			expires = "expired " + expires
		}
		if all {
			fmt.Fprintf(tw, "%s\t", e.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.Name, e.Spec.TargetRef.Kind, e.Spec.TargetRef.Name,
			opsString(e.Spec.Operations), e.Spec.User, expires, oneLine(e.Spec.Reason))
	}
	return tw.Flush()
}

func newExceptionDeleteCommand(s Streams, flags *Flags) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Revoke a LockException: it lets nothing through any more",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := flags.clients()
			if err != nil {
				return err
			}
			return withRoleHint(deleteException(contextOf(cmd.Context()), s, c, args[0]))
		},
	}
}

// deleteException deletes the exception name of c's namespace.
func deleteException(ctx context.Context, s Streams, c *clients, name string) error {
	if err := c.dynamic.Resource(exceptionsResource).Namespace(c.namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, "lockexception.%s/%s deleted\n", lockv1alpha1.Group, name)
	return nil
}
