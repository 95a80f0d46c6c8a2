package metaslim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// scheme knows meta.k8s.io/v1's PartialObjectMetadata(List) and
// WatchEvent, as the API server's encoder does.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	gv := schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"}
	s.AddKnownTypes(gv, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{}, &metav1.WatchEvent{}, &metav1.Status{})
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

// partial returns an object with every field of ObjectMeta set, as the
// API server sends it to a metadata-only list or watch.
func partial(i int) *metav1.PartialObjectMetadata {
	t := metav1.NewTime(time.Date(2026, 12, 7, 16, 0, i%60, 0, time.UTC))
	p := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("stack-%07d", i), GenerateName: "stack-", Namespace: "team-0001", SelfLink: "/apis/x",
			UID: types.UID(fmt.Sprintf("7d0c8e1a-2b3f-4c5d-8e9f-%012d", i)), ResourceVersion: fmt.Sprint(200000 + i),
			Generation: 3, CreationTimestamp: t, DeletionTimestamp: &t, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels:      map[string]string{"app": "web", "bench.navique.com/lock": fmt.Sprint(i)},
			Annotations: map[string]string{"core.navique.com/locked": "lock-a", "note": "x"},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "owner", UID: "7d0c8e1a-2b3f-4c5d-8e9f-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "u2"},
			},
			Finalizers: []string{"core.navique.com/keep"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "core.navique.com/v1alpha1",
				Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:size":{}}}`)},
			}, {
				Manager: "lockguard", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "core.navique.com/v1alpha1",
				Time: &t, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:core.navique.com/locked":{}}}}`)},
				Subresource: "status",
			}},
		},
	}
	return p
}

// slimmed returns p less what a Transport drops.
func slimmed(p *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	s := p.DeepCopy()
	s.GenerateName, s.SelfLink, s.Generation = "", "", 0
	s.CreationTimestamp, s.DeletionGracePeriodSeconds, s.ManagedFields = metav1.Time{}, nil, nil
	for i := range s.OwnerReferences {
		s.OwnerReferences[i].Controller, s.OwnerReferences[i].BlockOwnerDeletion = nil, nil
	}
	return s
}

// encode returns obj in the API server's protobuf encoding.
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(scheme, scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decode decodes data (the API server's protobuf encoding) into into.
func decode(t testing.TB, data []byte, into runtime.Object) {
	t.Helper()
	if _, _, err := protobuf.NewSerializer(scheme, scheme).Decode(data, nil, into); err != nil {
		t.Fatal(err)
	}
}

func TestSlimObjectDropsWhatTheCacheDrops(t *testing.T) {
	p := partial(7)
	in := encode(t, p)
	out, ok := appendObject(nil, in)
	if !ok {
		t.Fatal("the object was not slimmed")
	}
	var got metav1.PartialObjectMetadata
	decode(t, out, &got)
	if d := cmp.Diff(slimmed(p), &got); d != "" {
		t.Errorf("slimmed object (-want +got):\n%s", d)
	}
	if len(out) >= len(in)*3/5 {
		t.Errorf("slimmed to %d bytes of %d: its two managedFields entries are nearly half", len(out), len(in))
	}
	// Slimming again changes nothing.
	again, ok := appendObject(nil, out)
	if !ok || !bytes.Equal(again, out) {
		t.Errorf("slimming twice changed the object: %v", ok)
	}
}

func TestSlimListSlimsEachItem(t *testing.T) {
	list := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: ptr.To[int64](9)},
	}
	want := list.DeepCopy()
	for i := range 300 { // long enough that some lengths take a shorter varint once slimmed
		p := partial(i)
		if i%3 == 0 {
			p.ManagedFields = nil
		}
		list.Items = append(list.Items, *p)
		w := slimmed(p)
		w.TypeMeta = metav1.TypeMeta{} // a list's items carry none in protobuf
		want.Items = append(want.Items, *w)
	}
	out, ok := appendObject(nil, encode(t, list))
	if !ok {
		t.Fatal("the list was not slimmed")
	}
	var got metav1.PartialObjectMetadataList
	decode(t, out, &got)
	if d := cmp.Diff(want, &got); d != "" {
		t.Errorf("slimmed list (-want +got):\n%s", d)
	}
}

func TestSlimLeavesOtherObjects(t *testing.T) {
	status := encode(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Message: "gone", Code: 410})
	if _, ok := appendObject(nil, status); ok {
		t.Error("a Status was slimmed")
	}
	if _, ok := appendObject(nil, []byte(`{"kind":"PartialObjectMetadata"}`)); ok {
		t.Error("JSON was slimmed")
	}
	// The object cut anywhere, or a byte of it changed, is slimmed only
	// where it still reads as protobuf, and never grows.
	in := encode(t, partial(1))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		b := bytes.Clone(in)
		if i%2 == 0 {
			b = b[:r.IntN(len(b))]
		} else {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
		if out, ok := appendObject(nil, b); ok && len(out) > len(b) {
			t.Fatalf("slimming %x grew it to %x", b, out)
		}
	}
}

func TestSlimAllocatesNothingOnceWarm(t *testing.T) {
	frame := encodeEvent(t, "ADDED", partial(3))
	buf := make([]byte, 0, len(frame))
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := appendWatchEvent(buf[:0], frame); !ok {
			t.Fatal("not slimmed")
		}
	}); n != 0 {
		t.Errorf("a watch event's slimming allocated %v times", n)
	}
}

// encodeEvent returns a WatchEvent of obj as the API server frames it
// (without the frame's length).
func encodeEvent(t testing.TB, typ string, obj runtime.Object) []byte {
	t.Helper()
	ev := &metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: encode(t, obj)}}
	var b bytes.Buffer
	if err := protobuf.NewRawSerializer(scheme, scheme).Encode(ev, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
