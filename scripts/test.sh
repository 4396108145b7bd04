#!/usr/bin/env bash
# The README's test command: installs what the tests need, then runs them.
#
#   bash scripts/test.sh [cargo test options…]
#
# The DynamoDB/SQS tests start the moto server themselves (infra/moto_isolated.py),
# or use BATON_TEST_AWS_ENDPOINT when it points at a running one.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! python3 -c "import moto.moto_server.werkzeug_app, werkzeug" >/dev/null 2>&1; then
  echo "test: installing the moto server (pip install \"moto[server]\")" >&2
  python3 -m pip install --quiet --disable-pip-version-check "moto[server]"
fi

exec cargo test --workspace "$@"
