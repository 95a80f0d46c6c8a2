# lockguard's image: a static binary on distroless, running as non-root.
#   make docker-build IMG=ghcr.io/navique/lockguard:dev
FROM golang:1.26 AS build
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

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/lockguard /lockguard
# 65532 is distroless's nonroot user; the chart runs the pod as it.
USER 65532:65532
ENTRYPOINT ["/lockguard"]
