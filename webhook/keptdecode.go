package webhook

import (
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// decodeKept decodes kept, what skim keeps of an AdmissionReview (valid
// JSON holding only reviewFields' members), into the Request it carries,
// without reflection. It reads only the shape the API server sends: plain
// strings (no escapes), booleans, nulls, the members of reviewFields once
// each. On anything else (an escaped or invalid UTF-8 string, a member
// twice, a value of another type, an unknown member, nesting past
// keptMaxDepth) ok is false and the result is not to be used: the caller
// then decodes with decodeStandard, whose result (or error) is the
// reference. Where ok is true, the Request is decodeStandard's:
// TestDecodeKeptAgrees and FuzzDecodeKept compare the two.
func decodeKept(kept []byte) (Request, bool) {
	d := keptDecoder{b: kept}
	var apiVersionOK, kindOK bool
	var req Request
	hasRequest := false
	var seen uint16
	d.object(func(key []byte) {
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

// reviewAPIVersion is the apiVersion of the AdmissionReviews lockguard
// reads, made once.
var reviewAPIVersion = admissionv1.SchemeGroupVersion.String()

// request reads the AdmissionRequest's members that Request has.
func (d *keptDecoder) request(r *Request) {
	var seen uint16
	d.object(func(key []byte) {
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
			d.object(func(key []byte) {
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
	d.object(func(key []byte) {
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
	d.object(func(key []byte) {
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
	d.object(func(key []byte) {
		switch string(key) {
		case "metadata":
			d.once(&seen, 1)
			d.metadata(&o.Metadata)
		case "spec":
			d.once(&seen, 2)
			// What skim keeps of an object's spec (a Stack's, say) is
			// mostly {}: nothing to read.
			if raw := d.raw(); raw != nil && !d.bad && !emptyObject(raw) {
				_ = o.Spec.UnmarshalJSON(raw) // lenient: never an error
			}
		case "status":
			d.once(&seen, 4)
			if raw := d.raw(); raw != nil && !d.bad && !emptyObject(raw) {
				_ = o.Status.UnmarshalJSON(raw)
			}
		default:
			d.fail()
		}
	})
}

// metadata reads ObjectMeta's members.
func (d *keptDecoder) metadata(m *ObjectMeta) {
	var seen uint16
	d.object(func(key []byte) {
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
			d.object(func(key []byte) {
				k := sharedString(key)
				if _, dup := labels[k]; dup {
					d.fail()
					return
				}
				labels[k] = d.str()
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
