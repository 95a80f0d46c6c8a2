package webhook

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/navique/lockguard/internal/skim"
)

// apiServerReview is a review as kube-apiserver serializes it (every
// member of AdmissionRequest, encoding/json's order): the DELETE of a
// Stack with the given oldObject and options.
func apiServerReview(t testing.TB, oldObject, options string) string {
	t.Helper()
	gvk := metav1.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"}
	gvr := metav1.GroupVersionResource{Group: "core.navique.com", Version: "v1alpha1", Resource: "stacks"}
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: "forge", Namespace: "forge", Operation: admissionv1.Delete,
			UserInfo: authenticationv1.UserInfo{Username: "system:admin", UID: "a", Groups: []string{"system:masters", "system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"k": {"v"}}},
			DryRun: ptr.To(true),
		},
	}
	if oldObject != "" {
		r.Request.OldObject = runtime.RawExtension{Raw: []byte(oldObject)}
	}
	if options != "" {
		r.Request.Options = runtime.RawExtension{Raw: []byte(options)}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// keptSeeds are reviews decodeKept must read (usual: true) or leave to
// the reference (decodeReference), and the seeds of FuzzDecodeKept.
func keptSeeds(t testing.TB) []struct {
	name, body string
	usual      bool
} {
	stack := `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"forge","namespace":"forge","uid":"6f1d9c1e","resourceVersion":"1","labels":{"app.kubernetes.io/name":"forge","team":"ü"},"finalizers":["a/b","c"],"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"payload":"xyz"},"status":{}}`
	terminating := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"forge","uid":"n-1","deletionTimestamp":"2026-12-04T10:00:00Z","finalizers":[]},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Terminating"}}`
	crd := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"stacks.core.navique.com","labels":{}},"spec":{"group":"core.navique.com","names":{"kind":"Stack","plural":"stacks"},"versions":[{"name":"v1alpha1"}]}}`
	background := `{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}`
	return []struct {
		name, body string
		usual      bool
	}{
		{"Stack", apiServerReview(t, stack, background), true},
		{"TerminatingNamespace", apiServerReview(t, terminating, `{"orphanDependents":false}`), true},
		{"CRD", apiServerReview(t, crd, ""), true},
		{"NoOldObject", apiServerReview(t, "", ""), true},
		{"Handwritten", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge"}}`), true},
		{"Spaced", " {\n \"apiVersion\" : \"admission.k8s.io/v1\" ,\t\"kind\":\"AdmissionReview\", \"request\" : { \"uid\" : \"u\" , \"dryRun\" : true , \"options\" : { } , \"oldObject\" : { \"metadata\" : { \"labels\" : { } } } } } \n", true},
		{"SpecNotAnObject", apiServerReview(t, `{"metadata":{"name":"forge"},"spec":[1,{"group":"g"}],"status":"x"}`, ""), true},
		{"SpecEmpty", apiServerReview(t, `{"metadata":{"name":"forge"},"spec":{ },"status":{}}`, ""), true},
		{"SpecDeep", apiServerReview(t, `{"metadata":{"name":"forge"},"spec":{"names":{"kind":{"a":[[["\"]"]]]}}}}`, ""), true},
		{"SpecNotStrings", apiServerReview(t, `{"spec":{"group":5,"names":[{"kind":"Stack"}]},"status":{"phase":{"a":1}}}`, ""), true},
		{"SpecNamesNotStrings", apiServerReview(t, `{"spec":{"group":null,"names":{"kind":["Stack"],"plural":1e5}},"status":[]}`, ""), true},
		{"SpecArrayDeep", apiServerReview(t, `{"spec":`+strings.Repeat("[", 40)+strings.Repeat("]", 40)+`}`, ""), true},
		// Skipped members are validated, escapes and all.
		{"UnknownEscaped", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge","annotations":{"a\u0062":"\"\n\u00e9"}},"x":[1.5e-3,-0,true,false,null,{}]}`), true},
		{"UnknownAtDepthLimit", unknownNested(maxJSONDepth - 2), true},
		{"UnknownPastDepthLimit", unknownNested(maxJSONDepth - 1), false},
		{"UnknownInvalid", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge","annotations":{"a":tru}}}`), false},
		{"UnknownBadEscape", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge","annotations":{"a":"\x"}}}`), false},
		{"UnknownControl", reviewJSON("admission.k8s.io/v1", "forge", "{\"metadata\":{\"annotations\":{\"a\":\"\t\"}}}"), false},
		{"TrailingComma", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge",}}`), false},
		{"TrailingValue", reviewJSON("admission.k8s.io/v1", "forge", `{}`) + ` {}`, false},
		// The standard decoder unescapes keys; decodeKept leaves them to it.
		{"EscapedKey", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"n\u0061me":"free"}}`), false},
		{"EscapedUnknownKey", reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"n\u0061mespace":"free"}}`), false},
		// A null leaves a member as it is.
		{"NullName", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"name":null}}`), true},
		{"NullOldObject", reviewJSON("admission.k8s.io/v1", "forge", `null`), true},
		{"NullLabel", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"labels":{"a":null}}}`), true},
		{"NullFinalizer", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"finalizers":["a",null]}}`), true},
		{"NullSpec", reviewJSON("admission.k8s.io/v1", "", `{"spec":null}`), true},
		{"NullTimestamp", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"deletionTimestamp":null}}`), true},
		{"NullDryRun", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"dryRun":null}}`, true},
		{"NullPolicy", apiServerReview(t, "", `{"propagationPolicy":null}`), true},
		// Left to the standard decoder.
		{"OtherVersion", reviewJSON("admission.k8s.io/v1beta1", "forge", `{}`), false},
		{"NoRequest", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, false},
		{"NullRequest", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, false},
		{"NotAnObject", `["admission.k8s.io/v1"]`, false},
		{"Null", `null`, false},
		{"EscapedName", reviewJSON("admission.k8s.io/v1", `for\u0067e`, `{}`), false},
		{"InvalidUTF8", reviewJSON("admission.k8s.io/v1", "for\xffge", `{}`), false},
		{"DuplicateMetadata", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"name":"forge"},"metadata":{"uid":"u"}}`), false},
		{"DuplicateLabel", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"labels":{"a":"1","a":"2"}}}`), false},
		{"DuplicateName", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"name":"a","name":"b"}}`, false},
		{"NumberName", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"name":7}}`), false},
		{"StringOldObject", reviewJSON("admission.k8s.io/v1", "forge", `"forge"`), false},
		{"BadTimestamp", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"deletionTimestamp":"yesterday"}}`), false},
		{"NumberTimestamp", reviewJSON("admission.k8s.io/v1", "", `{"metadata":{"deletionTimestamp":5}}`), false},
		{"StringDryRun", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"dryRun":"true"}}`, false},
	}
}

// maxJSONDepth is the standard decoder's limit on nesting.
const maxJSONDepth = 10000

// unknownNested is a review whose request holds a member Request does not
// read, an array nested depth deep: with the review and the request around
// it, the standard decoder refuses it when depth+2 exceeds maxJSONDepth.
func unknownNested(depth int) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","x":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `,"name":"forge"}}`
}

// TestDecodeKeptAgrees: where decodeKept reads a review, it reads what
// the reference reads; it reads the reviews the API server sends, and
// leaves the unusual ones (escapes, duplicates, wrong types, invalid JSON)
// to the reference.
func TestDecodeKeptAgrees(t *testing.T) {
	for _, s := range keptSeeds(t) {
		t.Run(s.name, func(t *testing.T) {
			_, ok := checkKept(t, []byte(s.body))
			if ok != s.usual {
				t.Errorf("decodeKept read it: %v, want %v (body: %.300s)", ok, s.usual, s.body)
			}
		})
	}
}

// decodeReference is what decodeReview falls back to: decodeStandard of
// what skim keeps of body (FuzzSkim checks that against the standard
// decode of the whole body).
func decodeReference(body []byte) (Request, error) {
	kept, err := skim.Skim(body, reviewFields)
	if err != nil {
		return Request{}, err
	}
	return decodeStandard(kept)
}

// checkKept fails t unless decodeKept of body, where it reads it, agrees
// with decodeReference; and decodeReview of body agrees with both.
func checkKept(t *testing.T, body []byte) (Request, bool) {
	t.Helper()
	fast, ok := decodeKept(body)
	std, err := decodeReference(body)
	if ok {
		if err != nil {
			t.Fatalf("decodeKept read %.300q, which the reference refuses: %v", body, err)
		}
		if diff := cmp.Diff(std, fast); diff != "" {
			t.Fatalf("decodeKept of %.300q: -reference, +decodeKept:\n%s", body, diff)
		}
	}
	got, gotErr := decodeReview(body)
	if (err != nil) != (gotErr != nil) || cmp.Diff(std, got) != "" {
		t.Fatalf("decodeReview of %.300q: %+v, %v; reference: %+v, %v", body, got, gotErr, std, err)
	}
	return fast, ok
}

// FuzzDecodeKept: on any body, and on what skim keeps of it, decodeKept
// either declines or agrees with the reference.
func FuzzDecodeKept(f *testing.F) {
	for _, s := range keptSeeds(f) {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkKept(t, body)
		if kept, err := skim.Skim(body, reviewFields); err == nil {
			checkKept(t, kept)
		}
	})
}

// BenchmarkDecodeKept compares decodeKept with the reference (skim, then
// decodeStandard of what it keeps) on the review of a Stack's delete as
// the API server sends it, side by side: it alternates between them in
// batches of about 1ms and reports the time of each and the median of the
// per-batch ratios (reference/kept). The benchmark's own ns/op is
// meaningless.
func BenchmarkDecodeKept(b *testing.B) {
	body := []byte(keptSeeds(b)[0].body)
	decoders := []func([]byte) (Request, error){
		func(k []byte) (Request, error) {
			r, ok := decodeKept(k)
			if !ok {
				return r, fmt.Errorf("not read")
			}
			return r, nil
		},
		decodeReference,
	}
	const batch = 200
	var total [2]time.Duration
	var ratios []float64
	b.ReportAllocs()
	for b.Loop() {
		var took [2]time.Duration
		for i, decode := range decoders {
			start := time.Now()
			for range batch {
				if r, err := decode(body); err != nil || r.Name != "forge" {
					b.Fatalf("decode: %+v, %v", r, err)
				}
			}
			took[i] = time.Since(start)
			total[i] += took[i]
		}
		ratios = append(ratios, float64(took[1])/float64(took[0]))
	}
	n := float64(b.N * batch)
	b.ReportMetric(float64(total[0].Nanoseconds())/n, "ns/kept")
	b.ReportMetric(float64(total[1].Nanoseconds())/n, "ns/reference")
	b.ReportMetric(median(ratios), "reference/kept")
}

// median of xs (sorted in place).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	for i := 1; i < len(xs); i++ {
		for j := i; j > 0 && xs[j] < xs[j-1]; j-- {
			xs[j], xs[j-1] = xs[j-1], xs[j]
		}
	}
	return xs[len(xs)/2]
}

// TestSharedString: sharedString returns a string equal to its bytes and
// independent of them (the body's buffer is reused), the same copy for a
// repeated short string without allocating, and a long one uncached.
func TestSharedString(t *testing.T) {
	b := []byte("core.navique.com")
	first := sharedString(b)
	copy(b, "xxxx")
	if first != "core.navique.com" {
		t.Fatalf("sharedString changed with its buffer: %q", first)
	}
	copy(b, "core")
	if n := testing.AllocsPerRun(100, func() {
		if s := sharedString(b); s != "core.navique.com" {
			t.Fatalf("sharedString = %q", s)
		}
	}); n != 0 {
		t.Errorf("a repeated string cost %v allocations, want 0", n)
	}
	long := []byte(strings.Repeat("a", sharedMaxLen+1))
	if s := sharedString(long); s != string(long) {
		t.Fatalf("sharedString(long) = %q", s)
	}
	for i := range sharedStrings {
		if p := sharedStrings[i].Load(); p != nil && len(*p) > sharedMaxLen {
			t.Errorf("slot %d holds %d bytes, more than %d", i, len(*p), sharedMaxLen)
		}
	}
}
