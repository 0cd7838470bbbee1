# syntax=docker/dockerfile:1
#
# seeder image: a static Go binary on distroless, run as the nonroot user
# (uid 65532). Build context: the repository root, since the binary is built
# from the go.work workspace (libs and the service modules):
#
#   docker build -f deployments/docker/seeder.Dockerfile -t trawl/seeder .
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
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/seeder ./services/seeder/cmd/seeder

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/seeder /seeder
USER nonroot:nonroot
# The admin server (/metrics, /healthz, /readyz) listens on all interfaces in a
# container, the crawl-jobs API of `seeder serve` on 8480; the services default to loopback.
ENV CRAWLER_ADMIN_ADDR=:9090 CRAWLER_API_ADDR=:8480
EXPOSE 9090 8480
ENTRYPOINT ["/seeder"]
