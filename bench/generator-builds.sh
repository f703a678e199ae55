#!/usr/bin/env bash
# Two generator binaries, alternated: the same full builds by each, round
# after round, so a change to the generator's DuckDB path (or anything a
# build runs) is compared against the binary before it on the same machine
# at the same time. Prints each build's wall time and peak RSS, then each
# scenario's median ratio (new / old). Nothing here is a threshold.
#
#   bash bench/generator-builds.sh OLD_GENERATOR NEW_GENERATOR [ROUNDS]
#
# Scenarios: a full ledger build of a BENCH_MESSAGES-message corpus
# (1,000,000) and a broker build of BENCH_BROKER_AGENTS generated agents
# (100,000), both with publishing. The corpus and the agents are written by
# the datagen beside NEW_GENERATOR, once, under BENCH_OUT (bench-out).
set -euo pipefail
cd "$(dirname "$0")/.."
old="$(readlink -f "$1")"
new="$(readlink -f "$2")"
rounds="${3:-3}"
OUT="${BENCH_OUT:-$PWD/bench-out}"
N="${BENCH_MESSAGES:-1000000}"
AGENTS="${BENCH_BROKER_AGENTS:-100000}"
datagen="$(dirname "$new")/datagen"
mkdir -p "$OUT"
. bench/lib.sh
need /usr/bin/time time

corpus="$(corpus_of "$N" "$datagen")"
agents="$(agents_of "$AGENTS" "$datagen")"

work="$OUT/generator-builds-$$"
trap 'rm -rf "$work"' EXIT
results="$work/results"
mkdir -p "$work"

# One build into fresh folders (removed after: ext4 creates files slower
# right after many were deleted, so the next build gets a new folder too).
build() { # label, binary, scenario, round
  local dir="$work/$1-$3-$4"
  local args=(--site-dir "$dir/site" --data-dir "$dir/data")
  case "$3" in
    ledger) args+=(--ledger-dir "$corpus") ;;
    broker) args+=(--ledger-dir datasets/ledger --broker-dir "$agents") ;;
  esac
  /usr/bin/time -f '%e %M' -o "$work/time.txt" "$2" build "${args[@]}" >"$work/log" 2>&1 \
    || { tail -20 "$work/log"; exit 1; }
  read -r secs kb <"$work/time.txt"
  printf '%s %s round %s: %.2f s, peak RSS %d MiB\n' "$3" "$1" "$4" "$secs" "$((kb / 1024))"
  echo "$3 $1 $secs" >>"$results"
  rm -rf "$dir"
}

for scenario in ledger broker; do
  for round in $(seq 1 "$rounds"); do
    # Which goes first alternates, so neither always meets a warm cache.
    if [ $((round % 2)) -eq 1 ]; then
      build old "$old" "$scenario" "$round"; build new "$new" "$scenario" "$round"
    else
      build new "$new" "$scenario" "$round"; build old "$old" "$scenario" "$round"
    fi
  done
done

python3 - "$results" <<'PY'
import sys, statistics
rows = [line.split() for line in open(sys.argv[1])]
for scenario in dict.fromkeys(r[0] for r in rows):
    times = {label: [float(r[2]) for r in rows if r[0] == scenario and r[1] == label] for label in ("old", "new")}
    ratios = [n / o for n, o in zip(times["new"], times["old"])]
    print(f"{scenario}: old {statistics.median(times['old']):.2f} s, new {statistics.median(times['new']):.2f} s "
          f"(median); new/old per round {', '.join(f'{r:.2f}' for r in ratios)}")
PY
