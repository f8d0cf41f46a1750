# taskcenter — the two commands a new user needs are `make run` and `make test`.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

GO      ?= go
PKGS    := ./...

.PHONY: run test services services-stop services-status build vet fmt clean

## run: start Redis and Postgres if needed, then the whole service (API, workers, scheduler)
run: services
	$(GO) run ./cmd/taskcenter serve --roles all

## test: start Redis and Postgres if needed, then the whole test suite with the race detector
test: services
	@scripts/services.sh tools
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## services: reuse or install and start Redis and Postgres (data under ./data)
services:
	@scripts/services.sh up

## services-stop: stop the Redis and Postgres that `make services` started
services-stop:
	@scripts/services.sh down

services-status:
	@scripts/services.sh status

## build: compile bin/taskcenter
build:
	$(GO) build -o bin/taskcenter ./cmd/taskcenter

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

clean:
	rm -rf bin

## bench: build and run the benchmarks; figures print as a table and land in bench-results/
.PHONY: bench
bench: services build
	$(GO) build -o bin/tcbench ./cmd/tcbench
	bin/tcbench
