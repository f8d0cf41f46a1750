# syntax=docker/dockerfile:1
# Build: docker build -t taskcenter .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/taskcenter ./cmd/taskcenter

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /data taskcenter \
    && mkdir -p /data && chown taskcenter /data
COPY --from=build /out/taskcenter /usr/local/bin/taskcenter
COPY configs/taskcenter.yaml /etc/taskcenter/taskcenter.yaml
ENV TASKCENTER_CONFIG=/etc/taskcenter/taskcenter.yaml \
    TASKCENTER_DATA_DIR=/data
USER taskcenter
VOLUME /data
EXPOSE 8080 9091
ENTRYPOINT ["taskcenter", "serve"]
CMD ["--roles", "all"]
