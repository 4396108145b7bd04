#!/usr/bin/env bash
# What the protocol and client suites need (idempotent): the official SDKs
# they drive Baton with (`mcp`, `a2a-sdk`), the Python client's packages and
# pytest (PyPI), and Debian's nodejs and npm for the TypeScript client
# (its own packages come from npm's registry by its lock file, `npm ci`, in
# functions/baton/tests/typed_clients.rs).
set -euo pipefail

python_packages=(mcp "a2a-sdk[http-server]==1.3.0" httpx "httpx-sse==0.4.3" "pydantic>=2.7" pytest "datamodel-code-generator==0.89.0")
if ! python3 -c "import mcp, a2a.client, httpx_sse, pydantic, pytest, datamodel_code_generator" >/dev/null 2>&1; then
  echo "install-client-test-deps: pip install ${python_packages[*]}" >&2
  python3 -m pip install --quiet --disable-pip-version-check "${python_packages[@]}"
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "install-client-test-deps: installing nodejs and npm (apt-get)" >&2
  sudo_prefix=()
  [ "$(id -u)" -ne 0 ] && sudo_prefix=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq >/dev/null || true
  "${sudo_prefix[@]}" apt-get install -y -qq nodejs npm >/dev/null
fi
