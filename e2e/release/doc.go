// Package release checks a release directory written by make release
// (hack/release/release.sh) as users receive it: run by make release-check
// (hack/release/check.sh) with build tag release, LOCKGUARD_RELEASE_DIST
// (the directory) and LOCKGUARD_RELEASE_VERSION (vX.Y.Z). It checks that
// the version agrees everywhere it is written, that the image archives are
// lockguard's image in an OCI layout docker and containerd load, that helm
// install of the packaged chart on a real kube-apiserver creates the objects
// the chart directory renders, and that each SBOM lists the module's direct
// dependencies its binary links, with their versions.
package release
