#!/usr/bin/env bash
# Regenerates src/openapi.ts from the checked-in OpenAPI document
# (docs/openapi.json) with openapi-typescript (pinned by package-lock.json).
# test/document.test.mjs regenerates it into a temporary file and fails when
# the checked-in one differs (drift).
set -euo pipefail
cd "$(dirname "$0")"
[ -x node_modules/.bin/openapi-typescript ] || npm ci --no-audit --no-fund --silent
node_modules/.bin/openapi-typescript ../../docs/openapi.json -o "${1:-src/openapi.ts}" >/dev/null 2>&1
