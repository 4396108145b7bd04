#!/usr/bin/env bash
# The instruction gate: counts the hot paths' instructions under Valgrind
# (`cargo bench -p baton-runtime --bench instructions`, gungraun) and one
# SQLite node step's system calls (`--bench sqlite_step_syscalls`, strace),
# and holds them to shared/runtime/benches/instruction_budgets.json
# (`baton-instruction-gate`: more than 2% over or under fails).
#
# Then the gate's own test: the same benches with a deliberately slowed
# step (the model double hashes BATON_BENCH_EXTRA_WORK rounds per call) must
# fail the gate, naming the node step, while the plan step (no model call)
# still passes.
#
#   scripts/check-instruction-budgets.sh            check
#   scripts/check-instruction-budgets.sh --update   write the measured counts as the budgets
#
# Needs valgrind, strace and gungraun-runner 0.19.4 (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
target="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
home="$target/gungraun"
say() { printf 'check-instruction-budgets: %s\n' "$*"; }
# This checkout's budgets, named explicitly: the gate's binary may have been
# built from another checkout sharing the target directory.
budgets="$PWD/shared/runtime/benches/instruction_budgets.json"

GUNGRAUN_HOME="$home" cargo bench -q -p baton-runtime --bench instructions -- --save-summary=json
cargo bench -q -p baton-runtime --bench sqlite_step_syscalls
cargo run -q -p baton-instruction-gate -- --budgets "$budgets" --home "$home" ${1:+"$1"}

slowed="$target/gungraun-slowed-step"
rm -rf "$slowed"
say "the gate's own test: a node step slowed on purpose must fail it"
GUNGRAUN_HOME="$slowed" BATON_BENCH_EXTRA_WORK=400 \
  cargo bench -q -p baton-runtime --bench instructions -- --save-summary=json
cp "$home/sqlite_step_syscalls.json" "$slowed/"
set +e
verdict="$(cargo run -q -p baton-instruction-gate -- --budgets "$budgets" --home "$slowed")"
status=$?
set -e
printf '%s\n' "$verdict"
[ "$status" -eq 1 ] || { say "the gate answered $status for a slowed step, not 1"; exit 1; }
printf '%s\n' "$verdict" | grep -q '^| node_step | .* | OVER BUDGET' \
  || { say "the slowed node step is not the one named over budget"; exit 1; }
printf '%s\n' "$verdict" | grep -q '^| plan_step | .* | ok |' \
  || { say "the plan step (no model call, not slowed) should still pass"; exit 1; }
say "ok: the budgets hold, and a slowed step fails the gate"
