package webhook

import (
	"errors"
	"fmt"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/skim"
)

// Request is an admission request as the decision reads it: the members of
// an admission.k8s.io/v1 AdmissionRequest it uses, and of the object being
// deleted only the fields a guard reads. Its JSON tags are the
// AdmissionRequest's, so any JSON decoder fills it from a review; Handle
// fills it from controller-runtime's admission.Request.
//
// A guard that needs more reads it here, and nothing else: the namespace
// and CRD guards add fields to Object (a Namespace's status.phase, a CRD's
// spec.group and spec.names.kind), the cascade check adds the
// AdmissionRequest's options (DeleteOptions.propagationPolicy) and the
// object's finalizers, the update guard reads Update.
type Request struct {
	UID       types.UID               `json:"uid"`
	Kind      metav1.GroupVersionKind `json:"kind"`
	Name      string                  `json:"name"`
	Namespace string                  `json:"namespace"`
	Operation admissionv1.Operation   `json:"operation"`
	UserInfo  UserInfo                `json:"userInfo"`
	DryRun    bool                    `json:"dryRun"`
	// Options are the request's DeleteOptions, as far as the cascade guard
	// reads them; empty when the request carries none.
	Options DeleteOptions `json:"options"`
	// OldObject is the object being deleted; empty when the request
	// carries none.
	OldObject Object `json:"oldObject"`
	// Update is what the update guard reads of an UPDATE besides the
	// members above, from its review decoded whole (UpdateHandler); zero
	// for a DELETE, whose review is never decoded into it.
	Update UpdateFields `json:"-"`
}

// UpdateFields are what the update guard reads of an UPDATE that a DELETE
// does not carry: the guard compares the object with oldObject.
type UpdateFields struct {
	// SubResource is the subresource updated; "" for the object itself.
	SubResource string
	// Resource is the resource updated, as the review names it.
	Resource metav1.GroupVersionResource
	// Groups are the groups of the sender.
	Groups []string
	// OldObject and Object are the object before and after the update,
	// as the review carries them (JSON).
	OldObject, Object []byte
}

// Target is the key of the object req is about: of the request's name,
// or, for a deletecollection (which names none), of oldObject's.
func (req *Request) Target() lockv1alpha1.TargetKey {
	name := req.Name
	if name == "" {
		name = req.OldObject.Metadata.Name
	}
	return lockv1alpha1.TargetKey{Namespace: req.Namespace, Group: req.Kind.Group, Kind: req.Kind.Kind, Name: name}
}

// UserInfo is who sent the request, as the Events of a denial name them.
type UserInfo struct {
	Username string `json:"username"`
}

// Object is what the decision reads of an object in a request: part of its
// metadata. The rest of the object, up to megabytes, is skipped by the
// decoder, not stored.
type Object struct {
	Metadata ObjectMeta `json:"metadata"`
	// Spec is what the CRD guard reads of a CustomResourceDefinition's spec.
	Spec ObjectSpec `json:"spec"`
	// Status is what the namespace guard reads of a Namespace's status.
	Status ObjectStatus `json:"status"`
}

// ObjectMeta is the part of an object's metadata the decision reads.
type ObjectMeta struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
	// DeletionTimestamp is set on an object being deleted (a terminating
	// namespace).
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// Labels are the object's labels, which selector Locks match (the
	// review's size bounds them).
	Labels map[string]string `json:"labels,omitempty"`
	// Finalizers are the object's finalizers: the cascade guard reads
	// orphan and foregroundDeletion there when the options set no policy.
	Finalizers []string `json:"finalizers,omitempty"`
}

// DeleteOptions is what the cascade guard reads of a DELETE's options:
// how the garbage collector is to treat the object's dependents.
type DeleteOptions struct {
	// PropagationPolicy is Orphan, Background or Foreground; nil when the
	// client set none.
	PropagationPolicy *metav1.DeletionPropagation `json:"propagationPolicy,omitempty"`
	// OrphanDependents is the deprecated form of the policy; when set, it
	// wins over PropagationPolicy (the API server refuses both together).
	OrphanDependents *bool `json:"orphanDependents,omitempty"`
}

// review is an admission.k8s.io/v1 AdmissionReview as decodeReview reads
// it.
type review struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Request    *Request `json:"request"`
}

// reviewFields are the members decodeReview reads.
var reviewFields = skim.FieldsOf(reflect.TypeFor[review]())

// reviewTable is reviewFields compiled, for decodeReview.
var reviewTable = skim.Compile(reviewFields)

// decodeReview decodes body, an admission.k8s.io/v1 AdmissionReview in
// JSON, into the Request it carries, as the API server decodes JSON (keys
// matched case-sensitively, the whole body validated), storing only the
// fields of Request. decodeKept reads the reviews the API server sends in
// one pass; what it declines is decodeStandard of what skim keeps of body,
// which is the reference.
func decodeReview(body []byte) (Request, error) {
	if req, ok := decodeKept(body); ok {
		return req, nil
	}
	kept, err := reviewTable.Append(make([]byte, 0, 512), body)
	if err != nil {
		return Request{}, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	return decodeStandard(kept)
}

// decodeStandard is decodeReview with sigs.k8s.io/json alone.
func decodeStandard(body []byte) (Request, error) {
	var r review
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(body, &r); err != nil {
		return Request{}, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if v := admissionv1.SchemeGroupVersion.String(); r.APIVersion != v || r.Kind != "AdmissionReview" {
		return Request{}, fmt.Errorf("the body is a %q %q, not an %s AdmissionReview", r.APIVersion, r.Kind, v)
	}
	if r.Request == nil {
		return Request{}, errors.New("the AdmissionReview has no request")
	}
	return *r.Request, nil
}

// requestOf reads a Request from controller-runtime's decoded request.
func requestOf(req admission.Request) (Request, error) {
	r := Request{
		UID:       req.UID,
		Kind:      req.Kind,
		Name:      req.Name,
		Namespace: req.Namespace,
		Operation: req.Operation,
		UserInfo:  UserInfo{Username: req.UserInfo.Username},
		DryRun:    req.DryRun != nil && *req.DryRun,
	}
	if raw := req.Options.Raw; len(raw) > 0 {
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &r.Options); err != nil {
			return r, fmt.Errorf("cannot read the options of the DELETE: %w", err)
		}
	}
	if raw := req.OldObject.Raw; len(raw) > 0 {
		if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &r.OldObject); err != nil {
			return r, fmt.Errorf("cannot read the %s being deleted: %w", schema.GroupKind{Group: r.Kind.Group, Kind: r.Kind.Kind}, err)
		}
	}
	return r, nil
}

// updateRequestOf reads the Request of an UPDATE from its review,
// decoded whole: of oldObject only the UID, by which the Events of a
// refusal name the object.
func updateRequestOf(req admission.Request) Request {
	r := Request{Kind: req.Kind, Name: req.Name, Namespace: req.Namespace, Operation: req.Operation,
		UserInfo: UserInfo{Username: req.UserInfo.Username}, DryRun: req.DryRun != nil && *req.DryRun}
	r.OldObject.Metadata.UID = uidOf(req.OldObject.Raw)
	r.Update = UpdateFields{SubResource: req.SubResource, Resource: req.Resource, Groups: req.UserInfo.Groups,
		OldObject: req.OldObject.Raw, Object: req.Object.Raw}
	return r
}

// uidOf reads the UID of raw, an object of a review decoded whole (an
// UPDATE's oldObject); "" when it has none.
func uidOf(raw []byte) types.UID {
	var meta struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
	}
	_ = k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &meta)
	return meta.Metadata.UID
}
