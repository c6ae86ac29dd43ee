# tollgate's build and test entry points. `make test` is what CI runs
# (.ci/run): on a machine with Docker, apt and no registry, it builds the
# images it needs, vets, runs every test (integration against real Redis
# containers and a Redis Cluster included), the integration package again
# on Valkey 8, then the docker-compose smoke tests (one Redis; a 3-master
# cluster; Envoy's rate limit service). scripts/test.sh runs each step
# even after one failed, ends with a summary and always removes the test
# containers. The real-proxy tests (integration/edge) need nginx and
# caddy: scripts/edge-tools.sh installs them from Debian when missing;
# the page's browser test and the alert rules' checks need chromium and
# promtool: scripts/ui-tools.sh installs them.

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin

# Integration tests: the local Redis image (scripts/redis-image.sh), no
# reaper (it cannot be pulled), published ports on localhost.
export TOLLGATE_TEST_REDIS_IMAGE ?= tollgate.local/redis:7
# The second store the integration package runs on (scripts/valkey-image.sh).
VALKEY_IMAGE ?= tollgate.local/valkey:8
export TESTCONTAINERS_RYUK_DISABLED := true
export TESTCONTAINERS_HOST_OVERRIDE ?= localhost

# One id per make run, on every container the tests start, so that the
# cleanup removes this run's containers and nothing else.
ifndef TOLLGATE_TEST_RUN
TOLLGATE_TEST_RUN := $(shell od -An -N4 -tx4 /dev/urandom | tr -d ' ')
endif
export TOLLGATE_TEST_RUN

BENCH ?= .
BENCH_COUNT ?= 5
BENCH_PKGS ?= ./integration/

.PHONY: test unit vet bench bench-integration bench-gateway bench-edge image compose-up compose-down compose-test compose-cluster-up compose-cluster-down compose-cluster-test compose-rls-up compose-rls-down compose-rls-test clean

## test: images, go vet, all tests with -race, the integration tests again
## on Valkey, compose smoke tests: every step even after a failure, then a
## summary (scripts/test.sh; STEPS="valkey compose" runs only those); cleanup always
test:
	@VALKEY_IMAGE=$(VALKEY_IMAGE) MAKE="$(MAKE)" scripts/test.sh

## unit: the tests that need no Docker
unit:
	go test -race -shuffle=on -count=1 -short ./...

vet:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	cd bench && go vet ./...

## bench: the Redis store against its peers on a local redis-server, then
## across network lanes of 0.2, 0.6 and 2 ms round trip (LANES; root:
## scripts/netlane.sh), and wrk through the gateway (scripts/bench.sh:
## installs, starts and stops what it needs; writes bench/out/table.md,
## bench/out/network.md, docs/bench-redis.png and docs/bench-network.png)
bench:
	scripts/bench.sh

## bench-integration: the Redis benchmarks in integration/ (Redis in Docker;
## INFO commandstats per decision)
bench-integration: image
	go test -run '^$$' -bench '$(BENCH)' -benchmem -count=$(BENCH_COUNT) $(BENCH_PKGS)

## bench-gateway: tollgate side by side with a bare httputil.ReverseProxy,
## nginx limit_req and HAProxy under wrk (bench/gateway/run.sh; ~20 min;
## not part of test). Writes docs/gateway-bench.{tsv,md,png}.
## ROUNDS, DURATION, PORT_BASE, TARGETS, BASELINE_REV: see the script.
bench-gateway:
	bench/gateway/run.sh

## bench-edge: nginx -> tollgate's check listener -> upstream beside nginx ->
## a static auth responder and nginx limit_req alone, and the check listener's
## decisions/s beside the proxy's (bench/edge/run.sh; wrk; not part of test).
## ROUNDS, DURATION, PORT_BASE: see the script.
bench-edge:
	bench/edge/run.sh

## image: the Redis, Valkey and gateway images, built locally
image:
	scripts/redis-image.sh >/dev/null
	scripts/valkey-image.sh >/dev/null
	scripts/gateway-image.sh >/dev/null

compose-up: image
	scripts/compose.sh -p tollgate -f docker-compose.yml down --remove-orphans
	scripts/compose.sh -p tollgate -f docker-compose.yml up -d

compose-down:
	scripts/compose.sh -p tollgate -f docker-compose.yml down -v --remove-orphans

compose-test:
	scripts/compose-test.sh

## compose-cluster-up: a 3-master Redis Cluster and two gateways (docker-compose.cluster.yml)
compose-cluster-up: image
	scripts/compose.sh -p tollgate-cluster -f docker-compose.cluster.yml down --remove-orphans
	scripts/compose.sh -p tollgate-cluster -f docker-compose.cluster.yml up -d

compose-cluster-down:
	scripts/compose.sh -p tollgate-cluster -f docker-compose.cluster.yml down -v --remove-orphans

compose-cluster-test:
	scripts/compose-cluster-test.sh

## compose-rls-up: Envoy's rate limit service on two gateways and one Redis (docker-compose.rls.yml)
compose-rls-up: image
	scripts/compose.sh -p tollgate-rls -f docker-compose.rls.yml down --remove-orphans
	scripts/compose.sh -p tollgate-rls -f docker-compose.rls.yml up -d

compose-rls-down:
	scripts/compose.sh -p tollgate-rls -f docker-compose.rls.yml down -v --remove-orphans

compose-rls-test:
	scripts/compose-rls-test.sh

## clean: remove this project's test containers (any run), compose stacks and local images
clean:
	TOLLGATE_TEST_RUN= scripts/cleanup-containers.sh
	-scripts/compose.sh -p tollgate -f docker-compose.yml down -v --remove-orphans 2>/dev/null
	-scripts/compose.sh -p tollgate-ci -f docker-compose.yml down -v --remove-orphans 2>/dev/null
	-scripts/compose.sh -p tollgate-cluster -f docker-compose.cluster.yml down -v --remove-orphans 2>/dev/null
	-scripts/compose.sh -p tollgate-ci-cluster -f docker-compose.cluster.yml down -v --remove-orphans 2>/dev/null
	-scripts/compose.sh -p tollgate-rls -f docker-compose.rls.yml down -v --remove-orphans 2>/dev/null
	-scripts/compose.sh -p tollgate-rls-ci -f docker-compose.rls.yml down -v --remove-orphans 2>/dev/null
	-docker image rm tollgate.local/redis:7 $(VALKEY_IMAGE) tollgate.local/tollgate:dev 2>/dev/null
	go clean -testcache
