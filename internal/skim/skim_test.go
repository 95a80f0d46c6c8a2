package skim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sjson "sigs.k8s.io/json"

	"github.com/navique/lockguard/internal/skim"
	"github.com/navique/lockguard/webhook"
)

// The skimmer is checked on the type it serves: an AdmissionReview as
// lockguard's webhook reads it (its own review type has this shape), with
// webhook.Request's members, lenient ones (webhook.ObjectSpec and
// webhook.ObjectStatus, whose UnmarshalJSON ignores what does not fit) and
// ones with an UnmarshalJSON of their own (metav1.Time), kept whole.

// review is an admission.k8s.io/v1 AdmissionReview as the webhook reads it.
type review struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Request    *webhook.Request `json:"request"`
}

// reviewFields are the members of review, which Skim keeps.
var reviewFields = skim.FieldsOf(reflect.TypeFor[review]())

// reviewTable is reviewFields compiled once, as the webhook compiles its.
var reviewTable = skim.Compile(reviewFields)

// decodeSkimmed decodes what the Table of reviewFields keeps of body, as
// the webhook does; it checks that Skim, which compiles the Fields anew,
// keeps the same.
func decodeSkimmed(body []byte) (review, error) {
	kept, err := reviewTable.Append(make([]byte, 0, 512), body)
	if again, againErr := skim.Skim(body, reviewFields); !bytes.Equal(again, kept) || (againErr == nil) != (err == nil) {
		return review{}, fmt.Errorf("Skim kept %q (error %v), the compiled Table %q (error %v)", again, againErr, kept, err)
	}
	if err != nil {
		return review{}, err
	}
	return decodeWhole(kept)
}

// decodeTable is decodeSkimmed without the check, for BenchmarkSkim.
func decodeTable(body []byte) (review, error) {
	kept, err := reviewTable.Append(make([]byte, 0, 512), body)
	if err != nil {
		return review{}, err
	}
	return decodeWhole(kept)
}

// decodeWhole is the standard decode of the whole body (sigs.k8s.io/json,
// as the API server decodes JSON: keys matched case-sensitively).
func decodeWhole(body []byte) (review, error) {
	var r review
	err := k8sjson.UnmarshalCaseSensitivePreserveInts(body, &r)
	return r, err
}

// reviewJSON is an AdmissionReview of a DELETE of Stack forge/<name>.
func reviewJSON(apiVersion, name, oldObject string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"core.navique.com","version":"v1alpha1","kind":"Stack"},` +
		`"resource":{"group":"core.navique.com","version":"v1alpha1","resource":"stacks"},` +
		`"name":"` + name + `","namespace":"forge","operation":"DELETE","userInfo":{"username":"alice"},` +
		`"object":null,"oldObject":` + oldObject + `,"dryRun":false,"options":{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1"}}}`
}

// referenceDecode decodes body the way the API server's decoder would:
// the whole AdmissionReview with sigs.k8s.io/json. ok is false when body is
// not an admission.k8s.io/v1 AdmissionReview with a request.
func referenceDecode(body []byte) (ar *admissionv1.AdmissionReview, ok bool) {
	ar = &admissionv1.AdmissionReview{}
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(body, ar); err != nil {
		return nil, false
	}
	if ar.APIVersion != "admission.k8s.io/v1" || ar.Kind != "AdmissionReview" || ar.Request == nil {
		return nil, false
	}
	return ar, true
}

