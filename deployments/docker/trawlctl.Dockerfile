# syntax=docker/dockerfile:1
#
# trawlctl image: a static Go binary on distroless, run as the nonroot user
# (uid 65532). Build context: the repository root, since the binary is built
# from the go.work workspace (libs and the service modules):
#
#   docker build -f deployments/docker/trawlctl.Dockerfile -t trawl/trawlctl .
#
# No HEALTHCHECK: orchestrators probe the admin server's /healthz and /readyz.
# Base images are pinned by digest. The digests were taken from public
# Dockerfiles that pin these tags and could not be checked from the machine
# this was written on (no registry access): refresh them with
#   crane digest golang:1.26.8-bookworm
#   crane digest gcr.io/distroless/static-debian12:nonroot
# (deployments/docker/README.md).

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
COPY . .
# deployments/checks runs this same go build command in its tests.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/trawlctl ./services/seeder/cmd/trawlctl

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/trawlctl /trawlctl
USER nonroot:nonroot
ENTRYPOINT ["/trawlctl"]
