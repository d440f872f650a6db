# Entry points. `make demo` and `make test` are the two set-up commands; both build what they need.
SHELL := /bin/bash
TOOLS_BIN := $(CURDIR)/.tools/bin
export PATH := $(TOOLS_BIN):$(PATH)
STACK ?=
GO_TEST_FLAGS ?= -timeout 40m

.PHONY: test unit lint build tools plan plan-check demo demo-down stacks preview up refresh destroy recover policy-pack bench schema docs

## build: compile every package, and the command line into bin/gpu-tenancy
build:
	go build ./...
	go build -o bin/gpu-tenancy ./cmd/gpu-tenancy

## lint: gofmt, go vet (the product and the provider module) and actionlint on the workflows
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@scripts/heartbeat.sh "go vet ./... (compiles every package: about 12 min on a cold build cache)" go vet ./...
	@cd provider && ../scripts/heartbeat.sh "go vet in provider/ (the component provider's module: minutes cold)" go vet ./...
	scripts/actionlint.sh

## test: lint, build the local control-plane tools, install the local stack's Debian packages (as root: the real nodes'
## tests run only as root), then every test (unit, plan freshness, the provider's schema and
## construct tests, end-to-end), the end-to-end shards side by side with the rest (scripts/test.sh)
test: lint tools
	@if [ "$$(id -u)" = 0 ]; then scripts/local-cluster.sh packages; fi
	@scripts/test.sh $(GO_TEST_FLAGS)

## unit: the fast tests only (no tools, no control plane)
unit:
	go test -short ./...
	cd provider && go test -short ./...

## docs: render the README's picture, docs/architecture.svg, from docs/architecture.dot (Debian package graphviz)
docs:
	dot -Tsvg docs/architecture.dot -o docs/architecture.svg

## schema: regenerate provider/schema.json from the args' Go types and the config reference (docs/installation-configuration.md),
## the config keys page, docs/config-reference.md, and the operators' Grafana dashboard, docs/grafana-dashboard.json
schema:
	cd provider && go run ./cmd/schemagen
	go run ./scripts/dashboard

## Environments, each a thin wrapper of the gpu-tenancy command of the same name on the environment STACK (default
## local: the local stack on .tools/state), with the policy pack; FLAGS are the command's (`gpu-tenancy <command>
## --help`), such as FLAGS=--changed-only for up, FLAGS="--delete-tenants a,b" for destroy and recover.
## stacks: the environment's stacks, in order
## preview: every stack refreshed, then previewed; with no STACK, every stack file's environment (scripts/preview-all.sh)
## up: the platform stack, then the tenant groups in parallel
## refresh, destroy, recover: as their names say; recover first says what it will run, and on which stacks
## Moves name their tenants: go run ./cmd/gpu-tenancy move <env> <tenant>... --to <group> [--preview]
stacks up refresh destroy recover: policy-pack
	go run ./cmd/gpu-tenancy $@ $(or $(STACK),local) $(FLAGS)

preview: policy-pack
	@if [ -n "$(STACK)" ]; then go run ./cmd/gpu-tenancy preview $(STACK) $(FLAGS); else scripts/preview-all.sh; fi

## tools: build the pulumi CLI, kubernetes provider and Kubernetes control plane into .tools/bin
tools:
	scripts/build-tools.sh

## plan: write stacks/plans/<stack>.json for STACK (or every stack) under mocks, offline
plan:
	go run ./scripts/plan $(STACK)

## plan-check: fail when a committed plan is stale
plan-check:
	go run ./scripts/plan -check $(STACK)

## bench: one table of figures: offline plan at 10/100/1000 tenants, the engine on a local control plane at 10, 40 and
## 100 tenants in tenant groups (one tenant added at 100) and the layouts weighed against them, a claim's admission with
## 10/100/1000 tenants' guards, API fairness, cold and warm builds against the SDK floor
## (about 45 minutes; asserts nothing)
bench: tools
	go run ./scripts/bench

## demo: local control plane with real nodes as root (else simulated GPU nodes; GT_NODES=none chooses them) + `up` of
## the local stack, then what each tenant sees, runs and is refused; builds only the tools the demo runs
demo:
	scripts/demo.sh

## demo-down: destroy the local stack and stop the local control plane
demo-down:
	scripts/demo.sh down

## policy-pack: build the guard-rail policy pack (./policy) into .tools/bin (make tools does too)
policy-pack:
	go build -o $(TOOLS_BIN)/gpu-tenancy-policy ./policy
