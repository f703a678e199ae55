# almanac: the verbs a newcomer looks for.
#
# One cargo profile (release) for run, test and bench, so DuckDB's C++ is
# compiled once per machine and the tests exercise the binaries that ship.

SHELL   := bash
CARGO   ?= cargo
# One build cache per machine, outside any clone (as .ci/run does): a
# fresh clone then never compiles DuckDB's C++ again.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/almanac/target
TARGET  := $(CARGO_TARGET_DIR)
BIN     := $(TARGET)/release
SITE    ?= site
DATA    ?= data
BIND    ?= 127.0.0.1:4000

.PHONY: all build site run test bench datasets fmt lint clean conformance client

all: build

## build: compile the generator and the api
build:
	$(CARGO) build --release --workspace --bins

## site: generate the site from datasets/ into site/ (and data/)
site: build
	$(BIN)/generator build --ledger-dir datasets/ledger --site-dir $(SITE) --data-dir $(DATA)

## run: build, generate the site, and serve it on 127.0.0.1:4000
run: site
	$(BIN)/api --bind $(BIND) --site-dir $(SITE) --data-dir $(DATA)

## conformance: install the MCP conformance suite (npm, pinned by its lock)
CONFORMANCE := tests/conformance
conformance: $(CONFORMANCE)/node_modules/.installed
$(CONFORMANCE)/node_modules/.installed: $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	cd $(CONFORMANCE) && npm ci --no-audit --no-fund
	touch $@

## client: install the reference broker client (npm, pinned by its lock).
## `npm install`, not `npm ci`: the lock lacks the optional platform builds of
## cbor-extract that the registry does not serve, which `npm ci` refuses;
## `npm install` keeps every locked version and skips them.
CLIENT := tests/client
client: $(CLIENT)/node_modules/.installed
$(CLIENT)/node_modules/.installed: $(CLIENT)/package.json $(CLIENT)/package-lock.json
	cd $(CLIENT) && npm install --no-audit --no-fund
	touch $@

## test: every test (unit, data-driven, end-to-end on loopback, the MCP
## conformance suite, the reference broker client), then a total
test: build conformance client
	@mkdir -p $(TARGET)
	set -o pipefail; $(CARGO) test --release --workspace --no-fail-fast --lib --bins --tests 2>&1 \
	  | tee $(TARGET)/test.log; status=$$?; \
	  awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' $(TARGET)/test.log; \
	  exit $$status

## bench: the benchmarks; prints figures (see README)
bench: build
	bash bench/run.sh

## datasets: rewrite datasets/ledger and datasets/broker/{agents,feedback}.json from
## their generators (deterministic)
datasets: build
	rm -rf datasets/ledger
	$(BIN)/generator datagen --preset rules --out datasets/ledger
	$(BIN)/generator datagen --preset agents --agents 300 --out datasets/broker

fmt:
	$(CARGO) fmt --all

lint:
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

clean:
	rm -rf $(SITE) $(DATA)
