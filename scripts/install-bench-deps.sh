#!/usr/bin/env bash
# Installs what the instruction gate (scripts/check-instruction-budgets.sh)
# needs: valgrind and strace (apt-get), and gungraun-runner at the version
# of the `gungraun` bench library (cargo install from crates.io; the two
# must match). Idempotent: installs only what is missing.
#
#   bash scripts/install-bench-deps.sh
set -euo pipefail

runner_version="0.19.4"

missing=()
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v strace >/dev/null 2>&1 || missing+=(strace)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-bench-deps: installing ${missing[*]} (apt-get)" >&2
  sudo_prefix=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_prefix=(sudo)
    else
      echo "install-bench-deps: not root and no sudo; install these yourself: ${missing[*]}" >&2
      exit 2
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq >/dev/null || true
  "${sudo_prefix[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "$(gungraun-runner --version 2>/dev/null | awk '{print $2}')" != "$runner_version" ]; then
  echo "install-bench-deps: cargo install gungraun-runner $runner_version" >&2
  cargo install --quiet --locked gungraun-runner --version "$runner_version"
fi
