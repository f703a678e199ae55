#!/usr/bin/env bash
# `make bench`: builds figures on this machine and prints them. Nothing here
# is a pass/fail threshold. BENCH_MESSAGES sets the corpus size (1,000,000),
# BENCH_AGENTS the agent indexes of the scale section (250000 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
BIN="$TARGET/release"
OUT="${BENCH_OUT:-$PWD/bench-out}"
N="${BENCH_MESSAGES:-1000000}"
mkdir -p "$OUT"
# The apis benchmarked check no agent's availability: the generated agents'
# hosts are not on this machine, and benchmarks call loopback only
# (`bench availability` measures the checks' recording).
export ALMANAC_AVAILABILITY_EVERY_S=0

. bench/lib.sh
need nginx nginx
need wrk wrk
need /usr/bin/time time

say() { printf '\n== %s\n' "$*"; }
# Runs a command under /usr/bin/time; prints wall seconds and peak RSS.
timed() {
  local log="$OUT/last.log"
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" "$@" 2>"$log" || { cat "$log"; return 1; }
  read -r secs kb <"$OUT/time.txt"
  printf 'wall %.2f s, peak RSS %d MiB\n' "$secs" "$((kb / 1024))"
  grep -o 'written=[0-9]* linked=[0-9]*' "$log" | tail -1 || true
  grep -o 'files=[0-9]*' "$log" | tail -1 || true
}

# Three rounds of wrk -t2 -d10s at 8 and 32 connections with a Lua script:
# each round's rate, p50 and p99 (wrk --latency). Arguments: label, script, URL.
latency_rounds() {
  local out
  for round in 1 2 3; do
    for c in 8 32; do
      out=$(wrk -t2 -c"$c" -d10s --latency -s "$2" "$3")
      printf 'round %s: %s -c%s %s/s p50 %s p99 %s\n' "$round" "$1" "$c" \
        "$(awk '/Requests\/sec/{print $2}' <<<"$out")" "$(awk '$1=="50%"{print $2}' <<<"$out")" \
        "$(awk '$1=="99%"{print $2}' <<<"$out")"
      if grep -q Non-2xx <<<"$out"; then grep Non-2xx <<<"$out"; fi
    done
  done
}

# Builds go to fresh folders and the old ones are deleted at the end: right
# after tens of thousands of files are deleted, ext4 creates new ones
# several times slower (it skips recently freed inodes), which would
# otherwise land in the timed builds.
run_dir="$OUT/run-$$"
stale=$(ls -d "$OUT"/run-* "$OUT"/full "$OUT"/mirror 2>/dev/null || true)
FULL="$run_dir/full"
MIRROR="$run_dir/mirror"

[ -d "$OUT/corpus-$N" ] || say "writing a $N-message corpus"
corpus="$(corpus_of "$N" "$BIN/datagen")"

say "broker search relevance: the baseline BM25F and tantivy over 100k generated agents, in process"
"$BIN/bench" text 100000

say "ingest + rules, captured pages, in process (no DuckDB)"
"$BIN/bench" ingest "$corpus" 3

say "full build with publishing, captured pages"
timed "$BIN/generator" build --ledger-dir "$corpus" --site-dir "$FULL/site" --data-dir "$FULL/data"

say "full build through a local mirror node (100 per page, 20 ms per request, 64 in flight)"
rm -f "$OUT/mirror.port"
"$BIN/bench" mirror "$corpus" 20 "$OUT/mirror.port" 2>/dev/null &
mirror_pid=$!
trap 'kill $mirror_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [ -s "$OUT/mirror.port" ] && break; sleep 0.1; done
timed "$BIN/generator" build --mirror "http://127.0.0.1:$(cat "$OUT/mirror.port")" --mirror-concurrency 64 \
  --site-dir "$MIRROR/site" --data-dir "$MIRROR/data"
kill $mirror_pid 2>/dev/null || true

