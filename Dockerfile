# syntax=docker/dockerfile:1
#
# toolgate container images, run as the non-root user 65532 with a layout that works
# on a read-only root filesystem (writable: /var/lib/toolgate for state, /tmp):
#
#   docker build -t toolgate .                                # `runtime`: the binary on distroless
#   docker build --target runtime-node -t toolgate:node .     # + Node.js (npx) and uv (uvx)
#   docker run --rm -p 8080:8080 toolgate                     # built-in config, no upstreams
#   docker run --rm -p 8080:8080 -v "$PWD/toolgate.yaml:/etc/toolgate/config.yaml:ro" toolgate
#
# `runtime` ships the binary only: HTTP, SSE and OpenAPI upstreams work as is. Stdio
# upstreams started with npx, node, uvx or python need `runtime-node`.
# Both check themselves with `toolgate healthcheck` (GET /readyz at the listen address
# of /etc/toolgate/config.yaml): no shell or curl is needed.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The `dist` profile is `release` stripped of symbols (Cargo.toml says why it is its own).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist -p toolgate --locked \
    && install -D -m 0755 target/dist/toolgate /out/usr/local/bin/toolgate \
    && install -d -m 0700 /out/var/lib/toolgate

# Node.js and npm (npx) from Debian, uv (uvx) from PyPI, for stdio MCP servers. Every
# download cache and home directory is under /tmp, so a read-only root filesystem
# with a writable /tmp works; point them at a volume to keep downloads across restarts.
FROM debian:bookworm-slim AS runtime-node
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates nodejs npm python3 python3-venv \
    && python3 -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir uv==0.13.8 \
    && ln -s /opt/uv/bin/uv /opt/uv/bin/uvx /usr/local/bin/ \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 65532 nonroot \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin nonroot
ENV HOME=/tmp \
    npm_config_cache=/tmp/npm-cache \
    npm_config_update_notifier=false \
    UV_CACHE_DIR=/tmp/uv-cache \
    UV_TOOL_DIR=/tmp/uv-tools \
    UV_PYTHON_INSTALL_DIR=/tmp/uv-python
COPY --from=build /out/usr/local/bin/toolgate /usr/local/bin/toolgate
# Runtime state (admin-registered upstreams); mount a volume here to keep it.
COPY --from=build --chown=65532:65532 /out/var/lib/toolgate /var/lib/toolgate
COPY config/container.yaml /etc/toolgate/config.yaml
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/toolgate", "healthcheck", "--config", "/etc/toolgate/config.yaml"]
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve", "--config", "/etc/toolgate/config.yaml"]

# The default target (last): the binary alone on distroless, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/usr/local/bin/toolgate /usr/local/bin/toolgate
# Runtime state (admin-registered upstreams); mount a volume here to keep it.
COPY --from=build --chown=65532:65532 /out/var/lib/toolgate /var/lib/toolgate
COPY config/container.yaml /etc/toolgate/config.yaml
USER 65532:65532
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/toolgate", "healthcheck", "--config", "/etc/toolgate/config.yaml"]
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve", "--config", "/etc/toolgate/config.yaml"]
