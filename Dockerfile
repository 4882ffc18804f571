# syntax=docker/dockerfile:1
#
# toolgate container image: the `toolgate` binary on a distroless base, run as the
# non-root user 65532 with a read-only-friendly layout.
#
#   docker build -t toolgate .
#   docker run --rm -p 8080:8080 toolgate                   # built-in config, no upstreams
#   docker run --rm -p 8080:8080 -v "$PWD/toolgate.yaml:/etc/toolgate/config.yaml:ro" toolgate
#
# The image ships the binary only: stdio upstreams that need another runtime (npx,
# node, python, uvx) need an image that has it; HTTP, SSE and OpenAPI upstreams work
# as is.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release -p toolgate --locked \
    && install -D -m 0755 target/release/toolgate /out/usr/local/bin/toolgate \
    && install -d -m 0700 /out/var/lib/toolgate

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/usr/local/bin/toolgate /usr/local/bin/toolgate
# Runtime state (admin-registered upstreams); mount a volume here to keep it.
COPY --from=build --chown=65532:65532 /out/var/lib/toolgate /var/lib/toolgate
COPY config/container.yaml /etc/toolgate/config.yaml
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve", "--config", "/etc/toolgate/config.yaml"]
