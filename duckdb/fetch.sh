#!/usr/bin/env bash
# Puts DuckDB's official prebuilt C library (libduckdb.so) into a cache
# folder outside the clone, once per machine, and prints that folder.
#
#   duckdb/fetch.sh <cache-dir>
#
# The library is the content of an npm registry package that the DuckDB
# project publishes for its Node bindings (libduckdb.so with the parquet,
# json, icu and core-functions extensions built in). `npm pack` fetches
# the exact pinned version; the tarball's SHA-512 must equal the pinned
# integrity before anything is unpacked. The folder appears by one rename,
# so an interrupted run leaves nothing half-written, and a second run finds
# it and touches no network.
set -euo pipefail

# The pins: one DuckDB release, one package, one tarball. Changing the
# DuckDB version means changing all three, and the `duckdb` crate in the
# workspace's Cargo.toml to the matching release (1.MMmmpp.x).
PACKAGE="@duckdb/node-bindings-linux-x64@1.5.6-r.1"
INTEGRITY="sha512-IXcrZJE6kEqM0Z4wwdVnGBHX/frOS33VPNAwDXQ/Q+Fs84b058Qe94chrCCIcNJlG8Y3UHIUU4eBeCQxW5mN1Q=="

dest="${1:?usage: duckdb/fetch.sh <cache-dir>}"
fail() { printf 'duckdb/fetch.sh: %s\n' "$*" >&2; exit 1; }

if [[ -f "$dest/libduckdb.so" && "$(cat "$dest/INTEGRITY" 2>/dev/null)" == "$INTEGRITY" ]]; then
  echo "$dest"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) fail "the pinned prebuilt DuckDB is for Linux x86_64, this is $(uname -s) $(uname -m).
Compile DuckDB from source instead (about 30 minutes on 2 cores): make DUCKDB=bundled ..." ;;
esac
command -v npm >/dev/null && command -v node >/dev/null || fail "npm and node are needed to fetch the prebuilt DuckDB library ($PACKAGE from the npm registry).
Install Node.js (Debian: apt-get install nodejs npm), or compile DuckDB from source instead (about 30 minutes on 2 cores): make DUCKDB=bundled ..."

parent="$(dirname "$dest")"
mkdir -p "$parent"
work="$(mktemp -d "$parent/.duckdb-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetching $PACKAGE from the npm registry into $dest" >&2
(cd "$work" && npm pack --silent "$PACKAGE" >/dev/null) || fail "npm pack $PACKAGE failed (is the npm registry reachable?)"
tarball=("$work"/*.tgz)
[[ -f "${tarball[0]}" ]] || fail "npm pack $PACKAGE left no tarball"

# npm's own integrity format: the algorithm, a dash, the base64 digest.
actual="$(node -e '
  const data = require("fs").readFileSync(process.argv[1]);
  process.stdout.write("sha512-" + require("crypto").createHash("sha512").update(data).digest("base64"));
' "${tarball[0]}")"
[[ "$actual" == "$INTEGRITY" ]] || fail "$PACKAGE: integrity mismatch, refusing to unpack
  expected $INTEGRITY
  got      $actual"

mkdir "$work/lib"
tar -xzf "${tarball[0]}" -C "$work/lib" --strip-components=1 package/libduckdb.so package/LICENSE
printf '%s\n' "$INTEGRITY" >"$work/lib/INTEGRITY"
printf '%s\n' "$PACKAGE" >"$work/lib/PACKAGE"

rm -rf "$dest"
mv "$work/lib" "$dest"
echo "$dest"
