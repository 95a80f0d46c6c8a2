package peers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// CreateEntryName is the name of the Lock-create entry in lockguard's
// ValidatingWebhookConfiguration (the chart's
// templates/validatingwebhookconfiguration.yaml).
const CreateEntryName = "create.lockguard.core.navique.com"

// Expectation is where the Lock-create entry must send the reviews: the
// webhook Service (ServiceNamespace/ServiceName at ServicePort), or, when
// URL is set, URL (scheme and host, as the e2e harness renders the chart
// for local replicas), in both cases at Path.
type Expectation struct {
	// ServiceNamespace and ServiceName name the webhook Service.
	ServiceNamespace, ServiceName string
	// ServicePort is the Service's port; 0 means 443, the API server's
	// default.
	ServicePort int32
	// URL, when set, replaces the Service: the entry must call
	// URL+Path, e.g. https://127.0.0.1:9443/validate-lock-create.
	URL string
	// Path is where lockguard admits Lock creates (webhook.CreatePath).
	Path string
}

// String describes e for logs and errors.
func (e Expectation) String() string {
	if e.URL != "" {
		return "url " + e.URL + e.Path
	}
	return fmt.Sprintf("service %s/%s port %d path %s", e.ServiceNamespace, e.ServiceName, e.port(), e.Path)
}

func (e Expectation) port() int32 {
	if e.ServicePort == 0 {
		return 443
	}
	return e.ServicePort
}

// CheckCreateEntry returns nil when vwc holds the Lock-create entry
// (CreateEntryName) in a form that sends every Lock CREATE to lockguard
// with failurePolicy Fail, and otherwise an error naming what differs:
//
//   - a rule covers operation CREATE (or "*") of resource locks (or "*",
//     "*/*") in group core.navique.com (or "*") at scope Namespaced (or
//     "*", or unset) in apiVersions "*": a list of versions is refused,
//     even every version served today, since a version added later would
//     be served without the entry;
//   - failurePolicy is Fail (unset is Fail, v1's default);
//   - objectSelector and namespaceSelector are unset or empty, and there
//     are no matchConditions;
//   - the client configuration is e's, its path included (the caBundle is not checked:
//     cert-manager rotates it, and a wrong one fails the create closed).
//
// matchPolicy, sideEffects, timeoutSeconds and admissionReviewVersions are
// not checked: none of them lets a create through without lockguard. A
// nil vwc is a configuration that does not exist.
func CheckCreateEntry(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, e Expectation) error {
	if vwc == nil {
		return errors.New("the ValidatingWebhookConfiguration does not exist")
	}
	i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == CreateEntryName })
	if i < 0 {
		return fmt.Errorf("ValidatingWebhookConfiguration %s has no webhook %s", vwc.Name, CreateEntryName)
	}
	w := vwc.Webhooks[i]
	var diffs []string
	if err := coversLockCreate(w.Rules); err != nil {
		diffs = append(diffs, err.Error())
	}
	if w.FailurePolicy != nil && *w.FailurePolicy != admissionregistrationv1.Fail {
		diffs = append(diffs, fmt.Sprintf("failurePolicy is %s, not Fail", *w.FailurePolicy))
	}
	if s := w.ObjectSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		diffs = append(diffs, "objectSelector is not empty")
	}
	if s := w.NamespaceSelector; s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0) {
		diffs = append(diffs, "namespaceSelector is not empty")
	}
	if len(w.MatchConditions) > 0 {
		names := make([]string, 0, len(w.MatchConditions))
		for _, c := range w.MatchConditions {
			names = append(names, c.Name)
		}
		diffs = append(diffs, fmt.Sprintf("matchConditions %v are set", names))
	}
	if err := callsLockguard(w.ClientConfig, e); err != nil {
		diffs = append(diffs, err.Error())
	}
	if len(diffs) > 0 {
		return fmt.Errorf("webhook %s of ValidatingWebhookConfiguration %s: %s", CreateEntryName, vwc.Name, strings.Join(diffs, "; "))
	}
	return nil
}

// coversLockCreate checks that one of rules matches every Lock CREATE.
func coversLockCreate(rules []admissionregistrationv1.RuleWithOperations) error {
	var why []string
	for i, r := range rules {
		var miss []string
		if !slices.Contains(r.APIGroups, lockv1alpha1.Group) && !slices.Contains(r.APIGroups, "*") {
			miss = append(miss, fmt.Sprintf("apiGroups %q lack %s", r.APIGroups, lockv1alpha1.Group))
		}
		if !slices.Contains(r.APIVersions, "*") {
			miss = append(miss, fmt.Sprintf("apiVersions %q are not [\"*\"]", r.APIVersions))
		}
		if !slices.Contains(r.Operations, admissionregistrationv1.Create) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			miss = append(miss, fmt.Sprintf("operations %q lack CREATE", r.Operations))
		}
		if !slices.Contains(r.Resources, "locks") && !slices.Contains(r.Resources, "*") && !slices.Contains(r.Resources, "*/*") {
			miss = append(miss, fmt.Sprintf("resources %q lack locks", r.Resources))
		}
		if s := r.Scope; s != nil && *s != admissionregistrationv1.AllScopes && *s != admissionregistrationv1.NamespacedScope {
			miss = append(miss, fmt.Sprintf("scope is %s", *s))
		}
		if len(miss) == 0 {
			return nil
		}
		why = append(why, fmt.Sprintf("rule %d: %s", i, strings.Join(miss, ", ")))
	}
	if len(why) == 0 {
		return errors.New("no rule matches Lock CREATEs: it has no rules")
	}
	return fmt.Errorf("no rule matches every Lock CREATE (%s)", strings.Join(why, "; "))
}

// callsLockguard checks that cc sends the reviews where e says.
func callsLockguard(cc admissionregistrationv1.WebhookClientConfig, e Expectation) error {
	if e.URL != "" {
		want := e.URL + e.Path
		switch {
		case cc.Service != nil:
			return fmt.Errorf("clientConfig calls service %s/%s, not url %s", cc.Service.Namespace, cc.Service.Name, want)
		case cc.URL == nil || *cc.URL != want:
			return fmt.Errorf("clientConfig url is %s, not %s", deref(cc.URL), want)
		}
		return nil
	}
	s := cc.Service
	if s == nil {
		return fmt.Errorf("clientConfig calls url %s, not %s", deref(cc.URL), e)
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	if s.Namespace != e.ServiceNamespace || s.Name != e.ServiceName || port != e.port() || deref(s.Path) != e.Path {
		return fmt.Errorf("clientConfig calls service %s/%s port %d path %s, not %s", s.Namespace, s.Name, port, deref(s.Path), e)
	}
	return nil
}

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}
