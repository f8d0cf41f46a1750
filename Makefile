# taskcenter — the two commands a new user needs are `make run` and `make test`.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)

GO      ?= go
# Builds leave out the checkout's path (-trimpath), so the build cache's entries do not depend
# on where the repository is: a fresh clone reuses what an earlier checkout compiled. On a
# 2-core machine a fresh clone's `go test -race` compile went from 265 to 62 CPU-seconds
# (measured 2026-12-03, host vm).
export GOFLAGS := -trimpath $(filter-out -trimpath,$(GOFLAGS))
PKGS    := ./...
# How many test packages run at once in `make test`: twice the CPUs, since most packages spend
# their time waiting on Postgres, Redis, child processes and timers rather than computing
# (at go test's default, one per CPU, a 2-core machine's CPUs sat half idle).
TESTPKGS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 2) )))

# Where `make test` puts the test binaries it links and the files its tests write: a
# directory on /dev/shm (memory) when that has 4 GB free, else the system's temporary
# directory. Linking the race-instrumented test binaries writes a few gigabytes; on a disk
# that waits for writes, linking them all took 128 s, against 55 s in memory (2026-12-03,
# host vm, `go test -race -run '^$$' ./...` with a warm build cache).
TESTTMP ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && \
  [ $$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $$4}') -ge 4194304 ] 2>/dev/null && \
  mkdir -p /dev/shm/taskcenter-test && echo /dev/shm/taskcenter-test)

.PHONY: run test services services-stop services-status build vet fmt clean soak fuzz chaos

## run: start Redis and Postgres if needed (and, with TASKCENTER_STORAGE_BACKEND=s3, an S3
## gateway), then the whole service (API, workers, scheduler)
run: services
	$(GO) run ./cmd/taskcenter serve --roles all

## test: start Redis and Postgres if needed, lint the OpenAPI document, run the whole test
## suite with the race detector (every exchange of the API and end-to-end tests is checked
## against the document; the model tests of the state machine and of the worker runtime run
## 200 seeds each), compile a generated TypeScript client against the bodies the suite
## recorded, then run each fuzz target briefly. go vet and the document's lint run side by
## side (neither needs the other, and vet alone leaves a CPU idle while it waits on a build);
## the test databases the suite made are dropped while the client and the fuzz targets run
## (dropping waits on the disk, they on the CPUs), and the client (one TypeScript compile,
## one CPU) is checked while the fuzz targets are built and run
test: services
	@scripts/services.sh tools
	@scripts/contract.sh lint > data/contract-lint.log 2>&1 & lint=$$!; \
	  $(GO) vet $(PKGS); vet=$$?; \
	  wait $$lint; st=$$?; cat data/contract-lint.log; \
	  [ $$vet -eq 0 ] && [ $$st -eq 0 ] || { echo "make test: go vet or the contract lint failed" >&2; exit 1; }
	@rm -rf data/contract-bodies data/test-reports
	$(if $(TESTTMP),export GOTMPDIR=$(TESTTMP) TMPDIR=$(TESTTMP);) \
	TASKCENTER_CONTRACT_RECORD=$(CURDIR)/data/contract-bodies TASKCENTER_TEST_REPORTS=$(CURDIR)/data/test-reports \
	  $(GO) test -race -count=1 -timeout 20m -p $(TESTPKGS) $(PKGS); st=$$?; \
	  scripts/services.sh prune-test-dbs & prune=$$!; \
	  if [ $$st -eq 0 ]; then \
	    cat data/test-reports/*.txt 2>/dev/null; \
	    scripts/contract.sh client data/contract-bodies & client=$$!; \
	    scripts/fuzz.sh 3s; st=$$?; wait $$client || st=1; \
	  fi; \
	  wait $$prune; exit $$st

## soak: the model tests of the state machine (store) and of the worker runtime (jobs) over
## 10,000 seeds each (TASKCENTER_MODEL_SEEDS to change)
soak: services
	TASKCENTER_MODEL_SEEDS=$${TASKCENTER_MODEL_SEEDS:-10000} $(GO) test -count=1 -run 'TestStateMachineModel|TestRuntimeModel' -timeout 6h -v ./store/ ./jobs/ | tail -40

## fuzz: every fuzz target for 5 minutes (FUZZTIME to change); crashers land in testdata/fuzz
fuzz:
	scripts/fuzz.sh $${FUZZTIME:-5m}

## chaos: real processes killed, terminated, and Redis and Postgres restarted under load, and
## the Redis master of a Sentinel set and of a Redis Cluster killed; prints the tables and
## updates docs/reliability.md
chaos: services
	TASKCENTER_CHAOS=1 TASKCENTER_CHAOS_WRITE_DOC=1 $(GO) test -count=1 -run Chaos -v -timeout 40m ./cmd/taskcenter/

## services: reuse or install and start Redis and Postgres, and the S3 gateway when storage is s3 (data under ./data)
services:
	@scripts/services.sh up

## services-stop: stop the Redis, Postgres and S3 gateway that `make services` started
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
