package readmodel

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/internal/cachestore"
)

// objectIDs are an object's UID and resourceVersion as the cache keeps
// them (Meta, CachedLock): as numbers when they have the usual form, zero
// otherwise, and then exactly as written in the object's rare part
// (oddIDs), which most objects have not.
type objectIDs struct {
	// uid is the UID when it is a UUID in canonical form and not all
	// zeros; zero otherwise.
	uid [16]byte
	// rv is the resourceVersion when it is a decimal number without
	// leading zeros, above 0; 0 otherwise.
	rv uint64
}

// oddIDs are a UID and a resourceVersion not in the usual form.
type oddIDs struct {
	uid types.UID
	rv  string
}

// getUID returns the UID; odd is the object's oddIDs, nil when it has no
// rare part.
func (x *objectIDs) getUID(odd *oddIDs) types.UID {
	if x.uid == ([16]byte{}) {
		if odd == nil {
			return ""
		}
		return odd.uid
	}
	return types.UID(cachestore.FormatUUID(x.uid))
}

// setUID sets the UID; odd is the object's oddIDs (nil when it has no rare
// part), more makes the rare part and returns its oddIDs.
func (x *objectIDs) setUID(uid types.UID, odd *oddIDs, more func() *oddIDs) {
	if b, ok := cachestore.ParseUUID(string(uid)); ok {
		x.uid = b
		if odd != nil {
			odd.uid = ""
		}
		return
	}
	x.uid = [16]byte{}
	if uid != "" || odd != nil {
		more().uid = uid
	}
}

// getRV returns the resourceVersion, as getUID the UID.
func (x *objectIDs) getRV(odd *oddIDs) string {
	if x.rv == 0 {
		if odd == nil {
			return ""
		}
		return odd.rv
	}
	return strconv.FormatUint(x.rv, 10)
}

// setRV sets the resourceVersion, as setUID the UID.
func (x *objectIDs) setRV(version string, odd *oddIDs, more func() *oddIDs) {
	if n, err := strconv.ParseUint(version, 10, 64); err == nil && n > 0 && strconv.FormatUint(n, 10) == version {
		x.rv = n
		if odd != nil {
			odd.rv = ""
		}
		return
	}
	x.rv = 0
	if version != "" || odd != nil {
		more().rv = version
	}
}
