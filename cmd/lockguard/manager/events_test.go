package manager

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/navique/lockguard/controller"
)

// failingReader is a client.Reader whose every read fails.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("connection refused")
}

func TestNamespaceLive(t *testing.T) {
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	terminating := controller.NamespaceObject("terminating")
	now := metav1.Now()
	terminating.DeletionTimestamp = &now
	terminating.Finalizers = []string{"kubernetes"}
	reader := func(objs ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	}
	cases := map[string]struct {
		cached, api client.Reader
		ns          string
		want        bool
	}{
		"ClusterScoped":       {cached: failingReader{}, api: failingReader{}, ns: "", want: true},
		"Cached":              {cached: reader(controller.NamespaceObject("a")), api: failingReader{}, ns: "a", want: true},
		"CachedTerminating":   {cached: reader(terminating), api: failingReader{}, ns: "terminating", want: false},
		"Gone":                {cached: reader(), api: reader(), ns: "a", want: false},
		"NotCachedYet":        {cached: reader(), api: reader(controller.NamespaceObject("a")), ns: "a", want: true},
		"TerminatingUncached": {cached: reader(), api: reader(terminating), ns: "terminating", want: false},
		"CacheUnreadable":     {cached: failingReader{}, api: reader(), ns: "a", want: true},
		"APIUnreadable":       {cached: reader(), api: failingReader{}, ns: "a", want: true},
		"NoCache":             {api: reader(controller.NamespaceObject("a")), ns: "a", want: true},
		"NoCacheGone":         {api: reader(), ns: "a", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := namespaceLive(tc.cached, tc.api)(t.Context(), tc.ns); got != tc.want {
				t.Errorf("namespaceLive(%q) = %t, want %t (what it cannot tell counts as live)", tc.ns, got, tc.want)
			}
		})
	}
}
