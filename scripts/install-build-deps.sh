#!/usr/bin/env bash
# Installs the system packages Baton's build needs beyond the Rust toolchain:
# cmake and libclang (llama.cpp, the CLI's offline model, is built from source
# by the llama-cpp-sys-2 crate). Idempotent: installs only what is missing.
#
#   bash scripts/install-build-deps.sh
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
if ! compgen -G "/usr/lib/llvm-*/lib/libclang.so*" >/dev/null; then
  missing+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || missing+=(g++)

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

echo "install-build-deps: installing ${missing[*]} (apt-get; llama.cpp is built from source)" >&2
sudo_prefix=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_prefix=(sudo)
  else
    echo "install-build-deps: not root and no sudo; install these yourself: ${missing[*]}" >&2
    exit 2
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_prefix[@]}" apt-get update -qq >/dev/null || true
"${sudo_prefix[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
echo "install-build-deps: installed ${missing[*]}" >&2
