#!/usr/bin/env bash
# Installs what the run viewer's browser tests need: Debian's chromium
# (apt-get) and Playwright for Python (pip; its own browser download is not
# used: the tests launch Debian's chromium through `executable_path`).
# Idempotent: installs only what is missing.
#
#   bash scripts/install-browser-deps.sh
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  echo "install-browser-deps: installing chromium (apt-get)" >&2
  sudo_prefix=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo_prefix=(sudo)
    else
      echo "install-browser-deps: not root and no sudo; install chromium yourself" >&2
      exit 2
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq >/dev/null || true
  "${sudo_prefix[@]}" apt-get install -y -qq chromium >/dev/null
fi

if ! python3 -c "import playwright.sync_api" >/dev/null 2>&1; then
  echo "install-browser-deps: installing Playwright for Python (pip)" >&2
  python3 -m pip install --quiet --disable-pip-version-check playwright
fi