// referenceRequest is the Request in a review the API server decoded, read
// without the skimmer: oldObject's metadata is looked up in the object
// decoded as a map. ok is false when oldObject is not an object whose
// metadata.name and metadata.uid are strings (or absent), which the API
// server never sends.
func referenceRequest(r *admissionv1.AdmissionRequest) (req webhook.Request, ok bool) {
	req = webhook.Request{
		UID: r.UID, Kind: r.Kind, Name: r.Name, Namespace: r.Namespace, Operation: r.Operation,
		UserInfo: webhook.UserInfo{Username: r.UserInfo.Username},
		DryRun:   r.DryRun != nil && *r.DryRun,
	}
	if len(r.Options.Raw) > 0 {
		var opts metav1.DeleteOptions
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(r.Options.Raw, &opts); err != nil {
			return req, false
		}
		req.Options = webhook.DeleteOptions{PropagationPolicy: opts.PropagationPolicy, OrphanDependents: opts.OrphanDependents} //nolint:staticcheck // the deprecated field is read on purpose
	}
	if len(r.OldObject.Raw) == 0 {
		return req, true
	}
	var obj any
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(r.OldObject.Raw, &obj); err != nil {
		return req, false
	}
	m, isMap := obj.(map[string]any)
	if !isMap {
		return req, obj == nil
	}
	meta, isMap := m["metadata"].(map[string]any)
	if !isMap {
		return req, m["metadata"] == nil
	}
	for key, dst := range map[string]*string{"name": &req.OldObject.Metadata.Name, "uid": (*string)(&req.OldObject.Metadata.UID)} {
		switch v := meta[key].(type) {
		case string:
			*dst = v
		case nil:
		default:
			return req, false
		}
	}
	switch fs := meta["finalizers"].(type) {
	case nil:
	case []any:
		for _, f := range fs {
			s, isString := f.(string)
			if !isString {
				return req, false
			}
			req.OldObject.Metadata.Finalizers = append(req.OldObject.Metadata.Finalizers, s)
		}
	default:
		return req, false
	}
	return req, true
}

// checkSkim checks Skim on body: the decode of what it keeps fails
// exactly when the standard decode of the whole body does, and reads the
// same review (the fast path loses nothing); and a review the API server
// would send (body as the reference decoder reads it, written out again as
// the API server writes it) is read into the Request the reference reads
// from it (webhook.Request's fields are the AdmissionRequest's).
func checkSkim(t *testing.T, body []byte) {
	t.Helper()
	got, err := decodeSkimmed(body)
	want, wantErr := decodeWhole(body)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("skimmed %q: error %v; the standard decode: error %v", clipBody(body), err, wantErr)
	}
	if diff := cmp.Diff(want, got); err == nil && diff != "" {
		t.Fatalf("skimmed %q: -standard, +got:\n%s", clipBody(body), diff)
	}
	if err == nil && !json.Valid(body) {
		t.Fatalf("Skim(%q) accepted a body that is not JSON", clipBody(body))
	}
	checkSkip(t, body)

	ar, ok := referenceDecode(body)
	if !ok {
		return
	}
	wantReq, ok := referenceRequest(ar.Request)
	if !ok {
		return
	}
	canonical, err := json.Marshal(ar)
	if err != nil {
		t.Fatal(err)
	}
	got, err = decodeSkimmed(canonical)
	if err != nil || got.Request == nil {
		t.Fatalf("skimmed %q: %+v, %v, want the reference decoder's request", clipBody(canonical), got, err)
	}
	if diff := cmp.Diff(wantReq, *got.Request); diff != "" {
		t.Fatalf("skimmed %q: -reference, +got:\n%s", clipBody(canonical), diff)
	}
}

// checkSkip fails t unless Skip of body (one value, then only
// whitespace) accepts exactly what encoding/json accepts; and, with two
// containers around it, what encoding/json accepts with two around it.
func checkSkip(t *testing.T, body []byte) {
	t.Helper()
	skip := func(depth int) bool {
		end, err := skim.Skip(body, 0, depth)
		return err == nil && len(bytes.TrimLeft(body[end:], " \t\r\n")) == 0
	}
	if got, want := skip(0), json.Valid(body); got != want {
		t.Fatalf("Skip(%q) accepted it: %v; encoding/json: %v", clipBody(body), got, want)
	} else if want {
		wrapped := fmt.Appendf(nil, `{"a":[%s]}`, body)
		if got, want := skip(2), json.Valid(wrapped); got != want {
			t.Fatalf("Skip(%q, depth 2) accepted it: %v; encoding/json of %q: %v", clipBody(body), got, clipBody(wrapped), want)
		}
	}
}

// TestSkipDepth: Skip counts the containers around a value against the
// standard decoder's nesting limit, as Skim does.
func TestSkipDepth(t *testing.T) {
	const limit = 10000
	for _, tc := range []struct{ depth, nested int }{{0, limit}, {0, limit + 1}, {2, limit - 2}, {2, limit - 1}, {limit, 0}, {limit, 1}} {
		value := []byte(strings.Repeat("[", tc.nested) + strings.Repeat("]", tc.nested))
		if tc.nested == 0 {
			value = []byte("0")
		}
		_, err := skim.Skip(value, 0, tc.depth)
		if want := tc.depth+tc.nested <= limit; (err == nil) != want {
			t.Errorf("Skip of %d nested arrays inside %d: error %v, want it accepted: %v", tc.nested, tc.depth, err, want)
		}
	}
}

