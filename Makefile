# almanac: the verbs a newcomer looks for.
#
# One cargo profile (release) for run, test and bench, so the tests exercise
# the binaries that ship.

SHELL   := bash
CARGO   ?= cargo
# One build cache per machine, outside any clone (as .ci/run does), so a
# fresh clone reuses what an earlier one compiled.
export CARGO_TARGET_DIR ?= $(HOME)/.cache/almanac/target
TARGET  := $(CARGO_TARGET_DIR)
BIN     := $(TARGET)/release

# DuckDB. Default: the DuckDB project's prebuilt libduckdb.so (1.5.6, pinned
# with its integrity in duckdb/fetch.sh), fetched once per machine into
# DUCKDB_CACHE and linked dynamically; the binaries find it by their run
# path (duckdb/rpath.rs), with no LD_LIBRARY_PATH. `make DUCKDB=bundled ...`
# compiles DuckDB from source instead (about 30 minutes on 2 cores), for
# platforms the prebuilt library does not cover.
DUCKDB       ?= prebuilt
DUCKDB_CACHE ?= $(HOME)/.cache/almanac/duckdb-1.5.6
ifeq ($(DUCKDB),prebuilt)
export DUCKDB_LIB_DIR := $(DUCKDB_CACHE)
CARGO_FEATURES :=
else ifeq ($(DUCKDB),bundled)
unexport DUCKDB_LIB_DIR
CARGO_FEATURES := --features generator/bundled
else
$(error DUCKDB is "prebuilt" (the default) or "bundled", not "$(DUCKDB)")
endif
PREFIX  ?= /opt/almanac
SITE    ?= site
DATA    ?= data
BIND    ?= 127.0.0.1:4000

.PHONY: all duckdb evm build tools test-build install site run run-flags test bench fuzz datasets fmt lint clean conformance client a2a readers schemathesis plugin-scanner moto debian screenshots

all: build

## duckdb: fetch the pinned prebuilt DuckDB library into DUCKDB_CACHE
## (once; later runs find it there and touch no network)
duckdb:
ifeq ($(DUCKDB),prebuilt)
	@bash duckdb/fetch.sh $(DUCKDB_CACHE) >/dev/null
endif

## evm: the local EVM node (anvil) and the Solidity compiler (solc-js),
## from the npm registry at the versions evm/package-lock.json pins with
## their integrity, fetched once per machine into EVM_CACHE; and the
## contracts of evm/contracts compiled into EVM_CONTRACTS (again only when
## a source changed). The tests and `make run` find both through the
## variables exported here.
EVM_CACHE ?= $(HOME)/.cache/almanac/evm
export ALMANAC_ANVIL     := $(EVM_CACHE)/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
export ALMANAC_CONTRACTS := $(TARGET)/evm/contracts.json
evm: $(ALMANAC_CONTRACTS)
	@bash evm/fetch.sh $(EVM_CACHE) >/dev/null
