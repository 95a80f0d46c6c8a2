package lockctl

import (
	"fmt"
	"strings"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// kubectl lock update on a ClusterLock (docs/clusterlock.md): update
// clusterlock/NAME reads and patches the ClusterLock NAME as a Lock of no
// namespace (lockKind clusterLocks), with the same change, the same
// resourceVersion precondition and the same note before a change that
// lowers it (lockv1alpha1.Lowers, which the chart's cluster-unlock policy
// and webhook apply to ClusterLocks too: contract rule 22).

// updateName parses kubectl lock update's argument: NAME, a Lock of the
// namespace, or clusterlock/NAME (as kubectl lock show spells it:
// isClusterLockType), a ClusterLock; cluster says which. Any other
// TYPE/NAME is an error, nothing sent.
func updateName(arg string) (cluster bool, name string, err error) {
	typ, rest, ok := strings.Cut(arg, "/")
	switch {
	case !ok:
		return false, arg, nil
	case isClusterLockType(typ) && rest != "" && !strings.Contains(rest, "/"):
		return true, rest, nil
	}
	return false, "", fmt.Errorf("%q: kubectl lock update takes NAME, a Lock of the namespace (-n), or clusterlock/NAME, a ClusterLock", arg)
}

// lowerNote is what kubectl lock update says before it sends a change
// that lowers the parts lowered of the Lock (or ClusterLock) name of k.
func lowerNote(lowered []lockv1alpha1.Lowered, k lockKind, name string) string {
	parts := make([]string, 0, len(lowered))
	for _, l := range lowered {
		parts = append(parts, "the "+string(l))
	}
	what := parts[len(parts)-1]
	if len(parts) > 1 {
		what = strings.Join(parts[:len(parts)-1], ", ") + " and " + what
	}
	if k.ns == "" {
		return fmt.Sprintf("Note: this lowers %s of ClusterLock %s, which needs the verb %q on it besides patch (the ClusterRole %s)",
			what, name, lockv1alpha1.UnlockVerb, lockv1alpha1.ClusterUnlockRole)
	}
	return fmt.Sprintf("Note: this lowers %s of Lock %s/%s, which needs the verb %q on it besides patch (the ClusterRole %s, which edit and admin do not include)",
		what, k.ns, name, lockv1alpha1.UnlockVerb, lockv1alpha1.UnlockRole)
}

// showCommand is the kubectl lock show command of the Lock name of k.
func showCommand(k lockKind, name string) string {
	if k.ns == "" {
		return "kubectl lock show clusterlock/" + name
	}
	return fmt.Sprintf("kubectl lock show %s -n %s", name, k.ns)
}

// printable is l as -o prints it: the ClusterLock it was read from, for
// k's ClusterLocks; the Lock otherwise.
func (k lockKind) printable(l *lockv1alpha1.Lock) any {
	if k.ns == "" {
		return asClusterLock(l)
	}
	return l
}
