#!/usr/bin/env bash
# Availability checks at scale (run by bench/agents.sh for each size, or
# alone: bench/availability.sh SITE_DIR DATA_DIR QUERIES): the api on a
# build with its checks on, names resolved by `bench dns` on loopback (no
# name is known there: every generated agent's host is silent, as a dead
# one is, and nothing leaves the machine), and without them, alternated:
# GET /api/v1/search over the distinct queries with no checks and while
# checks run at the default pace, the pace kept and the api's memory;
# then a whole first round unpaced: its time and what it recorded; then
# searches while steady checks run (every agent checked already).
# Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
BIN="$TARGET/release"
OUT="${BENCH_OUT:-$PWD/bench-out}"
site="$1" data="$2" queries="$3"
rss() { awk '/^VmRSS/{r=$2} /^RssAnon/{a=$2} END{printf "%d MiB (anonymous %d MiB)", r/1024, a/1024}' "/proc/$1/status"; }
rate() { wrk "$@" | awk '/Requests\/sec/{r=$2} $1=="99%"{p=$2} END{printf "%s/s p99 %s", r, p}'; }
searches() { PATHS="$queries" rate -t2 -c32 -d10s --latency -s bench/paths.lua http://127.0.0.1:4088; }

"$BIN/bench" dns "$OUT/dns.port" 2>/dev/null &
dns=$!
trap 'kill $dns ${api:-} 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do [ -s "$OUT/dns.port" ] && break; sleep 0.05; done
# Each api starts on a live store of its own, with no checks recorded.
live="$data/availability-bench"

start_api() { # $1: seconds between rounds (0: no checks); $2: "kept" to keep the store
  [ "${2:-}" = kept ] || { rm -rf "$live" && mkdir -p "$live"; }
  ALMANAC_AVAILABILITY_EVERY_S="$1" ALMANAC_AVAILABILITY_RATE="${ALMANAC_AVAILABILITY_RATE:-100}" RUST_LOG=info "$BIN/api" --bind 127.0.0.1:4088 --site-dir "$site" \
    --data-dir "$data" --store "$live/store.sqlite" --journal-dir "$live/journal" --egress-dns "127.0.0.1:$(cat "$OUT/dns.port")" >"$OUT/api-availability.log" 2>&1 &
  api=$!
  for _ in $(seq 1 3000); do curl -sf localhost:4088/health >/dev/null && break; sleep 0.05; done
}
stop_api() { kill "$api" 2>/dev/null || true; wait "$api" 2>/dev/null || true; }

counts() {
  python3 - "$live/store.sqlite" <<'PY' 2>/dev/null || echo '?'
import sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("SELECT outcome, COUNT(*) FROM availability GROUP BY outcome ORDER BY 1")
print(", ".join(f"{o} {n}" for o, n in rows))
PY
}

recorded() { python3 - "$live/store.sqlite" <<'PY' 2>/dev/null || echo 0
import sqlite3, sys
print(sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute("SELECT COUNT(*) FROM availability").fetchone()[0])
PY
}

# Searches with no checks, then while checks run at the default pace,
# alternated; the pace a round keeps, and so how long it takes here.
for round in 1 2; do
  start_api 0
  printf 'round %s: search, no checks, c32 %s\n' "$round" "$(searches)"
  stop_api
  start_api 3600
  t0=$(date +%s.%N) n0=$(recorded)
  printf 'round %s: search while checks run at the default pace, c32 %s\n' "$round" "$(searches)"
  n1=$(recorded) t1=$(date +%s.%N)
  printf '  %s agents recorded in %.1f s (%.0f/s); api RSS %s\n' "$((n1 - n0))" "$(echo "$t1 - $t0" | bc)" \
    "$(echo "($n1 - $n0) / ($t1 - $t0)" | bc -l)" "$(rss "$api")"
  stop_api
done
# A whole first round as fast as this machine makes one (no pace).
ALMANAC_AVAILABILITY_RATE=1000000 start_api 3600
while ! grep -q 'availability: a round' "$OUT/api-availability.log"; do sleep 1; done
printf 'a first round unpaced: %s; api RSS %s\n' \
  "$(grep -o 'checked=[0-9]* took=[^ ]*' "$OUT/api-availability.log" | tail -1)" "$(rss "$api")"
printf '  recorded: %s; journaled %s events\n' "$(counts)" \
  "$(cat "$live"/journal/*.jsonl 2>/dev/null | grep -c '"availability"' || true)"
stop_api
# Steady checks, on the store that round left: every agent was checked,
# so a check finds what the last one did (no event, nothing new for the
# overlay). Searches with no checks, then while every agent is checked
# again at the default pace, alternated; both apis hold the overlay the
# first round left (its changes up to --availability-live-max).
for round in 1 2; do
  start_api 0 kept
  printf 'round %s: search after a first round, no checks, c32 %s\n' "$round" "$(searches)"
  stop_api
  start_api 1 kept
  printf 'round %s: search while steady checks run, c32 %s\n' "$round" "$(searches)"
  stop_api
done
rm -rf "$live"
