package lockctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/webhook"
)

// The update verdict for the user who asks (docs/contract.md rule 16,
// issue 40): whether lockguard refuses that user's update of a resource a
// ReadOnly Lock covers is decided by lockguard's update guard
// (webhook/update.go) with the user's identity and the installation's
// exemptions, which live in lockguard's flags and in the update entry's
// matchConditions, neither of which the plugin can read with a user's
// permissions. So why asks the API server: a server-side dry-run PATCH of
// the resource's metadata (it changes nothing, and lockguard records
// nothing for a dry run) goes through the user's RBAC, the update entry
// (its objectSelector and matchConditions) and the update guard's own
// decision, exactly as the user's real update would. Where no update entry
// is rendered (guards.readOnly.enabled=false, mode policy), it is allowed,
// as the real update would be.

// probeAnnotation is the annotation the dry-run PATCH sets: a change of
// the resource's metadata, which a ReadOnly Lock freezes
// (lockv1alpha1.FrozenChange).
const probeAnnotation = "kubectl-lock.core.navique.com/why"

// updateEntryName is the name of the chart's update entry
// (update.lockguard.core.navique.com), as the API server names it when it
// cannot call it.
const updateEntryName = "update.lockguard.core.navique.com"

// clusterUpdateEntryName is the name of the chart's cluster-update entry,
// which sends the updates of ReadOnly ClusterLocks' targets.
const clusterUpdateEntryName = "cluster-update.lockguard.core.navique.com"

// clusterUpdateDenialPart is in every refusal of lockguard's cluster
// update guard (webhook.ClusterUpdateDenialMessage, the one source of it).
var clusterUpdateDenialPart = func() string {
	_, rest, _ := strings.Cut(webhook.ClusterUpdateDenialMessage("K", "n", nil, ""), "K n")
	before, _, _ := strings.Cut(rest, "[")
	return before
}()

// updateDenialPrefix is how a refusal of lockguard's update guard begins
// (webhook.UpdateDenialMessage, the one source of it).
var updateDenialPrefix, _, _ = strings.Cut(webhook.UpdateDenialMessage(nil, ""), "[")

// probeUpdate sends, as the plugin's user, a server-side dry-run PATCH of
// obj's metadata, and records the API server's answer in u, with who the
// user is (a SelfSubjectReview; "" when the API server does not tell).
func probeUpdate(ctx context.Context, c *clients, resource schema.GroupVersionResource, obj *unstructured.Unstructured, u *whyUpdate) error {
	value := "probe"
	if obj.GetAnnotations()[probeAnnotation] == value {
		value = "probe-again"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{probeAnnotation: value}}})
	if err != nil {
		return err
	}
	_, err = c.dynamic.Resource(resource).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	u.answer(whoAmI(ctx, c), err)
	return nil
}

// selfSubjectReviews is the resource of SelfSubjectReview
// (authentication.k8s.io/v1, Kubernetes 1.28+).
var selfSubjectReviews = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "selfsubjectreviews"}

// whoAmI returns the username the API server authenticates the plugin's
// requests as, or "" when it cannot be read.
func whoAmI(ctx context.Context, c *clients) string {
	review := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}}
	got, err := c.dynamic.Resource(selfSubjectReviews).Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	user, _, _ := unstructured.NestedString(got.Object, "status", "userInfo", "username")
	return user
}

// answer records the API server's answer, err, to user's dry-run PATCH of
// the resource u is about, and says what it means.
func (u *whyUpdate) answer(user string, err error) {
	u.User, u.Asked = user, true
	who, whose := "you", "your"
	if user != "" {
		who, whose = user, user+"'s"
	}
	names := make([]string, 0, len(u.Locks))
	for _, l := range u.Locks {
		names = append(names, l.Name)
	}
	probe := fmt.Sprintf("a server-side dry-run PATCH of its metadata as %s", who)
	noun := u.noun
	if noun == "" {
		noun = "Lock"
	}
	switch {
	case err == nil:
		u.Answer = "allowed"
		switch {
		case u.GuardDisabled:
			u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it, but lockguard serves no update guard (the chart's mode policy or guards.readOnly.enabled=false): "+
				"%s was allowed; deleting it is still denied", noun, names, probe)
		case u.InForce:
			u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it and the freeze is in force, but lockguard does not refuse %s updates: %s was allowed "+
				"(a principal the installation exempts, such as the navique operator's ServiceAccount by default, or no update guard serves)", noun, names, whose, probe)
		default:
			u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it, but the freeze is not in force yet (their ReadOnly condition is Pending): %s was allowed", noun, names, probe)
		}
	case strings.Contains(err.Error(), updateDenialPrefix), strings.Contains(err.Error(), clusterUpdateDenialPart):
		u.Refused, u.Answer = true, err.Error()
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it and lockguard refuses %s updates and patches of its spec and metadata (%s was denied by lockguard's update guard); "+
			"its status subresource stays writable", noun, names, whose, probe)
	case strings.Contains(err.Error(), fmt.Sprintf("failed calling webhook %q", updateEntryName)),
		strings.Contains(err.Error(), fmt.Sprintf("failed calling webhook %q", clusterUpdateEntryName)):
		u.Refused, u.Answer = true, err.Error()
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it, and lockguard does not answer now: the API server refuses %s updates of its spec and metadata "+
			"(failurePolicy Fail) until it does (%s failed)", noun, names, whose, probe)
	default:
		u.Answer = err.Error()
		u.Message = fmt.Sprintf("ReadOnly %s(s) %v cover it; whether lockguard refuses %s updates is not known: %s failed before lockguard decided", noun, names, whose, probe)
	}
}
