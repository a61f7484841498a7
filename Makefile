# wspipe: common tasks. `make demo` and `make test` work on a fresh machine (they run
# scripts/setup first); everything else assumes it has run once.
SWIFT_BUILD_FLAGS ?= -c release --static-swift-stdlib
BIN := .build/release/wspipe
PY := .venv/bin/python
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all setup build demo test unit conformance autobahn autobahn-deflate docs consumer-check install uninstall fuzz bench bench-deflate bench-broadcast bench-bus bench-exec bench-forward profile clean

all: build

setup:
	@scripts/setup

# Only the CLI: with the static standard library, a program that links FoundationNetworking
# (WSKitFoundation's examples) also needs libcurl's development files.
build:
	swift build $(SWIFT_BUILD_FLAGS) --product wspipe

# The main job on real input: a JSON feed through a local WebSocket server, into jq.
demo: setup build
	@scripts/demo

# Everything CI runs: the shared harnesses against the release binary (Autobahn 1-10 and
# 12-13, client and server roles; each skipped with
# one line when ../shared is not beside the clone), the documentation, the package as a
# versioned dependency, then swift test, whose summary is the last line.
test: setup build conformance autobahn autobahn-deflate docs consumer-check unit

unit:
	swift test --disable-swift-testing

conformance:
	@scripts/conformance

# Autobahn|Testsuite client cases 1-10 (../shared/autobahn); AUTOBAHN_ARGS replaces the
# selection, e.g. AUTOBAHN_ARGS="--cases '5.*'".
autobahn:
	@scripts/autobahn $(AUTOBAHN_ARGS)

# Autobahn's compression sections 12-13 (216 cases each role, permessage-deflate; the
# client and server suites run at the same time): NON-STRICT and UNIMPLEMENTED fail too.
autobahn-deflate:
	@AUTOBAHN_OUT=autobahn-deflate scripts/autobahn --sections 12-13 --fail-on NON-STRICT,UNIMPLEMENTED

# The DocC sites of WSKit and WSKitFoundation in .build/docs (no package plugin: the
# compiler's symbol graphs and the toolchain's docc); fails on an undocumented public
# symbol or a docc warning.
docs:
	@scripts/docs

# examples/consumer built against a tagged snapshot of the working tree with
# `.package(url:, from:)`, and run (debug build in a temporary directory).
consumer-check:
	@scripts/consumer-check

# Installs what `make build` made; it never builds, so `sudo make install` leaves no
# root-owned files in .build. BIN= installs another binary.
install:
	@test -x "$(BIN)" || { echo "install: $(BIN) is missing: run 'make build' first (or set BIN=)" >&2; exit 1; }
	install -Dm755 "$(BIN)" "$(DESTDIR)$(PREFIX)/bin/wspipe"
	install -Dm644 man/wspipe.1 "$(DESTDIR)$(PREFIX)/share/man/man1/wspipe.1"
	install -Dm644 completions/wspipe.bash "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/wspipe"
	install -Dm644 completions/_wspipe "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_wspipe"

# Removes exactly the four files `make install` wrote (directories stay: others may share them).
uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/wspipe" "$(DESTDIR)$(PREFIX)/share/man/man1/wspipe.1" \
	      "$(DESTDIR)$(PREFIX)/share/bash-completion/completions/wspipe" \
	      "$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_wspipe"

# libFuzzer targets of the protocol core, FUZZ_SECONDS (default 60) each, one core.
fuzz:
	fuzz/run $${FUZZ_SECONDS:-60}

# wspipe against websocat on the same workloads, interleaved (not part of the tests).
bench: setup
	scripts/bench --no-setup

# permessage-deflate: wspipe against Python websockets and Node ws on a JSON feed, with
# zlib's own loops as the limit (~10 minutes; BENCH_ARGS=--quick for a smoke run).
bench-deflate: setup
	scripts/bench-deflate $(BENCH_ARGS)

# --broadcast to 1,000 clients (bench/broadcastload.c, epoll), all reading and 10 % stalled,
# against websocat's broadcast: mode (~5 minutes; BENCH_ARGS=--quick for a smoke run).
bench-broadcast: setup
	scripts/bench-broadcast $(BENCH_ARGS)

bench-bus: setup
	scripts/bench-bus $(BENCH_ARGS)

# --exec churn: connections/s of connect -> child -> first message -> close vs websocketd.
bench-exec: setup
	scripts/bench-exec $(BENCH_ARGS)

bench-forward: setup
	scripts/bench-forward $(BENCH_ARGS)

# Instruction counts (valgrind --tool=callgrind) of fixed workloads: regressions show here.
profile: setup
	scripts/profile

clean:
	rm -rf .build
