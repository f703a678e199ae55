#!/usr/bin/env bash
# The broker at scale (`make bench`, or alone: bench/agents.sh SIZE...):
# for each SIZE, a build of SIZE generated agents (time, peak memory, files),
# the api on it (ready time, memory), GET /api/v1/search over 5,000
# distinct queries (bench queries), and random agent-detail routes served
# by the api against nginx as it runs in production, 200 and 304, then
# 10,000 agents registered over HTTP (the live overlay) and the searches
# again over build and overlay, then the api's memory after all of it;
# then, with the api stopped and the journal set aside, a run after 20 new
# ledger messages (a layer over the build: `generator::layer`), a run with
# nothing new, and a run after 1,000 agents changed (a journal of them:
# `bench journal`); and availability checks over the agents
# (bench/availability.sh). Prints figures; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
BIN="$TARGET/release"
OUT="${BENCH_OUT:-$PWD/bench-out}"
mkdir -p "$OUT"
say() { printf '\n== %s\n' "$*"; }
timed() {
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" "$@" 2>"$OUT/last.log" || { cat "$OUT/last.log"; return 1; }
  read -r secs kb <"$OUT/time.txt"
  printf 'wall %.2f s, peak RSS %d MiB, %s\n' "$secs" "$((kb / 1024))" "$(grep -o 'files=[0-9]*' "$OUT/last.log" | tail -1)"
}
# Resident memory of process $1, and how much of it is anonymous (the heap:
# the rest is mapped build files, page cache the kernel can reclaim).
rss() { awk '/^VmRSS/{r=$2} /^RssAnon/{a=$2} END{printf "%d MiB (anonymous %d MiB)", r/1024, a/1024}' "/proc/$1/status"; }
rate() { wrk "$@" | awk '/Requests\/sec/{r=$2} $1=="99%"{p=$2} END{printf "%s/s p99 %s", r, p}'; }

# Three rounds of the distinct searches at 8 and 32 connections against
# the api on 4086, each line labelled $1.
search_rounds() {
  for round in 1 2 3; do
    for c in 8 32; do
      printf 'round %s: %s -c%s %s\n' "$round" "$1" "$c" \
        "$(PATHS="$OUT/queries.txt" rate -t2 -c"$c" -d10s --latency -s bench/paths.lua http://127.0.0.1:4086)"
    done
  done
}

"$BIN/bench" queries 5000 >"$OUT/queries.txt"
# A ledger the layered run can add messages to (a corpus continues any
# smaller one of the same scale and seed, and keeps a larger one whole:
# each size starts from a fresh one, or the next size's build would hold
# the 20 messages its layered run is to add).
ledger="$OUT/ledger"
for size in "$@"; do
  say "broker at $size agents: build, api, search over 5,000 queries, agent routes against nginx"
  # At a million agents the run took 28 GB of disk at its peak (2026-11-27:
  # the build's files 22 GB, the search folder, warehouse and snapshot
  # 4.3 GB, the layered runs after it the rest), and the agents' source
  # 1.7 GB more when it is to be written: a size the disk cannot hold is
  # left out, saying so, rather than failing halfway.
  agents="$OUT/agents-$size"
  need_kb=$((size * 30))
  [ -s "$agents/agents.jsonl" ] || need_kb=$((need_kb + size * 2))
  free_kb=$(df -Pk "$OUT" | awk 'NR==2 {print $4}')
  if [ "$free_kb" -lt "$need_kb" ]; then
    printf 'skipped: needs about %d GB free beside %s, has %d GB\n' "$((need_kb / 1000000))" "$OUT" "$((free_kb / 1000000))"
    continue
  fi
  [ -s "$agents/agents.jsonl" ] || "$BIN/datagen" --preset agents --agents "$size" --lines --out "$agents" 2>/dev/null
  cp datasets/broker/catalog.json "$agents/"
  dir="$OUT/scale-$size-$$"
  rm -rf "$ledger"
  "$BIN/datagen" --preset random --messages 5000 --scale 5000 --out "$ledger" 2>/dev/null
  timed "$BIN/generator" build --ledger-dir "$ledger" --broker-dir "$agents" \
    --site-dir "$dir/site" --data-dir "$dir/data"
  build="$dir/site/current"
  printf 'on disk %s; _manifest.json %s, _manifest.idx %s\n' "$(du -sh "$dir/site" | cut -f1)" \
    "$(du -h "$build/_manifest.json" | cut -f1)" "$(du -h "$build/_manifest.idx" | cut -f1)"

  started=$(date +%s.%N)
  "$BIN/api" --bind 127.0.0.1:4086 --site-dir "$dir/site" --data-dir "$dir/data" >"$OUT/api-$size.log" 2>&1 &
  api=$!
  nginx_conf="$OUT/nginx-scale.conf"
  cat >"$nginx_conf" <<CONF
