# Images for the manager and the viewer (`make docker-build`). Both are static
# Go binaries on a distroless base, running as the unprivileged "nonroot" user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/viewer ./cmd/viewer

FROM gcr.io/distroless/static:nonroot AS manager
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]

FROM gcr.io/distroless/static:nonroot AS viewer
COPY --from=build /out/viewer /viewer
USER 65532:65532
ENTRYPOINT ["/viewer"]