say "incremental: 1,000 more messages on the full build"
more="$OUT/corpus-$N-plus"
rm -rf "$more"; cp -al "$corpus" "$more"
"$BIN/datagen" --messages "$((N + 1000))" --scale "$N" --seed 1 --out "$OUT/corpus-$N-next" >/dev/null 2>&1
# Only the pages past the old end are new; link them in beside the old ones.
for d in "$OUT/corpus-$N-next"/*/; do
  t=$(basename "$d"); mkdir -p "$more/$t"
  for f in "$d"*.json; do [ -e "$more/$t/$(basename "$f")" ] || cp "$f" "$more/$t/"; done
done
rm -rf "$OUT/corpus-$N-next"
timed "$BIN/generator" build --ledger-dir "$more" --site-dir "$FULL/site" --data-dir "$FULL/data"
rm -rf "$more"

say "static serving: api vs nginx (production configuration), same files, wrk -t2 -c64 -d10s"
site_dir=$(readlink -f "$FULL/site/current")
conf="$OUT/nginx.conf"
# nginx as it is run in production: sendfile, cached file descriptors and
# metadata, keep-alive connections that outlive a wrk round (wrk sends far
# fewer than 10M requests on one connection), one worker per core.
cat >"$conf" <<NGINX
worker_processes 2;
pid $OUT/nginx.pid;
error_log $OUT/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  open_file_cache max=10000 inactive=60s;
  open_file_cache_valid 60s;
  open_file_cache_errors on;
  keepalive_requests 10000000;
  keepalive_timeout 65s;
  server {
    listen 127.0.0.1:4081;
    root $site_dir;
    location = /hcs20/stats { default_type application/json; try_files /hcs20/stats.json =404; }
  }
}
NGINX
nginx -c "$conf"
# Quotas far above what wrk sends: every guard request goes through its
# client's bucket and none is refused, so the limiter's cost is measured.
"$BIN/api" --bind 127.0.0.1:4080 --site-dir "$FULL/site" --data-dir "$FULL/data" \
  --guard-rate 4000000000 --guard-burst 1000000000 --mcp-rate 4000000000 --mcp-burst 1000000000 >/dev/null 2>&1 &
api_pid=$!
trap 'kill $mirror_pid $api_pid 2>/dev/null || true; nginx -c "$conf" -s quit 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do curl -sf localhost:4080/hcs20/stats >/dev/null && break; sleep 0.1; done
api_etag=$(curl -sI localhost:4080/hcs20/stats | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
nginx_etag=$(curl -sI localhost:4081/hcs20/stats | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
rate() { wrk -t2 -c64 -d10s "$@" | awk '/Requests\/sec/{print $2}'; }
for round in 1 2 3; do
  printf 'round %s: 200 api %s/s nginx %s/s; 304 api %s/s nginx %s/s\n' "$round" \
    "$(rate http://127.0.0.1:4080/hcs20/stats)" "$(rate http://127.0.0.1:4081/hcs20/stats)" \
    "$(rate -H "If-None-Match: $api_etag" http://127.0.0.1:4080/hcs20/stats)" \
    "$(rate -H "If-None-Match: $nginx_etag" http://127.0.0.1:4081/hcs20/stats)"
done

say "slow clients: 2,000 idle and 2,000 trickling connections (a slowloris, each closed one replaced), wrk -t2 -c8 -d8s on /hcs20/stats"
# The api's defaults: a head must be in within 10 s, 10,000 connections.
latency() {
  wrk -t2 -c8 -d8s --latency http://127.0.0.1:4080/hcs20/stats |
    awk '/Requests\/sec/{r=$2} $1=="50%"{p50=$2} $1=="99%"{p99=$2} END{printf "%s req/s, p50 %s, p99 %s", r, p50, p99}'
}
rss() { printf '%d MiB' "$(( $(ps -o rss= -p "$api_pid") / 1024 ))"; }
printf 'quiet: %s; api RSS %s\n' "$(latency)" "$(rss)"
"$BIN/bench" slow 127.0.0.1:4080 2000 2000 40 &
slow_pid=$!
sleep 10
open_now=$(curl -s localhost:4080/health | grep -o '"connections":[0-9]*' | cut -d: -f2)
printf 'under attack: %s; %s connections open; api RSS %s\n' "$(latency)" "$open_now" "$(rss)"
wait "$slow_pid"

say "guard (section B): MCP tools/call and JSON routes with rate limiting on, wrk -t2 -d10s"
# p99 from wrk --latency; rates are medians of 3 rounds.
latency_rounds tools/call bench/mcp-call.lua http://127.0.0.1:4080/api/guard/public-mcp
guard_etag=$(curl -sI localhost:4080/guard/facts.json | tr -d '\r' | awk -F': ' 'tolower($1)=="etag"{print $2}')
for round in 1 2 3; do
  printf 'round %s: /guard/facts.json 200 %s/s, 304 %s/s; unlimited /hcs20/stats 200 %s/s\n' "$round" \
    "$(rate http://127.0.0.1:4080/guard/facts.json)" \
    "$(rate -H "If-None-Match: $guard_etag" http://127.0.0.1:4080/guard/facts.json)" \
    "$(rate http://127.0.0.1:4080/hcs20/stats)"
done

say "broker (section A): a 100k-agent build, then GET /api/v1/search over its snapshot, wrk -t2 -d10s"
agents="$(agents_of 100000 "$BIN/datagen")"
BROKER="$run_dir/broker"
timed "$BIN/generator" build --ledger-dir datasets/ledger --broker-dir "$agents" \
  --site-dir "$BROKER/site" --data-dir "$BROKER/data"
started=$(date +%s.%N)
"$BIN/api" --bind 127.0.0.1:4082 --site-dir "$BROKER/site" --data-dir "$BROKER/data" >/dev/null 2>&1 &
broker_pid=$!
trap 'kill $mirror_pid $api_pid $broker_pid 2>/dev/null || true; nginx -c "$conf" -s quit 2>/dev/null || true' EXIT
for _ in $(seq 1 1200); do curl -sf localhost:4082/api/v1/stats >/dev/null && break; sleep 0.1; done
printf 'api ready (build loaded: files, snapshot, index) in %.1f s, RSS %d MiB\n' \
  "$(awk -v now="$(date +%s.%N)" -v then="$started" 'BEGIN { print now - then }')" "$(($(ps -o rss= -p $broker_pid) / 1024))"
latency_rounds search bench/search.lua http://127.0.0.1:4082

say "broker live overlay: 10k agents registered over HTTP into that api, then the same search mix over build and overlay"
"$BIN/bench" register http://127.0.0.1:4082 "$BROKER/data/live/store.sqlite" 10000
printf 'api RSS with the overlay %d MiB\n' "$(($(ps -o rss= -p $broker_pid) / 1024))"
latency_rounds 'search+10k live' bench/search.lua http://127.0.0.1:4082
kill $broker_pid 2>/dev/null || true

say "api replicas: two apis on that build sharing a live store in PostgreSQL (a throwaway cluster, synced): 10k registrations over HTTP through both, how soon one finds what the other registered, and search on one api pinned to one CPU against two pinned to one each"
"$BIN/bench" replicas "$BROKER/site" "$BROKER/data" 10000 100

# The broker at scale: BENCH_AGENTS (250,000, the hosted broker's size, and
# a million: 5 to 7 minutes to build and about 30 GB on disk, removed after).
# shellcheck disable=SC2086
bash bench/agents.sh ${BENCH_AGENTS:-250000 1000000}

say "broker live side: durable debits through the live store, then sign-ins over HTTP"
"$BIN/bench" debits "$run_dir" 5
say "availability: a million agents' checks recorded in the live store"
"$BIN/bench" availability "$run_dir/availability" 1000000
LIVE="$run_dir/live"
# The sign-in rate limit is lifted: this measures the verification itself.
"$BIN/api" --bind 127.0.0.1:4083 --site-dir "$LIVE/site" --data-dir "$LIVE/data" \
  --sign-in-rate 100000000 --sign-in-burst 100000000 >/dev/null 2>&1 &
live_pid=$!
for _ in $(seq 1 100); do curl -sf localhost:4083/health/live >/dev/null && break; sleep 0.1; done
"$BIN/bench" signin http://127.0.0.1:4083 5
# Requests that carry an API key: the key found in the store each time
# (--key-cache-secs 0, a second api on the same store) and kept in memory
# (the default), GET /credits/balance, wrk -t2 -c32 -d5s, two rounds each.
key=$("$BIN/api" login --base http://127.0.0.1:4083 | sed -n 's/^  "key": "\(.*\)",$/\1/p')
"$BIN/api" --bind 127.0.0.1:4084 --site-dir "$LIVE/site" --data-dir "$LIVE/data" --key-cache-secs 0 \
  --journal-dir "$LIVE/journal-uncached" >/dev/null 2>&1 &
uncached_pid=$!
for _ in $(seq 1 100); do curl -sf localhost:4084/health/live >/dev/null && break; sleep 0.1; done
for round in 1 2; do
  for port in 4084 4083; do
    label=$([ $port = 4083 ] && echo "cached  " || echo "uncached")
    wrk -t2 -c32 -d5s -H "x-api-key: $key" "http://127.0.0.1:$port/api/v1/credits/balance" |
      awk -v l="$label" -v r="$round" '/Requests\/sec/ {rps=$2} /Latency/ {lat=$2}
        END {printf "round %s: keyed GET /credits/balance, key %s: %s req/s (mean latency %s)\n", r, l, rps, lat}'
  done
done
kill $uncached_pid 2>/dev/null || true
kill $live_pid 2>/dev/null || true

say "chat: a relayed turn over a direct one to the same local A2A agent, the first streamed text, then 10k streams held at once"
# One client sends every relay here: its relay quota is lifted.
"$BIN/api" --bind 127.0.0.1:4085 --site-dir "$LIVE/site" --data-dir "$LIVE/data" --max-connections 30000 \
  --journal-dir "$LIVE/journal-chat" --relay-rate 10000000 --relay-burst 100000 >/dev/null 2>&1 &
chat_pid=$!
for _ in $(seq 1 100); do curl -sf localhost:4085/health/live >/dev/null && break; sleep 0.1; done
"$BIN/bench" chat http://127.0.0.1:4085 2000
"$BIN/bench" streams http://127.0.0.1:4085 "$chat_pid" 10000
kill $chat_pid 2>/dev/null || true

# shellcheck disable=SC2086
[ -z "$stale" ] || rm -rf $stale

# The plugin scanner: in process over the corpus, then as commands, each
# fixture scanned by `generator scan-plugin` and by the reference scanner
# (`make plugin-scanner`; its interpreter's start included, as almanac's).
say "plugin scanner"
"$BIN/bench" plugins plugins/corpus 20
if [ -x "${ALMANAC_PLUGIN_SCANNER:-}" ]; then
  scan_all() { for d in plugins/corpus/*/plugin; do "$@" "$d" --format json >/dev/null 2>&1 || true; done; }
  start=$(date +%s.%N); scan_all "$BIN/generator" scan-plugin; ours=$(echo "$(date +%s.%N) - $start" | bc)
  start=$(date +%s.%N); scan_all "$ALMANAC_PLUGIN_SCANNER" scan; theirs=$(echo "$(date +%s.%N) - $start" | bc)
  count=$(ls -d plugins/corpus/*/plugin | wc -l)
  printf 'commands over %s fixtures: generator scan-plugin %.2f s, plugin-scanner %.2f s (%.1fx)\n' \
    "$count" "$ours" "$theirs" "$(echo "$theirs / $ours" | bc -l)"
fi
