// Package sharedversions is never built into a control plane. It imports
// lockguard so that lockguard's go.mod is part of this module's requirements:
// Go's minimal version selection then picks, for every module both use
// (golang.org/x/net, google.golang.org/protobuf, client-go's own
// dependencies...), at least lockguard's version. kube-apiserver and
// lockguard then compile the same packages (k8s.io/api, apimachinery,
// client-go, apiserver...) from the same sources with the same flags
// (CGO_ENABLED=0, -trimpath: the Makefile's), so the Go build cache compiles
// them once for both (issue 26). `make tidy` keeps it so when lockguard's
// go.mod changes, and `make verify-tidy` fails until it does.
package sharedversions

import _ "github.com/navique/lockguard/api/v1alpha1"
