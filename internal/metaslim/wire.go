// Package metaslim drops, from the API server's protobuf answers to the
// metadata-only lists and watches of lockguard's cache, the fields of
// each object's metadata that the cache never keeps (issue 38), before
// client-go decodes them: managedFields above all, which is most of an
// object's metadata and which client-go's decoder copies twice and
// decodes into several allocations per entry, only for the cache's
// transform to drop it.
//
// What it drops is exactly what readmodel.CacheTransform drops of a
// metav1.PartialObjectMetadata: ObjectMeta's generateName, selfLink,
// generation, creationTimestamp, deletionGracePeriodSeconds and
// managedFields, and its owner references' controller and
// blockOwnerDeletion. Everything else is copied byte for byte, and an
// answer it cannot read as it expects (another kind, another encoding, a
// frame too large) goes through as it came.
package metaslim

import (
	"bytes"

	"google.golang.org/protobuf/encoding/protowire"
)

// The fields dropped (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto).
const (
	objectMetaGenerateName        = 2
	objectMetaSelfLink            = 4
	objectMetaGeneration          = 7
	objectMetaCreationTimestamp   = 8
	objectMetaDeletionGracePeriod = 10
	objectMetaOwnerReferences     = 13
	objectMetaManagedFields       = 17

	ownerReferenceController         = 6
	ownerReferenceBlockOwnerDeletion = 7
)

// The fields read on the way to the metadata.
const (
	partialMetadata     = 1 // PartialObjectMetadata.metadata
	listItems           = 2 // PartialObjectMetadataList.items
	watchEventObject    = 2 // WatchEvent.object
	rawExtensionRaw     = 1 // RawExtension.raw
	unknownTypeMeta     = 1 // runtime.Unknown.typeMeta
	unknownRaw          = 2 // runtime.Unknown.raw
	unknownEncoding     = 3 // runtime.Unknown.contentEncoding
	typeMetaKind        = 2 // runtime.TypeMeta.kind
	kindPartial         = "PartialObjectMetadata"
	kindPartialList     = "PartialObjectMetadataList"
	protobufMagicLength = 4
)

// protobufMagic begins an object in kube-apiserver's protobuf encoding,
// before its runtime.Unknown envelope.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// edit appends to dst what it keeps of the message msg; false if msg
// is not what it expects (dst is then to be dropped).
type edit func(dst, msg []byte) ([]byte, bool)

// appendObject appends the object obj (kube-apiserver's protobuf
// encoding: the magic, then a runtime.Unknown) with its metadata slimmed:
// a PartialObjectMetadata, or each of a PartialObjectMetadataList's items.
func appendObject(dst, obj []byte) ([]byte, bool) {
	if !bytes.HasPrefix(obj, protobufMagic) {
		return dst, false
	}
	unknown := obj[protobufMagicLength:]
	var kind []byte
	ok := eachField(unknown, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		switch num {
		case unknownTypeMeta:
			kind = typeKind(value)
		case unknownEncoding:
			// An encoded (compressed) object is not read here.
			return typ == protowire.BytesType && len(value) == 0
		}
		return true
	})
	if !ok {
		return dst, false
	}
	var slim edit
	switch string(kind) {
	case kindPartial:
		slim = appendPartial
	case kindPartialList:
		slim = appendPartialList
	default:
		return dst, false
	}
	dst = append(dst, protobufMagic...)
	return appendEdited(dst, unknown, unknownRaw, slim)
}

// typeKind returns the kind of a runtime.TypeMeta, nil if it has none or
// cannot be read.
func typeKind(typeMeta []byte) []byte {
	var kind []byte
	eachField(typeMeta, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		if num == typeMetaKind && typ == protowire.BytesType {
			kind = value
		}
		return true
	})
	return kind
}

// appendWatchEvent appends the metav1.WatchEvent event (a frame of a
// protobuf watch) with its object slimmed (appendObject).
func appendWatchEvent(dst, event []byte) ([]byte, bool) {
	return appendEdited(dst, event, watchEventObject, func(dst, raw []byte) ([]byte, bool) {
		return appendEdited(dst, raw, rawExtensionRaw, appendObject)
	})
}

// appendPartialList appends a PartialObjectMetadataList with each item
// slimmed.
func appendPartialList(dst, list []byte) ([]byte, bool) {
	return appendEdited(dst, list, listItems, appendPartial)
}

