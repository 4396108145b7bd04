#!/usr/bin/env bash
# The checked-in OpenAPI document (docs/openapi.json) is accepted by the
# client generators people use: openapi-python-client (PyPI) generates a
# client with no warning, and openapi-typescript (npm) generates types;
# both name every operation by its hand-chosen operationId. Either refusing
# the document, or warning about a schema it dropped, fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
document="$PWD/docs/openapi.json"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tools="${BATON_TOOLS_DIR:-$HOME/.cache/baton/tools}"

echo "check-openapi-generators: openapi-python-client"
command -v openapi-python-client >/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check openapi-python-client
(cd "$work" && openapi-python-client generate --path "$document" --output-path "$work/python" > "$work/python.log" 2>&1) || {
  cat "$work/python.log" >&2
  echo "check-openapi-generators: openapi-python-client refused docs/openapi.json" >&2
  exit 1
}
if grep -E "Warning|Unable to|Cannot parse" "$work/python.log" >&2; then
  echo "check-openapi-generators: openapi-python-client dropped part of docs/openapi.json (above)" >&2
  exit 1
fi
for operation in submit_run stream_run_events get_run resume_run send_chat_message; do
  [ -f "$work/python/baton_client/api/default/$operation.py" ] || {
    echo "check-openapi-generators: the Python client has no $operation" >&2
    exit 1
  }
done

echo "check-openapi-generators: openapi-typescript"
if ! command -v npm >/dev/null 2>&1; then
  echo "check-openapi-generators: installing nodejs and npm (apt-get)" >&2
  sudo_prefix=()
  [ "$(id -u)" -ne 0 ] && sudo_prefix=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq >/dev/null || true
  "${sudo_prefix[@]}" apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -x "$tools/npm/node_modules/.bin/openapi-typescript" ]; then
  mkdir -p "$tools/npm"
  npm install --silent --no-audit --no-fund --prefix "$tools/npm" openapi-typescript@7 >/dev/null
fi
"$tools/npm/node_modules/.bin/openapi-typescript" "$document" -o "$work/baton.d.ts" > "$work/typescript.log" 2>&1 || {
  cat "$work/typescript.log" >&2
  echo "check-openapi-generators: openapi-typescript refused docs/openapi.json" >&2
  exit 1
}
for operation in submitRun streamRunEvents getRun resumeRun sendChatMessage; do
  grep -q "^    $operation: {" "$work/baton.d.ts" || {
    echo "check-openapi-generators: the TypeScript types have no operation $operation" >&2
    exit 1
  }
done
echo "check-openapi-generators: both generators accept docs/openapi.json ($(wc -l < "$work/baton.d.ts") lines of types)"