// TestPlainString: PlainString reads a string with no escape and no
// control character, says whether it is all ASCII, and declines any
// other string, and what is not a string.
func TestPlainString(t *testing.T) {
	for _, tc := range []struct {
		in          string
		end         int
		ascii, want bool
	}{
		{`"" `, 2, true, true},
		{`"forge",`, 7, true, true},
		{`"a string past eight bytes"}`, 27, true, true},
		{`"a string past eight bytes, é"}`, 31, false, true},
		{`"é, then a string past eight bytes"}`, 36, false, true},
		{"\"\xff\"", 3, false, true}, // no UTF-8: the caller checks
		{`"for\u0067e"`, 0, true, false},
		{`"a\"b"`, 0, true, false},
		{`"é\"b"`, 0, false, false},
		{"\"a\tb\"", 0, true, false},
		{`"unterminated`, 0, true, false},
		{`7`, 0, false, false},
		{``, 0, false, false},
	} {
		end, ascii, ok := skim.PlainString([]byte(tc.in), 0)
		if ok != tc.want || ok && (end != tc.end || ascii != tc.ascii) {
			t.Errorf("PlainString(%q) = %d, %v, %v; want %d, %v, %v", tc.in, end, ascii, ok, tc.end, tc.ascii, tc.want)
		}
	}
}

