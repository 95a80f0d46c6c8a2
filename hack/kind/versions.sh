# Pinned versions of what make e2e-kind builds (sourced by hack/kind/*.sh).
# Kubernetes' own images (etcd, CoreDNS, pause) take the versions the built
# kubeadm asks for (kubeadm config images list).
KIND_VERSION=v0.33.0
# Debian release of the node image, the kube-proxy image and the Go builder.
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# The Go toolchain of the builder image (module golang.org/toolchain).
GO_TOOLCHAIN=1.26.8
CERT_MANAGER_VERSION=v1.21.2
# Local image names: never pushed, never pulled.
LOCAL_REGISTRY=lockguard.local
