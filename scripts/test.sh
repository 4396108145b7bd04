#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs them.
#
#   bash scripts/test.sh [cargo test options…]
#
# Set-up (idempotent, each step says what it does): cmake and libclang for
# llama.cpp (scripts/install-build-deps.sh), the moto server, the offline
# model file (scripts/fetch-local-model.sh), the SDKs and packages the
# protocol and client suites use (scripts/install-client-test-deps.sh: PyPI,
# Debian's nodejs and npm).
#
# Then the workspace suite, then the slow suite: the CLI running an example
# envelope end to end on the offline model, and the run viewer in headless
# Chromium (scripts/install-browser-deps.sh: Debian's chromium, Playwright for
# Python; screenshots in target/browser-artifacts/). Tests marked #[ignore] so
# that a plain `cargo test --workspace` skips them. BATON_FAST_TESTS=1 skips
# the slow suite here too.
#
# The DynamoDB/SQS tests start the moto server themselves (infra/moto_isolated.py),
# or use BATON_TEST_AWS_ENDPOINT when it points at a running one.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-build-deps.sh

if ! python3 -c "import moto.moto_server.werkzeug_app, werkzeug" >/dev/null 2>&1; then
  echo "test: installing the moto server (pip install \"moto[server]\")" >&2
  python3 -m pip install --quiet --disable-pip-version-check "moto[server]"
fi

bash scripts/install-client-test-deps.sh
# Before the workspace suite: commands such as `baton schedule` build the
# embedded services, and those load the offline model when no endpoint is
# set (a fresh machine without the file failed `cli_schedule`).
bash scripts/fetch-local-model.sh

# Every package of the lock file, for every target: the architecture tests
# read dependency trees with `cargo tree --offline`, which fails on a fresh
# machine until the crates of all targets are downloaded.
cargo fetch --quiet

echo "test: the workspace suite" >&2
# The fault tests record what they measured; the durability report is
# rendered from those figures after the suite (docs/durability.md is the
# committed copy: bash scripts/durability-report.sh regenerates it).
figures="${CARGO_TARGET_DIR:-$PWD/target}/durability-figures"
rm -rf "$figures"
export BATON_DURABILITY_FIGURES="$figures"
cargo test --workspace "$@"
if ls "$figures"/*.json >/dev/null 2>&1; then
  python3 scripts/durability_report.py "$figures" "${CARGO_TARGET_DIR:-$PWD/target}/durability.md"
  echo "test: this run's durability report: ${CARGO_TARGET_DIR:-target}/durability.md" >&2
fi

if [ "${BATON_FAST_TESTS:-0}" = "1" ]; then
  echo "test: BATON_FAST_TESTS=1, skipping the offline-model suite" >&2
  exit 0
fi
bash scripts/install-browser-deps.sh
echo "test: the slow suite (the offline model: real decoding on the CPU; the run viewer in headless Chromium)" >&2
# One test at a time: each offline-model test decodes on every core, and
# three at once on a 2-core machine made one example take 700 s in CI.
cargo test -p baton -p baton-llm-local "$@" -- --ignored --test-threads 1
