#!/usr/bin/env bash
# Runs one envelope from registry/examples/ end to end on the embedded default
# (in-memory store and queue, one process), printing the event stream and the
# validated output. Idempotent; does its own set-up.
#
#   bash scripts/run-example.sh [ENVELOPE] [baton run options…]
#
# With BATON_LLM_BASE_URL (or OPENAI_API_KEY) set, Baton calls that model.
# Without it, this script starts the in-repo scripted OpenAI-compatible server
# (a test double that answers schema-shaped placeholder JSON) so the engine
# can be seen end to end with no key and no network. The offline local model
# that replaces it is issue 4.
set -euo pipefail
cd "$(dirname "$0")/.."

envelope="${1:-registry/examples/seed-10.1-sample-envelope.json}"
shift || true

if ! command -v cargo >/dev/null 2>&1; then
  echo "run-example: cargo is not installed (https://rustup.rs)" >&2
  exit 2
fi

echo "run-example: building baton (first build takes a few minutes)…" >&2
cargo build --quiet -p baton -p scripted-llm
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
baton="$target_dir/debug/baton"

if [ -n "${BATON_LLM_BASE_URL:-}" ] || [ -n "${OPENAI_API_KEY:-}" ] || [ -n "${OPENAI_BASE_URL:-}" ]; then
  echo "run-example: using the configured model endpoint" >&2
  exec "$baton" run "$envelope" "$@"
fi

echo "run-example: no BATON_LLM_BASE_URL set; starting the scripted OpenAI-compatible test server" >&2
echo "run-example: (its answers are schema-shaped placeholders, not a language model's)" >&2
url_file="$(mktemp)"
"$target_dir/debug/scripted-llm" --port 0 >"$url_file" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; rm -f "$url_file"' EXIT
for _ in $(seq 1 100); do
  [ -s "$url_file" ] && break
  sleep 0.05
done
base_url="$(head -n 1 "$url_file")"
if [ -z "$base_url" ]; then
  echo "run-example: the scripted server did not start" >&2
  exit 3
fi
set +e
BATON_LLM_BASE_URL="$base_url" BATON_LLM_MODEL="scripted" "$baton" run "$envelope" "$@"
status=$?
set -e
exit "$status"
