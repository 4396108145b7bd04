#!/usr/bin/env bash
# `sam build` of infra/template.yaml with the settings of Cargo.toml's
# [profile.lambda-size] (SAM's Rust builder builds with --release, so the release
# profile is given the lambda-size profile's settings through cargo's
# CARGO_PROFILE_RELEASE_* variables): LTO, one codegen unit, stripped,
# panic = "abort", optimized for size (opt-level "s").
#
#   bash infra/build.sh [extra sam build arguments, e.g. --parameter-overrides Architecture=x86_64]
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in sam cargo-lambda; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is missing: python3 -m pip install aws-sam-cli cargo-lambda ziglang" >&2; exit 2; }
done
# SAM's Rust builder copies each binary from ./target/lambda whatever
# CARGO_TARGET_DIR says (cargo lambda writes to $CARGO_TARGET_DIR/lambda):
# when builds go elsewhere, ./target/lambda points there.
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  target_dir="$(realpath -m "$CARGO_TARGET_DIR")"
  if [ "$target_dir" != "$(realpath -m target)" ]; then
    if [ -d target/lambda ] && [ ! -L target/lambda ]; then
      echo "build.sh: target/lambda is a directory but builds go to $target_dir/lambda; remove it (its binaries would be deployed)" >&2
      exit 2
    fi
    mkdir -p "$target_dir/lambda" target
    ln -sfn "$target_dir/lambda" target/lambda
  fi
fi
export SAM_CLI_BETA_RUST_CARGO_LAMBDA=1 SAM_CLI_TELEMETRY=0
export CARGO_PROFILE_RELEASE_LTO=true CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  CARGO_PROFILE_RELEASE_STRIP=true CARGO_PROFILE_RELEASE_PANIC=abort CARGO_PROFILE_RELEASE_OPT_LEVEL=s
exec sam build --template-file infra/template.yaml "$@"
