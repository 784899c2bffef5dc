# Deckhand manager image: `make docker-build IMG=<registry>/deckhand:<tag>`,
# or every platform at once: `make docker-buildx IMG=...`.
# Stage 1 builds a static binary; stage 2 is distroless (no shell, no
# package manager) and runs as the unprivileged "nonroot" user (65532).
# The builder runs on the build machine's own platform and cross-compiles
# for the target (Go needs no emulation for that), so a multi-arch build
# never runs the compiler under QEMU.

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /workspace

# Dependencies first: this layer is reused until go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/

# CGO off: a static binary that needs no libc in the final image.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w -X github.com/deckhand-dev/deckhand/internal/version.Version=${VERSION} -X github.com/deckhand-dev/deckhand/internal/version.Revision=${REVISION}" -o manager ./cmd/deckhand

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532
ENTRYPOINT ["/manager"]
