#!/usr/bin/env bash
# Regenerates baton_client/models.py from the checked-in OpenAPI document
# (docs/openapi.json) with datamodel-code-generator, pinned so the output
# is the same on every machine. tests/test_document.py regenerates it into
# a temporary file and fails when the checked-in one differs (drift).
set -euo pipefail
cd "$(dirname "$0")"
output="${1:-baton_client/models.py}"
command -v datamodel-codegen >/dev/null \
  || python3 -m pip install --quiet --disable-pip-version-check "datamodel-code-generator==0.89.0"
datamodel-codegen --input ../../docs/openapi.json --input-file-type openapi \
  --output "$output" --output-model-type pydantic_v2.BaseModel \
  --target-python-version 3.11 --use-annotated --snake-case-field \
  --allow-population-by-field-name --formatters builtin --disable-timestamp 2>/dev/null
