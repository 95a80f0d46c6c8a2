package readmodel

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestIndexByOwner(t *testing.T) {
	refs := func(uids ...string) *metav1.PartialObjectMetadata {
		o := &metav1.PartialObjectMetadata{}
		for _, u := range uids {
			o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{UID: types.UID(u)})
		}
		return o
	}
	many := make([]string, 0, 20000)
	for i := range 10000 {
		many = append(many, fmt.Sprintf("u%05d", i), fmt.Sprintf("u%05d", i))
	}
	cases := map[string]struct {
		reason string
		in     any
		want   []string
	}{
		"None":        {reason: "An object without owners is not indexed.", in: refs(), want: nil},
		"Repeats":     {reason: "An owner named twice is indexed once.", in: refs("b", "a", "b"), want: []string{"a", "b"}},
		"NotMetadata": {reason: "Only metadata objects are indexed.", in: &struct{}{}, want: nil},
		"Thousands": {reason: "20,000 references, each twice, are indexed once each (without comparing each with all).", in: refs(many...),
			want: func() []string {
				out := make([]string, 0, 10000)
				for i := range 10000 {
					out = append(out, fmt.Sprintf("u%05d", i))
				}
				return out
			}()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := indexByOwner(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nindexByOwner(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
