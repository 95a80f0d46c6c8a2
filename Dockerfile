# lockguard's image: the static binary, run as 65532 (nonroot), no shell.
#   make docker-build IMG=ghcr.io/navique/lockguard:dev
#
# No stage needs an image registry by default: GO_IMAGE is a local image of
# Debian and the Go toolchain (hack/image/go-image.sh, which make
# docker-build runs first) and the image is FROM scratch. With a registry,
# the published images work the same:
#   --build-arg GO_IMAGE=golang:1.26 --build-arg BASE_IMAGE=gcr.io/distroless/static:nonroot
ARG GO_IMAGE=lockguard.local/golang:1.26.8
ARG BASE_IMAGE=scratch

FROM ${GO_IMAGE} AS build
# The Go module proxy (the builder's default when empty).
ARG GOPROXY
WORKDIR /src
# Dependencies first, so that they are cached across source changes.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/lockguard ./cmd/lockguard
# The users and groups of distroless's static image, so that 65532 has a
# name (nonroot) on either base.
RUN mkdir -p /out/etc \
    && printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/etc/passwd \
    && printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >/out/etc/group

FROM ${BASE_IMAGE}
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build /out/lockguard /lockguard
# The chart runs the pod as 65532 too, with a read-only root filesystem.
USER 65532:65532
ENTRYPOINT ["/lockguard"]
