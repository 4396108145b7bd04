#!/usr/bin/env bash
# Regenerates the book's durability report (docs/durability.md): runs the
# fault tests with BATON_DURABILITY_FIGURES set, so each writes what it did
# and measured, then renders the chapter from those figures. Needs what the
# tests need (moto_server: scripts/install-build-deps.sh). About 8 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/baton/target}
figures=$(mktemp -d)
trap 'rm -rf "$figures"' EXIT
export BATON_DURABILITY_FIGURES=$figures
cargo test -q -p baton-step-function --test killed_mid_node --test killed_before_hold
cargo test -q -p baton --test serve_crash --test serve_crash_aws
cargo test -q -p baton-aws --test faults --test large_answers
cargo test -q -p baton-runtime --test durability
python3 scripts/durability_report.py "$figures" docs/durability.md
echo "durability report: docs/durability.md from $(ls "$figures" | wc -l) scenarios" >&2
