#!/usr/bin/env bash
# The first build's cost: what a newcomer's `make run` and `make test`
# compile from an empty target folder. Prints both wall times and, from
# cargo's --timings report, the units that take the most time and the
# groups the budget is weighed in (our crates, the C libraries, Arrow,
# tantivy, the binaries' codegen and link). Nothing here is a threshold.
#
#   bash bench/first-build.sh [SOURCE_DIR] [RUN_TARGET]
#
# SOURCE_DIR (this clone) is built in place, its target in a new temporary
# folder; cargo's registry caches are kept, so downloads are not counted
# (`cargo fetch` runs first). RUN_TARGET is the Makefile target `make run`
# builds with (`build`). The
# reports are kept in FIRST_BUILD_OUT [bench-out/first-build]; the target
# folder is removed unless FIRST_BUILD_KEEP names where to move it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$(cd "${1:-$here/..}" && pwd)"
run_target="${2:-build}"
out="${FIRST_BUILD_OUT:-$here/../bench-out/first-build}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
target="$(mktemp -d "${TMPDIR:-/tmp}/almanac-first-build.XXXXXX")"
finish() {
  if [ -n "${FIRST_BUILD_KEEP:-}" ]; then
    rm -f "$target/cargo-timed" && mv "$target" "$FIRST_BUILD_KEEP"
  else
    rm -rf "$target"
  fi
}
trap finish EXIT

# `cargo` with --timings added, wherever the Makefile calls it.
wrapper="$target/cargo-timed"
printf '#!/bin/sh\nexec cargo "$@" --timings\n' >"$wrapper"
chmod +x "$wrapper"

cd "$src"
cargo fetch --quiet
commit="$(git rev-parse --short HEAD 2>/dev/null || echo '?')"

phase() { # name, command...
  local name="$1"; shift
  local start end
  start=$(date +%s.%N)
  rm -f "$out/$name"-*.html
  "$@" >"$out/$name.log" 2>&1 || { tail -30 "$out/$name.log"; exit 1; }
  end=$(date +%s.%N)
  # Each cargo invocation leaves its own report; those left are this
  # phase's (an earlier phase's were moved).
  local n=0 report
  for report in "$target"/cargo-timings/cargo-timing-*.html; do
    n=$((n + 1)) && mv "$report" "$out/$name-$n.html"
  done
  awk -v name="$name" -v start="$start" -v end="$end" 'BEGIN { printf "%s %.0f\n", name, end - start }' >>"$out/wall.txt"
}
: >"$out/wall.txt"
phase run make --no-print-directory "$run_target" CARGO="$wrapper" CARGO_TARGET_DIR="$target"
# What `make test` compiles after the binaries: every test target
# (`test-build`; for commits before it existed, the command their test ran).
if grep -q '^test-build:' Makefile; then
  phase test make --no-print-directory test-build CARGO="$wrapper" CARGO_TARGET_DIR="$target"
else
  export DUCKDB_LIB_DIR="${DUCKDB_LIB_DIR:-$HOME/.cache/almanac/duckdb-1.5.6}"
  CARGO_TARGET_DIR="$target" phase test "$wrapper" test --release --workspace --tests --no-run
fi

echo "first build of $commit on $(nproc) cores ($(date -u +%F))"
python3 "$here/first-build-report.py" "$out"