$(ALMANAC_CONTRACTS): evm/compile.js evm/package-lock.json $(wildcard evm/contracts/*.sol)
	@bash evm/fetch.sh $(EVM_CACHE) >/dev/null
	node evm/compile.js $(EVM_CACHE)/node_modules evm/contracts $@

## build: compile what `make run` runs: the generator, the api and the
## local networks (the benchmark, data generator, screenshot and
## fault-injection tools are `make tools`)
build: duckdb
	$(CARGO) build --release $(CARGO_FEATURES) -p generator -p api --bin generator --bin api -p local-peers --bin localnet --bin evmnet --bin archivehost

## tools: compile every binary of the workspace: `build`'s and the tools
## `make test`, `make bench` and `make datasets` run
tools: duckdb
	$(CARGO) build --release --workspace --bins $(CARGO_FEATURES)

## test-build: compile everything `make test` runs, running nothing
test-build: tools
	$(CARGO) test --release --workspace $(CARGO_FEATURES) --no-run --tests

## install: the binaries and libduckdb.so side by side in PREFIX/bin
## [/opt/almanac]: one folder to copy to a server. The binaries lose their
## line tables (a server's panics still name their functions); the test
## builds and tools (`*-with-faults`, datagen, bench, screenshots) stay
## behind.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BIN)/generator $(BIN)/api $(DESTDIR)$(PREFIX)/bin/
	strip --strip-debug $(DESTDIR)$(PREFIX)/bin/generator $(DESTDIR)$(PREFIX)/bin/api
ifeq ($(DUCKDB),prebuilt)
	install -m 644 $(DUCKDB_CACHE)/libduckdb.so $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/doc/almanac
	install -m 644 $(DUCKDB_CACHE)/LICENSE $(DESTDIR)$(PREFIX)/share/doc/almanac/LICENSE.duckdb
endif

## site: generate the site from datasets/ into site/ (and data/)
site: build
	mkdir -p $(DATA) && $(BIN)/api openapi > $(DATA)/openapi.json
	$(BIN)/generator build --ledger-dir datasets/ledger --site-dir $(SITE) --data-dir $(DATA) --openapi $(DATA)/openapi.json

## run: build, generate the site, and serve it on 127.0.0.1:4000 (dev
## accounts sign in without a network; their points of the dataset's
## luna0 token are redeemable for credits; the demo agents answer chat on
## 127.0.0.1:4101 and :4102; content is inscribed on a small Hedera
## network on loopback, `localnet`: its mirror node on 127.0.0.1:5600, a
## consensus node on :50211, the dev account 0.0.1003 paying; Programmable
## Secrets are published and sold on a local EVM chain, `evmnet`: anvil on
## 127.0.0.1:8545 with the contracts deployed, kept in DATA/evm, and a
## master key made once into DATA/secrets-master-key; plugins are imported
## from `archivehost` on 127.0.0.1:5700, which serves the scanner's corpus
## as the repositories corpus/<name>, their commits listed in
## DATA/plugin-archives.json)
REDEEM_TOKEN   ?= 0.0.5000001:luna0
LOCALNET_MIRROR ?= 127.0.0.1:5600
LOCALNET_NODE   ?= 0.0.3=127.0.0.1:50211
EVMNET_BIND     ?= 127.0.0.1:8545
ARCHIVEHOST_BIND ?= 127.0.0.1:5700
RUN_API_FLAGS = --redeem-token $(REDEEM_TOKEN) --demo-agents \
  --plugins-archive-host http://$(ARCHIVEHOST_BIND) \
  --hapi-node $(LOCALNET_NODE) --inscription-mirror-url http://$(LOCALNET_MIRROR) \
  --inscription-account 0.0.1003 --inscription-keys-file $(CURDIR)/datasets/live/dev-keys.json
RUN_SECRETS_FLAGS = --secrets-chain $(DATA)/evm/manifest.json --secrets-master-key-file $(DATA)/secrets-master-key
run: site evm
	$(BIN)/localnet --mirror $(LOCALNET_MIRROR) --node $(LOCALNET_NODE) --state $(DATA)/localnet.jsonl & localnet=$$!; \
	rm -f $(DATA)/evm/manifest.json; \
	$(BIN)/evmnet --bind $(EVMNET_BIND) --state $(DATA)/evm --manifest $(DATA)/evm/manifest.json & evmnet=$$!; \
	$(BIN)/archivehost --bind $(ARCHIVEHOST_BIND) --corpus plugins/corpus --index $(DATA)/plugin-archives.json & archivehost=$$!; \
	trap "kill $$localnet $$evmnet $$archivehost 2>/dev/null; wait $$evmnet" EXIT; \
	test -s $(DATA)/secrets-master-key || (umask 077; head -c 32 /dev/urandom | base64 > $(DATA)/secrets-master-key); \
	until test -s $(DATA)/evm/manifest.json; do kill -0 $$evmnet 2>/dev/null || exit 1; sleep 0.2; done; \
	$(BIN)/api --bind $(BIND) --site-dir $(SITE) --data-dir $(DATA) $(RUN_API_FLAGS) $(RUN_SECRETS_FLAGS)

## run-flags: print the api's flags `make run` gives it besides where it
## binds and its folders (the test that `make run` sends nothing off the
## machine starts the api with them)
run-flags:
	@echo $(RUN_API_FLAGS)

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

## a2a: install the official A2A SDK the chat tests build agents with
## (npm, pinned by its lock)
A2A := tests/a2a
a2a: $(A2A)/node_modules/.installed
$(A2A)/node_modules/.installed: $(A2A)/package.json $(A2A)/package-lock.json
	cd $(A2A) && npm ci --no-audit --no-fund
	touch $@

## readers: the DuckDB releases analysts open the snapshots with (Python
## packages, one virtualenv each, cached once per machine); the tests check
## that each opens a snapshot and answers as the generator's DuckDB does
READER_VERSIONS := 1.1.0 1.4.4 2.0.0
READERS_DIR     := $(HOME)/.cache/almanac/python
READERS         := $(foreach v,$(READER_VERSIONS),$(READERS_DIR)/duckdb-$(v)/.installed)
export ALMANAC_DUCKDB_READERS := $(foreach v,$(READER_VERSIONS),$(READERS_DIR)/duckdb-$(v)/bin/python)
readers: $(READERS)
$(READERS_DIR)/duckdb-%/.installed:
	rm -rf $(@D) && python3 -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check duckdb==$*
	touch $@

## schemathesis: the property-based API tester that runs against the live
## api in `make test` (PyPI, pinned, one virtualenv cached once per machine)
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_DIR     := $(READERS_DIR)/schemathesis-$(SCHEMATHESIS_VERSION)
export ALMANAC_SCHEMATHESIS := $(SCHEMATHESIS_DIR)/bin/st
schemathesis: $(SCHEMATHESIS_DIR)/.installed
$(SCHEMATHESIS_DIR)/.installed:
	rm -rf $(@D) && python3 -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check schemathesis==$(SCHEMATHESIS_VERSION)
	touch $@

## plugin-scanner: the reference scanner of agent plugins (PyPI, pinned,
## one virtualenv cached once per machine); the tests check that almanac's
## scanner agrees with it over plugins/corpus
PLUGIN_SCANNER_VERSION := 3.57.0
PLUGIN_SCANNER_DIR     := $(READERS_DIR)/plugin-scanner-$(PLUGIN_SCANNER_VERSION)
export ALMANAC_PLUGIN_SCANNER := $(PLUGIN_SCANNER_DIR)/bin/plugin-scanner
plugin-scanner: $(PLUGIN_SCANNER_DIR)/.installed
$(PLUGIN_SCANNER_DIR)/.installed:
	rm -rf $(@D) && python3 -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check plugin-scanner==$(PLUGIN_SCANNER_VERSION)
	touch $@

## moto: an S3-compatible server the tests publish builds to and apis
## follow them from (PyPI, pinned, one virtualenv cached once per machine)
MOTO_VERSION := 5.2.6
MOTO_DIR     := $(READERS_DIR)/moto-$(MOTO_VERSION)
export ALMANAC_MOTO := $(MOTO_DIR)/bin/moto_server
moto: $(MOTO_DIR)/.installed
$(MOTO_DIR)/.installed:
	rm -rf $(@D) && python3 -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check 'moto[server]==$(MOTO_VERSION)'
	touch $@

## debian: the Debian packages the tests use, installed once per machine
## (as root or through sudo): Chromium and ChromeDriver (the pages' test,
## screenshots), nginx (serving a build with its generated configuration),
## PostgreSQL (the live store's tests start throwaway clusters of their own
## on loopback, whatever else the package sets up)
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
DEBIAN_PACKAGES := chromium chromium-driver nginx postgresql
debian:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && test -x /usr/sbin/nginx \
	  && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  $(SUDO) apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES) >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends $(DEBIAN_PACKAGES); }; }

## screenshots: PNGs of the main pages, at a desktop's and a phone's
## width, into SCREENSHOTS [screenshots/]: the datasets' site served by the
## api on SCREENSHOTS_BIND, read by headless Chromium
SCREENSHOTS      ?= screenshots
SCREENSHOTS_BIND ?= 127.0.0.1:4600
screenshots: site tools debian
	$(BIN)/api --bind $(SCREENSHOTS_BIND) --site-dir $(SITE) --data-dir $(DATA) >/dev/null & api=$$!; \
	  trap "kill $$api" EXIT; $(BIN)/screenshots --base http://$(SCREENSHOTS_BIND) --out $(SCREENSHOTS)

## test: every test (unit, data-driven, end-to-end on loopback, the pages
## in headless Chromium, the build served by nginx, the MCP conformance suite, the reference broker
## client, the analysts' DuckDB releases, the reference plugin scanner
## over the plugin corpus, schemathesis against the live
## api), then the end-to-end tests of the live store's users again with
## the apis on PostgreSQL (STORE_E2E), then a total. The tools download
## while cargo compiles; `--tests` leaves out the binaries, which hold no
## unit tests (`test = false`).
TOOLS := conformance client a2a readers schemathesis plugin-scanner moto debian evm
STORE_E2E := availability broker_adapter_registry broker_bodies broker_keys_feedback broker_live \
  broker_payments broker_registration chat chat_access chat_bounds inscription plugins:: secrets:: skills verification
test:
	$(MAKE) --no-print-directory --jobs=4 test-build $(TOOLS)
	@mkdir -p $(TARGET)
	set -o pipefail; { $(CARGO) test --release --workspace $(CARGO_FEATURES) --no-fail-fast --tests; first=$$?; \
	  ALMANAC_TEST_STORE=postgres $(CARGO) test --release -p tests $(CARGO_FEATURES) --test e2e -- $(STORE_E2E); \
	  second=$$?; test $$first = 0 && test $$second = 0; } 2>&1 | tee $(TARGET)/test.log; status=$$?; \
	  awk '/^test result:/ { p += $$4; f += $$6 } END { printf "%d passed, %d failed\n", p, f }' $(TARGET)/test.log; \
	  exit $$status

## fuzz: each fuzz target (fuzz/fuzz_targets) for FUZZ_SECONDS, with
## cargo-fuzz (installed here when missing; `make build` and `make test`
## need none of it); prints each target's executions and findings. A crash
## stops the run and leaves its input in fuzz/artifacts/<target>/.
## cargo-fuzz passes nightly-only flags (-Zsanitizer): a nightly toolchain
## is used when one is installed, else the machine's own with
## RUSTC_BOOTSTRAP=1, which lets it take them (no toolchain is fetched).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := hcs20_message uaid search_query mcp conditional chat_message registration skill_package plugin_archive
FUZZ_CARGO = $(if $(shell rustup toolchain list 2>/dev/null | grep '^nightly'),$(CARGO) +nightly,RUSTC_BOOTSTRAP=1 $(CARGO))
fuzz: duckdb
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for target in $(FUZZ_TARGETS); do \
	  CARGO_TARGET_DIR=$(HOME)/.cache/almanac/target-fuzz LD_LIBRARY_PATH=$(DUCKDB_CACHE) \
	    $(FUZZ_CARGO) fuzz run $$target -- -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    2> >(grep -E '^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+== ERROR|SUMMARY)' | sed "s/^/$$target: /" >&2) \
	    || exit 1; \
	done

## bench: the benchmarks; prints figures (see bench/README.md)
bench: tools plugin-scanner
	bash bench/run.sh

## datasets: rewrite datasets/ledger and datasets/broker/{agents,feedback}.json from
## their generators (deterministic)
datasets: tools
	rm -rf datasets/ledger
	$(BIN)/datagen --preset rules --out datasets/ledger
	$(BIN)/datagen --preset agents --agents 300 --out datasets/broker

fmt:
	$(CARGO) fmt --all

lint: duckdb
	$(CARGO) clippy --release --workspace --all-targets $(CARGO_FEATURES) -- -D warnings

clean:
	rm -rf $(SITE) $(DATA)
