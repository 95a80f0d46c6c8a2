package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// Static is a fixed list of the other replicas.
type Static []string

// Run calls set once.
func (s Static) Run(ctx context.Context, set func([]string)) error {
	set(s)
	<-ctx.Done()
	return nil
}

// File lists the other replicas in a file, one host:port per line (blank
// lines and those starting with # ignored), read every second: for local
// runs, where a harness plays the part of the EndpointSlices.
type File struct {
	Path string
	// Self is left out of the list.
	Self string
}

// Run reads the file every second and calls set when it changes. A file
// that cannot be read keeps the last list.
func (f File) Run(ctx context.Context, set func([]string)) error {
	var last []string
	known := false
	for {
		if data, err := os.ReadFile(f.Path); err == nil {
			var peers []string
			for _, line := range strings.Split(string(data), "\n") {
				line = strings.TrimSpace(line)
				if line != "" && !strings.HasPrefix(line, "#") && line != f.Self {
					peers = append(peers, line)
				}
			}
			slices.Sort(peers)
			if !known || !slices.Equal(peers, last) {
				set(peers)
				last, known = peers, true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// EndpointSlices lists the other replicas from the EndpointSlices of
// lockguard's webhook Service: every endpoint address, whatever its
// conditions (a replica that is not ready, or terminating, may still
// admit creates), at Port, except SelfIP.
type EndpointSlices struct {
	Client    kubernetes.Interface
	Namespace string
	Service   string
	SelfIP    string
	Port      int
}

// Run watches the Service's EndpointSlices until ctx ends.
func (e EndpointSlices) Run(ctx context.Context, set func([]string)) error {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: e.Service}).String()
	f := informers.NewSharedInformerFactoryWithOptions(e.Client, 10*time.Minute, informers.WithNamespace(e.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	update := func() {
		if !inf.HasSynced() {
			return
		}
		set(e.addresses(inf.GetStore().List()))
	}
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { update() },
		UpdateFunc: func(any, any) { update() },
		DeleteFunc: func(any) { update() },
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	update()
	<-ctx.Done()
	f.Shutdown()
	return nil
}

// addresses returns the addresses of the slices' endpoints, but self's.
func (e EndpointSlices) addresses(objs []any) []string {
	var out []string
	for _, o := range objs {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			for _, ip := range ep.Addresses {
				if ip != e.SelfIP {
					out = append(out, net.JoinHostPort(ip, strconv.Itoa(e.Port)))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ParseList splits a comma-separated host:port list, checking each.
func ParseList(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, fmt.Errorf("peer %q is not host:port: %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}
