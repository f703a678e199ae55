"""Reads what bench/first-build.sh kept in its folder (the phases' wall
times, `wall.txt`, and each phase's cargo --timings reports,
`<phase>-<n>.html`) and prints the tables bench/README.md keeps: each
phase's wall time, the groups the first-build budget is weighed in, and
the costliest units.

A unit's figure is its duration in cargo's report (compiling a crate, or
building or running a build script): "unit-seconds". Two units run at once
on two cores, so a phase's unit-seconds are about twice its wall time."""

import glob
import json
import re
import sys
from collections import defaultdict

OWN = {"shared", "broker-model", "search", "guard-data", "duckdb-files", "hcs20",
       "broker-site", "embeddings", "pages", "generator", "api", "tests", "localnet"}
# The groups a dependency is weighed in; the first that matches wins.
GROUPS = [
    ("C: aws-lc", lambda n: n.startswith("aws-lc")),
    ("C: ring", lambda n: n == "ring"),
    ("C: SQLite", lambda n: n == "libsqlite3-sys"),
    ("C: zstd", lambda n: n.startswith("zstd")),
    ("C: mimalloc", lambda n: n == "libmimalloc-sys"),
    ("Arrow", lambda n: n.startswith("arrow")),
    ("duckdb crates", lambda n: n in ("duckdb", "libduckdb-sys")),
    ("tantivy", lambda n: n.startswith("tantivy")),
]


def units(path):
    html = open(path, encoding="utf-8").read()
    match = re.search(r"const UNIT_DATA = (\[.*?\n\]);", html, re.S)
    return json.loads(match.group(1))


def group_of(unit):
    name = unit["name"]
    if name in OWN:
        kind = "binaries (codegen, link)" if '"bin"' in unit["target"] else "our crates (libraries, tests)"
        return kind
    for label, test in GROUPS:
        if test(name):
            return label
    return "other dependencies"


def main(out):
    walls = dict(line.split() for line in open(f"{out}/wall.txt") if line.strip())
    phases = {phase: [u for path in sorted(glob.glob(f"{out}/{phase}-*.html")) for u in units(path)]
              for phase in walls}
    print("| phase | wall | unit-seconds | units |")
    print("| --- | --- | --- | --- |")
    for phase, data in phases.items():
        total = sum(u["duration"] for u in data)
        wall = int(walls[phase])
        print(f"| {phase} | {wall // 60} min {wall % 60} s | {total:.0f} | {len(data)} |")
    for phase, data in phases.items():
        total = sum(u["duration"] for u in data) or 1
        groups = defaultdict(float)
        for unit in data:
            groups[group_of(unit)] += unit["duration"]
        print(f"\n{phase}: groups")
        print("| group | unit-seconds | share |")
        print("| --- | --- | --- |")
        for label, seconds in sorted(groups.items(), key=lambda kv: -kv[1]):
            if seconds >= 0.5:
                print(f"| {label} | {seconds:.0f} | {100 * seconds / total:.0f}% |")
        print(f"\n{phase}: the 15 costliest units")
        print("| unit | seconds |")
        print("| --- | --- |")
        for unit in sorted(data, key=lambda u: -u["duration"])[:15]:
            target = unit["target"].strip() or "lib"
            print(f"| {unit['name']} {unit['version']} ({target}) | {unit['duration']:.0f} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
