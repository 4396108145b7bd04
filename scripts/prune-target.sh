#!/usr/bin/env bash
# Keeps the shared target directory within the disk: CI clones build their
# own copies of the workspace crates (the path is part of a crate's hash), so
# test binaries and incremental caches pile up run after run. This removes
# the incremental caches and, for every test or binary name, all but its two
# newest builds (the working copy's and the last clone's). Dependencies are
# kept: they are what makes the next build fast.
set -euo pipefail
target="${CARGO_TARGET_DIR:-$HOME/.cache/baton/target}"
[ -d "$target" ] || exit 0
for profile in debug release; do
  rm -rf "$target/$profile/incremental"
  deps="$target/$profile/deps"
  [ -d "$deps" ] || continue
  python3 - "$deps" <<'PY'
import collections, os, re, sys
deps = sys.argv[1]
builds = collections.defaultdict(list)
for name in os.listdir(deps):
    path = os.path.join(deps, name)
    match = re.fullmatch(r"(.+)-[0-9a-f]{16}", name)
    if match and os.path.isfile(path) and os.access(path, os.X_OK):
        builds[match.group(1)].append(path)
freed = 0
for paths in builds.values():
    paths.sort(key=os.path.getmtime, reverse=True)
    for stale in paths[2:]:
        freed += os.path.getsize(stale)
        os.remove(stale)
print(f"prune-target: {deps}: {freed / 1e9:.1f} GB of stale binaries removed")
PY
done
df -h "$target" | tail -n 1
