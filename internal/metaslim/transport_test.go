package metaslim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

var stacks = schema.GroupVersionResource{Group: "core.navique.com", Version: "v1alpha1", Resource: "stacks"}

// frames returns events as the API server writes them to a protobuf
// watch: each a 4-byte length, then the event.
func frames(t testing.TB, events ...[]byte) []byte {
	var b []byte
	for _, ev := range events {
		b = binary.BigEndian.AppendUint32(b, uint32(len(ev)))
		b = append(b, ev...)
	}
	return b
}

// apiServer serves a list of items and a watch of events for Stacks, in
// protobuf as kube-apiserver answers the metadata client, and what the
// test says for anything else.
func apiServer(t *testing.T, list *metav1.PartialObjectMetadataList, events []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/core.navique.com/v1alpha1/namespaces/team/stacks" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
			_, _ = w.Write(events)
			return
		}
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		_, _ = w.Write(encode(t, list))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTransportSlimsTheMetadataClientsReads(t *testing.T) {
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}, ListMeta: metav1.ListMeta{ResourceVersion: "9"}}
	var events [][]byte
	var want []*metav1.PartialObjectMetadata
	for i := range 3 {
		list.Items = append(list.Items, *partial(i))
		events = append(events, encodeEvent(t, string(watch.Added), partial(i)))
		want = append(want, slimmed(partial(i)))
	}
	gone := encode(t, &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410})
	events = append(events, func() []byte {
		var b bytes.Buffer
		if err := protobuf.NewRawSerializer(scheme, scheme).Encode(&metav1.WatchEvent{Type: string(watch.Error), Object: rawOf(gone)}, &b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}())
	srv := apiServer(t, list, frames(t, events...))
	ctx := context.Background()
	for _, slim := range []bool{false, true} {
		t.Run(fmt.Sprintf("slim=%v", slim), func(t *testing.T) {
			hc := srv.Client()
			if slim {
				hc = Wrap(hc)
			}
			mc, err := metadata.NewForConfigAndClient(&rest.Config{Host: srv.URL}, hc)
			if err != nil {
				t.Fatal(err)
			}
			wantItem := func(i int) *metav1.PartialObjectMetadata {
				if slim {
					return want[i]
				}
				return partial(i)
			}
			got, err := mc.Resource(stacks).Namespace("team").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range got.Items {
				w := wantItem(i)
				w.TypeMeta = metav1.TypeMeta{}
				if d := cmp.Diff(w, &got.Items[i]); d != "" {
					t.Errorf("item %d (-want +got):\n%s", i, d)
				}
			}
			wi, err := mc.Resource(stacks).Namespace("team").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer wi.Stop()
			i := 0
			for ev := range wi.ResultChan() {
				if i == len(want) {
					if s, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || s.Code != 410 {
						t.Errorf("the last event: %s %#v", ev.Type, ev.Object)
					}
					break
				}
				p, ok := ev.Object.(*metav1.PartialObjectMetadata)
				if !ok {
					t.Fatalf("event %d: %s %T", i, ev.Type, ev.Object)
				}
				w := wantItem(i)
				w.TypeMeta = metav1.TypeMeta{}
				p.TypeMeta = metav1.TypeMeta{}
				if d := cmp.Diff(w, p); d != "" {
					t.Errorf("event %d (-want +got):\n%s", i, d)
				}
				i++
			}
		})
	}
}

// rawOf returns data as a RawExtension.
func rawOf(data []byte) kruntime.RawExtension { return kruntime.RawExtension{Raw: data} }

func TestTransportPassesOtherAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, accept, contentType, query, body string
	}{
		{"JSON", acceptPartial + ";g=meta.k8s.io;v=v1,application/json", "application/json", "", `{"kind":"PartialObjectMetadataList"}`},
		{"typed", "application/json", answerProtobuf, "", "k8s\x00not read"},
		{"unreadable", acceptPartial, answerProtobuf, "", "k8s\x00\xff\xff"},
		{"unreadable watch", acceptPartial, answerProtobuf, "?watch=true", "\x00\x00\x00\x02\xff\xff"},
		{"watch frame too large", acceptPartial, answerProtobuf, "?watch=true", "\x7f\xff\xff\xffshort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tc.query, nil)
			req.Header.Set("Accept", tc.accept)
			resp, err := Wrap(srv.Client()).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if tc.name == "watch frame too large" {
				// Copied through, and cut short as the API server's was.
				if err != io.ErrUnexpectedEOF || string(got) != tc.body {
					t.Errorf("read %q, %v", got, err)
				}
				return
			}
			if err != nil || string(got) != tc.body {
				t.Errorf("read %q, %v; want %q", got, err, tc.body)
			}
		})
	}
}

func TestTransportAnswerCutShort(t *testing.T) {
	whole := encode(t, &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}, Items: []metav1.PartialObjectMetadata{*partial(1)}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", answerProtobuf)
		w.Header().Set("Content-Length", fmt.Sprint(len(whole)))
		_, _ = w.Write(whole[:len(whole)/2])
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept", acceptPartial)
	resp, err := Wrap(srv.Client()).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err == nil || !bytes.Equal(got, whole[:len(whole)/2]) {
		t.Errorf("a body cut short read %d bytes, %v; want its %d and an error", len(got), err, len(whole)/2)
	}
}

// BenchmarkWatchDecode is client-go's decode of a protobuf watch of
// metadata (the cache's informers' watches and streamed lists), with and
// without slimming, in bytes allocated per event.
//
// A rich object is partial's, with one managedFields entry; a plain one
// as the scale benchmark's unlocked Stacks (benchmarks.md section 9): an
// owner reference, no labels, annotations, finalizers or deletion.
func BenchmarkWatchDecode(b *testing.B) {
	const n = 1000
	for _, plain := range []bool{false, true} {
		var events [][]byte
		for i := range n {
			p := partial(i)
			p.ManagedFields = p.ManagedFields[:1] // one manager, as most objects have
			p.GenerateName, p.SelfLink = "", ""
			if plain {
				p.Labels, p.Annotations, p.Finalizers, p.OwnerReferences = nil, nil, nil, p.OwnerReferences[:1]
				p.DeletionTimestamp, p.DeletionGracePeriodSeconds = nil, nil
			}
			events = append(events, encodeEvent(b, string(watch.Added), p))
		}
		benchmarkWatchDecode(b, plain, n, frames(b, events...))
	}
}

// benchmarkWatchDecode decodes stream's n events, slimmed and not.
func benchmarkWatchDecode(b *testing.B, plain bool, n int, stream []byte) {
	for _, slim := range []bool{false, true} {
		b.Run(fmt.Sprintf("plain=%v/slim=%v", plain, slim), func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				var body io.ReadCloser = io.NopCloser(bytes.NewReader(stream))
				if slim {
					body = &watchBody{src: body}
				}
				dec := restclientwatch.NewDecoder(
					streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(body), protobuf.NewRawSerializer(scheme, scheme)),
					protobuf.NewSerializer(scheme, scheme))
				for range n {
					if _, _, err := dec.Decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*n), "B/event")
		})
	}
}
