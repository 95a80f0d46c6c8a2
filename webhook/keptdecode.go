package webhook

import (
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/internal/skim"
)

// decodeKept decodes body, an AdmissionReview in JSON, into the Request
// it carries, in one pass and without reflection: it reads the members
// reviewFields keeps (reviewTable) and skips the rest with skim.Skip,
// which validates them as skim validates what it drops. It reads only the
// shape the API server sends: plain strings (no escapes), booleans,
// nulls, the kept members once each, keys with no escapes. On anything
// else (an escaped or invalid UTF-8 string, a kept member twice, a value
// of another type, invalid JSON) ok is false and the result is not to be
// used: the caller then decodes what skim keeps with decodeStandard, whose
// result (or error) is the reference. Where ok is true, the Request is
// that one: TestDecodeKeptAgrees and FuzzDecodeKept compare the two.
func decodeKept(body []byte) (Request, bool) {
	d := keptDecoder{b: body}
	var apiVersionOK, kindOK bool
	var req Request
	hasRequest := false
	var seen uint16
	d.object(reviewTable, func(key []byte) {
		switch string(key) {
		case "apiVersion":
			d.once(&seen, 1)
			apiVersionOK = d.strIs(reviewAPIVersion)
		case "kind":
			d.once(&seen, 2)
			kindOK = d.strIs("AdmissionReview")
		case "request":
			d.once(&seen, 4)
			if !d.null() {
				d.request(&req)
				hasRequest = true
			}
		default:
			d.fail()
		}
	})
	d.ws()
	if d.bad || d.i != len(d.b) {
		return Request{}, false
	}
	if !apiVersionOK || !kindOK || !hasRequest {
		return Request{}, false // decodeStandard says why
	}
	return req, true
}

// The Tables of the objects decodeKept reads: a member of one that the
// Table does not keep is skipped, one it keeps and decodeKept does not
// read fails (and the standard decoder reads it).
var (
	requestTable   = reviewTable.Sub("request")
	userInfoTable  = requestTable.Sub("userInfo")
	gvkTable       = requestTable.Sub("kind")
	optionsTable   = requestTable.Sub("options")
	oldObjectTable = requestTable.Sub("oldObject")
	metadataTable  = oldObjectTable.Sub("metadata")
	specTable      = oldObjectTable.Sub("spec")
	namesTable     = specTable.Sub("names")
	statusTable    = oldObjectTable.Sub("status")
)

// reviewAPIVersion is the apiVersion of the AdmissionReviews lockguard
// reads, made once.
var reviewAPIVersion = admissionv1.SchemeGroupVersion.String()

// request reads the AdmissionRequest's members that Request has.
func (d *keptDecoder) request(r *Request) {
	var seen uint16
	d.object(requestTable, func(key []byte) {
		switch string(key) {
		case "uid":
			d.once(&seen, 1)
			r.UID = types.UID(d.str())
		case "kind":
			d.once(&seen, 2)
			d.gvk(&r.Kind)
		case "name":
			d.once(&seen, 4)
			r.Name = d.str()
		case "namespace":
			d.once(&seen, 8)
			r.Namespace = d.sharedStr()
		case "operation":
			d.once(&seen, 16)
			r.Operation = admissionv1.Operation(d.operation())
		case "userInfo":
			d.once(&seen, 32)
			var s uint16
			d.object(userInfoTable, func(key []byte) {
				if string(key) != "username" {
					d.fail()
					return
				}
				d.once(&s, 1)
				r.UserInfo.Username = d.sharedStr()
			})
		case "dryRun":
			d.once(&seen, 64)
			r.DryRun = d.boolean()
		case "options":
			d.once(&seen, 128)
			d.options(&r.Options)
		case "oldObject":
			d.once(&seen, 256)
			d.oldObject(&r.OldObject)
		default:
			d.fail()
		}
	})
}

// operation reads an operation, without a copy for the usual ones.
func (d *keptDecoder) operation() string {
	s := d.rawStr()
	for _, op := range [...]admissionv1.Operation{admissionv1.Delete, admissionv1.Update, admissionv1.Create, admissionv1.Connect} {
		if string(s) == string(op) {
			return string(op)
		}
	}
	if d.bad {
		return ""
	}
	return string(s)
}

