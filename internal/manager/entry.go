package manager

import (
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/navique/lockguard/internal/peers"
)

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
	// --webhook-service-port), or a URL (local runs).
	Want peers.Expectation
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch

// watchCreateEntry makes t require the Lock-create entry and adds the
// watch that reports it to mgr, its metric to o's registerer.
func watchCreateEntry(mgr ctrl.Manager, cfg *rest.Config, t *peers.Tracker, o Options) error {
	eo := o.CreateEntry
	if eo.Configuration == "" {
		return errors.New("the peer protocol needs the name of lockguard's ValidatingWebhookConfiguration (--webhook-configuration): " +
			"a replica decides from its cache only while the Lock-create entry there sends every Lock create to lockguard")
	}
	if eo.Want.URL == "" && (eo.Want.ServiceName == "" || eo.Want.ServiceNamespace == "") {
		return errors.New("checking the Lock-create webhook entry needs the webhook Service (--peer-service and --leader-election-namespace) or --webhook-url")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w := peers.NewEntryWatch(cs, eo.Configuration, eo.Want, t)
	reg := o.Registerer
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	if err := w.Register(reg); err != nil {
		return fmt.Errorf("registering the create entry's metric: %w", err)
	}
	return mgr.Add(w)
}
