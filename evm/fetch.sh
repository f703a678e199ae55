#!/usr/bin/env bash
# Puts the local EVM node (anvil) and the Solidity compiler (solc-js) into
# a cache folder outside the clone, once per machine, and prints that
# folder.
#
#   evm/fetch.sh <cache-dir>
#
# Both come from the npm registry at the versions evm/package-lock.json
# pins with their integrity; `npm ci` refuses a tarball whose digest
# differs. The folder appears by one rename, so an interrupted run leaves
# nothing half-written, and a run that finds it for the same lock touches
# no network.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dest="${1:?usage: evm/fetch.sh <cache-dir>}"
fail() { printf 'evm/fetch.sh: %s\n' "$*" >&2; exit 1; }

lock="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [[ -x "$dest/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" ]] \
  && [[ "$(cat "$dest/LOCK" 2>/dev/null)" == "$lock" ]]; then
  echo "$dest"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) fail "the pinned anvil is the Linux x86_64 build, this is $(uname -s) $(uname -m)" ;;
esac
command -v npm >/dev/null && command -v node >/dev/null || fail "npm and node are needed to fetch anvil and solc from the npm registry.
Install Node.js (Debian: apt-get install nodejs npm)"

parent="$(dirname "$dest")"
mkdir -p "$parent"
work="$(mktemp -d "$parent/.evm-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetching anvil and solc from the npm registry into $dest" >&2
cp "$here/package.json" "$here/package-lock.json" "$work/"
(cd "$work" && npm ci --no-audit --no-fund --ignore-scripts --silent) || fail "npm ci failed (is the npm registry reachable?)"
"$work/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" --version >/dev/null || fail "the fetched anvil does not run here"
printf '%s\n' "$lock" >"$work/LOCK"

rm -rf "$dest.old"
[[ -e "$dest" ]] && mv "$dest" "$dest.old"
mv "$work" "$dest"
rm -rf "$dest.old"
trap - EXIT
echo "$dest"