// appendPartial appends a PartialObjectMetadata with its metadata slimmed.
func appendPartial(dst, partial []byte) ([]byte, bool) {
	return appendEdited(dst, partial, partialMetadata, appendObjectMeta)
}

// appendObjectMeta appends an ObjectMeta less the fields the cache drops,
// its owner references less theirs.
func appendObjectMeta(dst, meta []byte) ([]byte, bool) {
	return appendKept(dst, meta, func(num protowire.Number) (drop bool, slim edit) {
		switch num {
		case objectMetaGenerateName, objectMetaSelfLink, objectMetaGeneration, objectMetaCreationTimestamp,
			objectMetaDeletionGracePeriod, objectMetaManagedFields:
			return true, nil
		case objectMetaOwnerReferences:
			return false, appendOwnerReference
		}
		return false, nil
	})
}

// appendOwnerReference appends an OwnerReference less controller and
// blockOwnerDeletion.
func appendOwnerReference(dst, ref []byte) ([]byte, bool) {
	return appendKept(dst, ref, func(num protowire.Number) (bool, edit) {
		return num == ownerReferenceController || num == ownerReferenceBlockOwnerDeletion, nil
	})
}

// appendEdited appends the message msg with the value of each
// length-delimited field num edited by slim, every other field as it is.
func appendEdited(dst, msg []byte, num protowire.Number, slim edit) ([]byte, bool) {
	return appendKept(dst, msg, func(n protowire.Number) (bool, edit) {
		if n == num {
			return false, slim
		}
		return false, nil
	})
}

// appendKept appends the fields of msg that keep does not drop, each
// length-delimited one for which it returns an edit edited so.
func appendKept(dst, msg []byte, keep func(protowire.Number) (drop bool, slim edit)) ([]byte, bool) {
	ok := fields(msg, func(num protowire.Number, typ protowire.Type, tag, field, value []byte) bool {
		drop, slim := keep(num)
		switch {
		case drop:
		case slim == nil:
			dst = append(dst, field...)
		case typ != protowire.BytesType:
			return false
		default:
			var ok bool
			dst, ok = appendLengthPrefixed(append(dst, tag...), value, slim)
			return ok
		}
		return true
	})
	return dst, ok
}

// appendLengthPrefixed appends value edited by slim, after its length.
// An edit only drops, so its length's varint is no longer than value's:
// the edit is appended after room for that, and moved back if its own
// is shorter.
func appendLengthPrefixed(dst, value []byte, slim edit) ([]byte, bool) {
	room := protowire.SizeVarint(uint64(len(value)))
	start := len(dst)
	dst = append(dst, make([]byte, room)...)
	dst, ok := slim(dst, value)
	if !ok {
		return dst, false
	}
	n := len(dst) - start - room
	size := protowire.SizeVarint(uint64(n))
	if n > len(value) || size > room {
		return dst, false
	}
	if size < room {
		copy(dst[start+size:], dst[start+room:])
		dst = dst[:len(dst)-(room-size)]
	}
	protowire.AppendVarint(dst[start:start], uint64(n))
	return dst, true
}

// eachField calls f with each field of msg (the value of a
// length-delimited field without its length, of another the encoded
// value) until it returns false; false if it did or msg cannot be read.
func eachField(msg []byte, f func(protowire.Number, protowire.Type, []byte) bool) bool {
	return fields(msg, func(num protowire.Number, typ protowire.Type, _, _, value []byte) bool {
		return f(num, typ, value)
	})
}

// fields calls f with each field of msg: its tag, the field whole (tag
// and value) and its value (a length-delimited one's without its
// length), until it returns false; false if it did or msg cannot be read.
func fields(msg []byte, f func(num protowire.Number, typ protowire.Type, tag, field, value []byte) bool) bool {
	for len(msg) > 0 {
		num, typ, tagLen := protowire.ConsumeTag(msg)
		if tagLen < 0 {
			return false
		}
		valueLen := protowire.ConsumeFieldValue(num, typ, msg[tagLen:])
		if valueLen < 0 {
			return false
		}
		field := msg[:tagLen+valueLen]
		value := field[tagLen:]
		if typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(value)
		}
		if !f(num, typ, msg[:tagLen], field, value) {
			return false
		}
		msg = msg[tagLen+valueLen:]
	}
	return true
}