// TestTableMembers: Keeps and Sub answer from the Fields compiled.
func TestTableMembers(t *testing.T) {
	request := reviewTable.Sub("request")
	if request == nil || !reviewTable.Keeps([]byte("apiVersion")) || reviewTable.Keeps([]byte("apiversion")) {
		t.Fatalf("the review's Table: request %v, keeps apiVersion %v, apiversion %v", request,
			reviewTable.Keeps([]byte("apiVersion")), reviewTable.Keeps([]byte("apiversion")))
	}
	if reviewTable.Sub("apiVersion") != nil || reviewTable.Sub("resource") != nil {
		t.Error("Sub of a member kept whole, or not kept, is not nil")
	}
	labels := request.Sub("oldObject").Sub("metadata")
	if !labels.Keeps([]byte("labels")) || labels.Sub("labels") != nil || labels.Keeps([]byte("annotations")) {
		t.Error("metadata's Table: labels must be kept whole, annotations not kept")
	}
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// seeds are reviews, odd and malformed bodies: duplicate and escaped
// keys, nulls, members of the wrong type, nesting at and over the limit,
// bytes that are not JSON.
var seeds = []string{
	reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge"}}`),
	reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"name":"forge"},"spec":{"a":[1,-2.5e+3,true,false,null,"\u00e9\n"]}}`),
	reviewJSON("admission.k8s.io/v1beta1", "forge", `{}`),
	reviewJSON("admission.k8s.io/v1", "forge", `null`),
	reviewJSON("admission.k8s.io/v1", "forge", `"str"`),
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a","name":"x"},"request":{"uid":"b","kind":{"group":"g"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"a"},"request":null}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"oldObject":{"a":1},"oldObject":null}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"old\u004fbject":{"a":1},"uid":"x"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"OldObject":{"a":1},"UID":"x"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"},"response":5}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"},"response":{"allowed":true}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","name":5}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}} x`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":[1,2,]}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"a":01}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":"\x01"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":"\uZZZZ"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"a":1.}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"a" 1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":tru}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"username":"a","extra":{"k":["v"]}},"dryRun":true}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"groups":["a",null,"b"],"extra":{"k":null,"k\u0032":["v"]}},"userInfo":{"groups":[],"extra":{"k3":[]}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"groups":null,"extra":null,"username":null}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"groups":[1]}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":{"extra":{"k":"v"}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","userInfo":5}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","requestKind":{"group":"g"},"requestKind":{"kind":"K"},"requestResource":null,"kind":{"group":"a"},"kind":{"version":"v"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","requestKind":null,"requestResource":{"resource":"r","extra":[1,{"a":null}]}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":"Stack"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","resource":[]}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","dryRun":null}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","dryRun":1}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","dryRun":"true"}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","name":"caf\u00e9","namespace":"ns\n","operation":"DEL\"ETE","subResource":"\ud83d\ude00"}}`,
	"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"x\",\"name\":\"caf\xc3\xa9\",\"namespace\":\"\xff\xfe\"}}",
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","name":null,"name":"n","uid":null}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":5}`,
	`{"apiVersion":5,"kind":"AdmissionReview","request":{}}`,
	`{"apiVersion":null,"kind":"AdmissionReview","request":{}}`,
	`{"kind":"AdmissionReview","request":{}}`,
	`[]`, `null`, ``, ` `, `{`, `{"a":}`, `{,}`, `{"a":1,}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":` + strings.Repeat(`{"a":`, 9998) + `1` + strings.Repeat("}", 9998) + `}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat("}", 9999) + `}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"spec":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"spec":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n","x":` + strings.Repeat("[", 9996) + strings.Repeat("]", 9996) + `}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n","x":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"a"}},"oldObject":{"metadata":{"uid":"u"}},"oldObject":{"spec":1}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"a"}},"oldObject":null}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","old\u004fbject":{"meta\u0064ata":{"\u006eame":"esc"}},"kind":{"gr\u006fup":"g"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n"},"spec":{"a":1,}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n"},"spec":"\x"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n"},"spec":[-]}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"name":"n"}  ,  "spec" : [ 1 , 2.5e-3 , -0 , "s" , { } , [ ] ] }}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","options":{"propagationPolicy":"Orphan"},"object":null,"response":{"allowed":"no"}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","options":{"orphanDependents":false,"gracePeriodSeconds":3},"oldObject":{"metadata":{"name":"n","finalizers":["orphan","a/b"]}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","options":{"propagationPolicy":5}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","options":null,"oldObject":{"metadata":{"finalizers":null}}}}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"metadata":{"finalizers":"x"}}}}`,
	` {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}} ` + "\n",
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x"}`,
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","oldObject":{"spec":"a`,
}

// TestSkim runs checkSkim on well-formed, odd and malformed reviews.
func TestSkim(t *testing.T) {
	for _, s := range seeds {
		checkSkim(t, []byte(s))
	}
}

// FuzzSkim: the decode of what Skim keeps of a body accepts and reads
// exactly what the standard decode of the whole body does; and it reads
// every review the API server could send as the API server's decoder
// reads it.
func FuzzSkim(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkSkim(t, body) })
}

// BenchmarkSkim compares the decode of a review through a compiled Table (skim, then
// the standard decode of what it keeps) with the standard decode of the
// whole body, side by side: it alternates between them in batches of about 1ms, and reports
// the time of each per review and the median of the per-batch ratios
// (standard/fast). The benchmark's own ns/op is meaningless.
func BenchmarkSkim(b *testing.B) {
	for _, size := range []int{2 << 10, 16 << 10, 256 << 10, 1 << 20} {
		body := []byte(reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"name":"forge","uid":"u"},"spec":{"payload":"`+strings.Repeat("x", size)+`","list":[1,2.5,true,null,{"a":"b"}]}}`))
		b.Run(fmt.Sprintf("body=%dKiB", len(body)>>10), func(b *testing.B) {
			batch := max(1, 64<<10/len(body))
			decoders := []func([]byte) (review, error){decodeTable, decodeWhole}
			var total [2]time.Duration
			var ratios []float64
			for b.Loop() {
				var took [2]time.Duration
				for i, decode := range decoders {
					start := time.Now()
					for range batch {
						if r, err := decode(body); err != nil || r.Request.OldObject.Metadata.Name != "forge" {
							b.Fatalf("decode: %+v, %v", r, err)
						}
					}
					took[i] = time.Since(start)
					total[i] += took[i]
				}
				ratios = append(ratios, float64(took[1])/float64(took[0]))
			}
			reviews := float64(len(ratios) * batch)
			b.ReportMetric(float64(total[0].Nanoseconds())/reviews, "ns/review-fast")
			b.ReportMetric(float64(total[1].Nanoseconds())/reviews, "ns/review-standard")
			slices.Sort(ratios)
			b.ReportMetric(ratios[len(ratios)/2], "standard/fast")
		})
	}
}
