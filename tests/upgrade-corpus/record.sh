#!/usr/bin/env bash
# Records one earlier version of main into the upgrade corpus: builds that
# version's own `baton` (a git worktree, the shared target directory), runs
# it against SQLite and against DynamoDB + SQS (moto), and keeps what it
# stored, so `functions/baton/tests/upgrade_corpus.rs` can load the records
# with the current code and drive the parked runs to completion.
#
#   bash tests/upgrade-corpus/record.sh <commit>
#
# What the old version does, on each store (tenant `local`, the CLI's):
# parks a run for a person (`human-review.json`), completes one
# (`seed-10.1-sample-envelope.json`), starts a chat thread, and, where the
# version has schedules, creates one. The model is the scripted test
# double (`scripted-llm`), built from the current tree. Written to
# tests/upgrade-corpus/<date>-<commit>/:
#   sqlite.sql           the SQLite file as SQL (with its user_version)
#   dynamodb-items.json  every item of the table (DynamoDB JSON)
#   corpus.json          the version, and what each store holds
# Needs moto_server and boto3 (scripts/install-build-deps.sh installs them).
set -euo pipefail

commit=${1:?usage: record.sh <commit>}
repo=$(git rev-parse --show-toplevel)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/baton/target}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    git -C "$repo" worktree remove --force "$work/source" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

full=$(git -C "$repo" rev-parse "$commit")
short=${full:0:7}
date=$(git -C "$repo" show -s --format=%cs "$full")
out="$repo/tests/upgrade-corpus/$date-$short"
mkdir -p "$out"

echo "record: building baton at $short ($date)" >&2
git -C "$repo" worktree add -q "$work/source" "$full"
# A target directory of its own: cargo names a workspace crate's artifacts
# by its path inside the workspace, so the old tree built into the shared
# one would overwrite the current tree's artifacts with older sources.
old_target="$CARGO_TARGET_DIR/upgrade-corpus"
(cd "$work/source" && CARGO_TARGET_DIR="$old_target" cargo build -q -p baton --bin baton --no-default-features)
cp "$old_target/debug/baton" "$work/baton-old"
(cd "$repo" && cargo build -q -p scripted-llm --bin scripted-llm)
cp "$CARGO_TARGET_DIR/debug/scripted-llm" "$work/scripted-llm"

"$work/scripted-llm" --port 0 >"$work/model-url" &
pids+=($!)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    [ -s "$work/model-url" ] && curl -s "http://127.0.0.1:$port/" >/dev/null && break
    sleep 0.2
done

export BATON_LLM_BASE_URL=$(cat "$work/model-url") BATON_LLM_MODEL=scripted
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
export XDG_DATA_HOME="$work/data"
export BATON_TABLE=baton-corpus
python3 - <<'PY'
import boto3, json, os
dynamodb = boto3.client("dynamodb")
string = lambda name: {"AttributeName": name, "AttributeType": "S"}
dynamodb.create_table(
    TableName=os.environ["BATON_TABLE"], BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[string("pk"), string("sk"), string("gsi1pk"), string("gsi1sk")],
    KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
    GlobalSecondaryIndexes=[{"IndexName": "gsi1", "Projection": {"ProjectionType": "ALL"},
        "KeySchema": [{"AttributeName": "gsi1pk", "KeyType": "HASH"}, {"AttributeName": "gsi1sk", "KeyType": "RANGE"}]}])
sqs = boto3.client("sqs")
url = sqs.create_queue(QueueName="baton-corpus-steps")["QueueUrl"]
open(os.environ["XDG_DATA_HOME"] + ".queue", "w").write(url)
PY
export BATON_QUEUE_URL=$(cat "$work/data.queue")

examples="$repo/registry/examples"
fixtures="$repo/functions/baton/tests/fixtures"
has_schedules=false
if "$work/baton-old" schedule --help >/dev/null 2>&1; then has_schedules=true; fi
# SQLite: the old CLI itself. Exit 4: the run is parked (for a person's
# answer or an approval).
store="sqlite:$work/runs.sqlite3"
echo "record: $store" >&2
for envelope in "$fixtures/human-review.json" "$examples/seed-10.1-sample-envelope.json" \
    "$fixtures/normalized-summary.json"; do
    "$work/baton-old" run "$envelope" --store "$store" --format ndjson >/dev/null 2>"$work/run.err" \
        || [ $? -eq 4 ] || { cat "$work/run.err" >&2; exit 1; }
done
"$work/baton-old" chat -m "Draft a positioning for a data tool" --store "$store" --format ndjson \
    >/dev/null 2>"$work/run.err" || [ $? -eq 4 ] || { cat "$work/run.err" >&2; exit 1; }
if $has_schedules; then
    "$work/baton-old" schedule create "$examples/seed-10.1-sample-envelope.json" \
        --expression 'rate(1 hour)' --description "kept across upgrades" --store "$store" >/dev/null
