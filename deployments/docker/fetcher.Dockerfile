# syntax=docker/dockerfile:1
#
# fetcher image: a static Go binary on distroless, run as the nonroot user
# (uid 65532). Build context: the repository root, since the binary is built
# from the go.work workspace (libs and the service modules):
#
#   docker build -f deployments/docker/fetcher.Dockerfile -t trawl/fetcher .
#
# The same binary with Chromium, for --render auto|always (issue 36): the
# target "render", on Debian bookworm-slim with Debian's chromium, also run
# as uid 65532:
#
#   docker build -f deployments/docker/fetcher.Dockerfile --target render -t trawl/fetcher-render .
#
# The default image stays small: no browser (Debian's chromium and
# chromium-common alone install 350 MB, before their libraries). The render
# stage is built only when asked for; the last stage is the default one.
#
# No HEALTHCHECK: orchestrators probe the admin server's /healthz and /readyz.
# Base images are pinned by digest. The digests were taken from public
# Dockerfiles that pin these tags and could not be checked from the machine
# this was written on (no registry access): refresh them with
#   crane digest golang:1.26.8-bookworm
#   crane digest debian:bookworm-slim
#   crane digest gcr.io/distroless/static-debian12:nonroot
# (deployments/docker/README.md).

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
COPY . .
# deployments/checks runs this same go build command in its tests.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o /out/fetcher ./services/fetcher/cmd/fetcher

# render: the fetcher and Debian's Chromium (chromedp starts it as child
# processes of the fetcher, one browser with --render-tabs tabs). The
# fetcher passes --no-sandbox (a container is the sandbox) and
# --disable-dev-shm-usage (Chromium's shared memory goes to /tmp, so a small
# /dev/shm does not crash tabs; compose and the Kubernetes component still
# give it a larger one). ca-certificates and tzdata: what distroless has and
# bookworm-slim lacks (the fetcher's HTTPS and robots.txt dates).
FROM debian:bookworm-slim@sha256:4b50eb66f977b4062683ff434ef18ac191da862dbe966961bc11990cf5791a8d AS render
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-liberation ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --create-home --home-dir /home/nonroot --shell /usr/sbin/nologin nonroot
COPY --from=build /out/fetcher /fetcher
USER nonroot:nonroot
WORKDIR /home/nonroot
# --chromium (libs/envflag: CRAWLER_ + the flag's name upper-cased). The
# render mode stays the fetcher's default (never) until CRAWLER_RENDER says
# auto or always: compose's trawl.env, the Kubernetes component.
ENV CRAWLER_ADMIN_ADDR=:9090 \
    CRAWLER_CHROMIUM=/usr/bin/chromium
EXPOSE 9090
ENTRYPOINT ["/fetcher"]

# The default image: no browser (--render never).
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/fetcher /fetcher
USER nonroot:nonroot
# The admin server (/metrics, /healthz, /readyz) listens on all interfaces in a
# container; the services default to loopback.
ENV CRAWLER_ADMIN_ADDR=:9090
EXPOSE 9090
ENTRYPOINT ["/fetcher"]
