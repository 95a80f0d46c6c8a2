package manager

import "github.com/navique/lockguard/internal/peers"

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch

// CreateEntryOptions name lockguard's ValidatingWebhookConfiguration and
// say where its Lock-create entry (peers.CreateEntryName) must send Lock
// creates. With the peer protocol, a replica decides from its cache only
// while it sees that entry as the chart renders it (peers.CheckCreateEntry):
// a Lock create that bypasses lockguard is announced to no replica.
type CreateEntryOptions struct {
	// Configuration is the ValidatingWebhookConfiguration's name. Required
	// with the peer protocol: without it lockguard does not start.
	Configuration string
	// Want is where the entry must send the reviews: the webhook Service
	// (in the chart, --peer-service in --leader-election-namespace, at
	// --webhook-service-port), or a URL (local runs); its path is
	// webhook.CreatePath, whatever Want.Path says.
	Want peers.Expectation
}
