# Pieces the bench scripts share; sourced, not run.

# Installs Debian package $2 when command $1 is missing.
need() { command -v "$1" >/dev/null 2>&1 || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }

# Prints the folder of the N-message corpus under $OUT ($1), written once
# by datagen $2 (seed 1) and reused by later runs.
corpus_of() {
  local corpus="$OUT/corpus-$1"
  [ -d "$corpus" ] || "$2" --messages "$1" --seed 1 --out "$corpus" >&2
  echo "$corpus"
}

# Prints the folder of $1 generated agents under $OUT, written once by
# datagen $2, with the datasets' catalog beside them.
agents_of() {
  local agents="$OUT/agents-$1"
  [ -s "$agents/agents.json" ] || "$2" --preset agents --agents "$1" --out "$agents" >/dev/null 2>&1
  cp datasets/broker/catalog.json "$agents/"
  echo "$agents"
}