fi

# DynamoDB: the old `baton serve --store dynamodb` (anonymous: tenant
# `local`) over HTTP, as a deployment's API would be used.
echo "record: dynamodb (baton serve)" >&2
"$work/baton-old" serve --store dynamodb --addr 127.0.0.1:0 2>"$work/serve.log" &
pids+=($!)
for _ in $(seq 150); do grep -q "listening on" "$work/serve.log" && break; sleep 0.2; done
base=$(grep -o 'listening on http://[^/ ]*' "$work/serve.log" | head -1 | cut -d' ' -f3)
python3 - "$base" "$has_schedules" "$fixtures/human-review.json" "$examples/seed-10.1-sample-envelope.json" \
    "$fixtures/normalized-summary.json" <<'PY'
import json, sys, time, urllib.request
base, has_schedules, *envelopes = sys.argv[1:]
def call(method, path, body=None):
    request = urllib.request.Request(base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read()
for path in envelopes:
    run_id = json.loads(call("POST", "/api/v1/flex/runs", json.load(open(path))))["runId"]
    for _ in range(300):
        snapshot = json.loads(call("GET", f"/api/v1/flex/runs/{run_id}"))
        status = snapshot.get("status") or snapshot.get("state", {}).get("status") or snapshot["run"]["status"]
        if status not in ("queued", "running"):
            break
        time.sleep(0.2)
    print(f"record: {run_id} {status}", file=sys.stderr)
call("POST", "/api/v1/chat", {"message": "Draft a positioning for a data tool"})
if has_schedules == "true":
    call("POST", "/api/v1/flex/schedules", {"expression": "rate(1 hour)", "description": "kept across upgrades",
        "envelope": json.load(open(envelopes[1]))})
PY
kill "${pids[-1]}"

python3 - "$work/runs.sqlite3" "$out" "$full" "$date" "$has_schedules" <<'PY'
import base64, boto3, json, os, sqlite3, sys
path, out, commit, date, has_schedules = sys.argv[1:]
connection = sqlite3.connect(path)
connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
version = connection.execute("PRAGMA user_version").fetchone()[0]
with open(os.path.join(out, "sqlite.sql"), "w") as dump:
    dump.write(f"PRAGMA user_version = {version};\n")
    for line in connection.iterdump():
        dump.write(line + "\n")
count = lambda sql: connection.execute(sql).fetchone()[0]
tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
sqlite_holds = {
    "runs": count("SELECT count(*) FROM runs"),
    "parked": count("SELECT count(*) FROM runs WHERE status IN ('awaiting_human', 'awaiting_hitl', 'paused')"),
    "threadIds": [row[0] for row in connection.execute("SELECT DISTINCT thread_id FROM threads ORDER BY thread_id")]
        if "threads" in tables else [],
    "schedules": count("SELECT count(*) FROM schedules") if "schedules" in tables else 0,
}
dynamodb = boto3.client("dynamodb")
items, start = [], None
while True:
    page = dynamodb.scan(TableName=os.environ["BATON_TABLE"], **({"ExclusiveStartKey": start} if start else {}))
    items += page["Items"]
    start = page.get("LastEvaluatedKey")
    if not start:
        break
def wire(value):
    """DynamoDB JSON as the service sends it: binary values base64."""
    if isinstance(value, dict):
        return {key: (base64.b64encode(inner).decode() if key == "B" else
                      [base64.b64encode(part).decode() for part in inner] if key == "BS" else wire(inner))
                for key, inner in value.items()}
    if isinstance(value, list):
        return [wire(inner) for inner in value]
    return value
items = [wire(item) for item in items]
items.sort(key=lambda item: (item["pk"]["S"], item["sk"]["S"]))
with open(os.path.join(out, "dynamodb-items.json"), "w") as file:
    json.dump(items, file, indent=1, sort_keys=True)
run_items = [item for item in items if item["sk"]["S"] == "RUN"]
dynamodb_holds = {
    "runs": len(run_items),
    "parked": sum(1 for item in run_items if item.get("status", {}).get("S") in ("awaiting_human", "awaiting_hitl", "paused")),
    "threadIds": sorted({item["pk"]["S"].split("#THREAD#")[1] for item in items if "#THREAD#" in item["pk"]["S"]}),
    "schedules": sum(1 for item in items if item["pk"]["S"].endswith("#SCHEDULES") and not item["sk"]["S"].startswith("#")),
}
manifest = {
    "commit": commit, "date": date, "recordedWith": "tests/upgrade-corpus/record.sh",
    "tenant": "local", "sqlite": sqlite_holds, "dynamodb": dynamodb_holds,
}
with open(os.path.join(out, "corpus.json"), "w") as file:
    json.dump(manifest, file, indent=2)
    file.write("\n")
print(json.dumps(manifest, indent=2), file=sys.stderr)
PY
echo "record: written to ${out#$repo/}" >&2