// gvk reads a GroupVersionKind.
func (d *keptDecoder) gvk(k *metav1.GroupVersionKind) {
	var seen uint16
	d.object(gvkTable, func(key []byte) {
		switch string(key) {
		case "group":
			d.once(&seen, 1)
			k.Group = d.sharedStr()
		case "version":
			d.once(&seen, 2)
			k.Version = d.sharedStr()
		case "kind":
			d.once(&seen, 4)
			k.Kind = d.sharedStr()
		default:
			d.fail()
		}
	})
}

// options reads the DeleteOptions' members DeleteOptions has.
func (d *keptDecoder) options(o *DeleteOptions) {
	var seen uint16
	d.object(optionsTable, func(key []byte) {
		switch string(key) {
		case "propagationPolicy":
			d.once(&seen, 1)
			if !d.null() {
				p := metav1.DeletionPropagation(d.str())
				o.PropagationPolicy = &p
			}
		case "orphanDependents":
			d.once(&seen, 2)
			if !d.null() {
				b := d.boolean()
				o.OrphanDependents = &b
			}
		default:
			d.fail()
		}
	})
}

// oldObject reads what Object has of the object being deleted.
func (d *keptDecoder) oldObject(o *Object) {
	var seen uint16
	d.object(oldObjectTable, func(key []byte) {
		switch string(key) {
		case "metadata":
			d.once(&seen, 1)
			d.metadata(&o.Metadata)
		case "spec":
			d.once(&seen, 2)
			d.spec(&o.Spec)
		case "status":
			d.once(&seen, 4)
			d.lenientField(statusTable, "phase", &o.Status.Phase)
		default:
			d.fail()
		}
	})
}

// spec reads what ObjectSpec's UnmarshalJSON reads of a spec: its group
// and names.kind where they are strings, nothing of a spec or names that
// is not an object (lenientObject, lenientStr).
func (d *keptDecoder) spec(s *ObjectSpec) {
	if !d.lenientObject() {
		return
	}
	var seen uint16
	d.object(specTable, func(key []byte) {
		switch string(key) {
		case "group":
			d.once(&seen, 1)
			s.Group = d.lenientStr()
		case "names":
			d.once(&seen, 2)
			d.lenientField(namesTable, "kind", &s.Names.Kind)
		default:
			d.fail()
		}
	})
}

// lenientField reads into the one member of an object that t keeps,
// key, as the lenient UnmarshalJSONs read an any: a string, or "" for a
// value of another type; nothing of a value that is not an object. It
// reads a status's phase (ObjectStatus) and a spec's names.kind.
func (d *keptDecoder) lenientField(t *skim.Table, key string, into *string) {
	if !d.lenientObject() {
		return
	}
	var seen uint16
	d.object(t, func(k []byte) {
		if string(k) != key {
			d.fail()
			return
		}
		d.once(&seen, 1)
		*into = d.lenientStr()
	})
}

// metadata reads ObjectMeta's members.
func (d *keptDecoder) metadata(m *ObjectMeta) {
	var seen uint16
	d.object(metadataTable, func(key []byte) {
		switch string(key) {
		case "name":
			d.once(&seen, 1)
			m.Name = d.str()
		case "uid":
			d.once(&seen, 2)
			m.UID = types.UID(d.str())
		case "deletionTimestamp":
			d.once(&seen, 4)
			if raw := d.raw(); raw != nil && !d.bad {
				var t metav1.Time
				if t.UnmarshalJSON(raw) != nil || raw[0] != '"' {
					d.fail()
					return
				}
				m.DeletionTimestamp = &t
			}
		case "labels":
			d.once(&seen, 8)
			if d.null() {
				return
			}
			labels := map[string]string{}
			d.object(nil, func(key []byte) {
				k := sharedString(key)
				if _, dup := labels[k]; dup {
					d.fail()
					return
				}
				labels[k] = d.sharedStr()
			})
			m.Labels = labels
		case "finalizers":
			d.once(&seen, 16)
			m.Finalizers = d.strings()
		default:
			d.fail()
		}
	})
}