worker_processes 2;
pid $OUT/nginx-scale.pid;
error_log $OUT/nginx-scale-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on; tcp_nopush on;
  open_file_cache max=10000 inactive=60s;
  if_modified_since before;
  types { application/json json; }
  server { listen 127.0.0.1:4087; root $build; }
}
CONF
  trap 'kill $api 2>/dev/null || true; nginx -c "$nginx_conf" -s quit 2>/dev/null || true' EXIT
  for _ in $(seq 1 3000); do curl -sf localhost:4086/api/v1/stats >/dev/null && break; sleep 0.05; done
  printf 'api ready in %.1f s (build loaded in %s ms), RSS %s\n' "$(awk -v now="$(date +%s.%N)" -v then="$started" 'BEGIN { print now - then }')" \
    "$(grep -o 'load_ms=[0-9]*' "$OUT/api-$size.log" | head -1 | cut -d= -f2)" "$(rss $api)"
  nginx -c "$nginx_conf"
  # The same searches in process on one thread, over the build's search
  # index folder as the api opens it: by kind, without HTTP.
  "$BIN/bench" search "$dir/data/search/$(basename "$(readlink "$build")")" 5000
  # And merged with a live overlay of 10,000 agents, as the api searches
  # after the registrations below.
  "$BIN/bench" search "$dir/data/search/$(basename "$(readlink "$build")")" 5000 10000

  search_rounds search

  "$BIN/bench" sample "$build" 50000 >"$OUT/sample.txt"
  for round in 1 2 3; do
    printf 'round %s: agent routes 200 api %s nginx %s; 304 api %s nginx %s\n' "$round" \
      "$(PATHS="$OUT/sample.txt" rate -t1 -c64 -d10s --latency -s bench/paths.lua http://127.0.0.1:4086)" \
      "$(PATHS="$OUT/sample.txt" COLUMN=2 rate -t1 -c64 -d10s --latency -s bench/paths.lua http://127.0.0.1:4087)" \
      "$(PATHS="$OUT/sample.txt" FRESH=1 rate -t1 -c64 -d10s --latency -s bench/paths.lua http://127.0.0.1:4086)" \
      "$(PATHS="$OUT/sample.txt" COLUMN=2 FRESH=1 rate -t1 -c64 -d10s --latency -s bench/paths.lua http://127.0.0.1:4087)"
  done
  "$BIN/bench" register http://127.0.0.1:4086 "$dir/data/live/store.sqlite" 10000
  search_rounds 'search with 10k live agents'
  printf 'api RSS after the load %s\n' "$(rss $api)"
  kill $api 2>/dev/null || true
  nginx -c "$nginx_conf" -s quit 2>/dev/null || true
  trap - EXIT
  say "availability checks over the $size agents"
  bash bench/availability.sh "$dir/site" "$dir/data" "$OUT/queries.txt"
  # The registrations above are in the journal: set aside, so the agents
  # are the build's again and the next runs may layer.
  mv "$dir/data/journal" "$dir/data/journal-registered" 2>/dev/null || true
  "$BIN/datagen" --preset random --messages 5020 --scale 5000 --out "$ledger" 2>/dev/null
  printf 'a run after 20 new ledger messages: '
  timed "$BIN/generator" build --ledger-dir "$ledger" --broker-dir "$agents" \
    --site-dir "$dir/site" --data-dir "$dir/data"
  printf '  %s (the base it is a layer over; -: a whole build)\n' "$(grep -o 'base=[^ ]*' "$OUT/last.log" | tail -1)"
  printf 'a run with nothing new: '
  timed "$BIN/generator" build --ledger-dir "$ledger" --broker-dir "$agents" \
    --site-dir "$dir/site" --data-dir "$dir/data"
  # The journal as the api writes it: 500 agents registered, 400 updated
  # and 100 deleted since the live build.
  "$BIN/bench" journal "$agents/agents.jsonl" "$dir/data/journal" 1000
  printf 'a run after 1,000 agents changed: '
  timed "$BIN/generator" build --ledger-dir "$ledger" --broker-dir "$agents" \
    --site-dir "$dir/site" --data-dir "$dir/data"
  printf '  %s, %s\n' "$(grep -o 'base=[^ ]*' "$OUT/last.log" | tail -1)" \
    "$(grep -o 'written=[0-9]* linked=[0-9]*' "$OUT/last.log" | tail -1)"
  rm -rf "$dir"
done
