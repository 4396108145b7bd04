#!/usr/bin/env bash
# Installs mdbook (the documentation book's builder) from crates.io into
# ~/.cache/baton/tools, once; prints the binary's path. Idempotent.
#
#   bash scripts/install-mdbook.sh
set -euo pipefail

version="0.5.4"
root="${BATON_TOOLS_DIR:-$HOME/.cache/baton/tools}"
binary="$root/bin/mdbook"
if [ ! -x "$binary" ] || ! "$binary" --version 2>/dev/null | grep -q "v$version"; then
  echo "install-mdbook: installing mdbook $version from crates.io (cargo install, a few minutes once)" >&2
  # Its own target directory: the workspace's is not for tools.
  CARGO_TARGET_DIR="$root/build" cargo install mdbook --version "$version" --locked --root "$root" --quiet
  rm -rf "$root/build"
fi
echo "$binary"
