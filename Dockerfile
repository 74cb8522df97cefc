# Images for the manager and the viewer with a container engine
# (`make docker-build`). `make images` builds the same images without one
# (hack/images, docs/images.md): a scratch image holding the static binary and
# the base files hack/images writes (/etc/passwd and /etc/group naming the
# non-root user 65532, /etc/ssl/certs/ca-certificates.crt), user 65532, the
# binary as the entrypoint.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY hack/images/ hack/images/
RUN cd hack/images && go mod download && go run . rootfs /out/rootfs
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# The release and the commit, as `make images` stamps them (internal/version).
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -o /out/ \
      -ldflags "-s -w -X github.com/trellis-dev/trellis/internal/version.Version=$VERSION -X github.com/trellis-dev/trellis/internal/version.Revision=$REVISION" \
      ./cmd/manager ./cmd/viewer

FROM scratch AS manager
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title=trellis-manager \
      org.opencontainers.image.description="The Trellis operator" \
      org.opencontainers.image.source=https://github.com/trellis-dev/trellis \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.version=$VERSION
COPY --from=build /out/rootfs/ /
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

FROM scratch AS viewer
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title=trellis-viewer \
      org.opencontainers.image.description="Serves a MarkdownView as a website" \
      org.opencontainers.image.source=https://github.com/trellis-dev/trellis \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.version=$VERSION
COPY --from=build /out/rootfs/ /
COPY --from=build /out/viewer /viewer
USER 65532:65532
ENTRYPOINT ["/viewer"]
