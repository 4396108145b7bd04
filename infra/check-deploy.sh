#!/usr/bin/env bash
# Proves the deployment starts: builds the stack as `sam build` does (with the
# lambda profile's settings, x86_64 so the binaries run on this machine), then
# starts each built `bootstrap` alone in an empty directory (as /var/task holds
# only it) under a small Lambda Runtime API emulator (infra/runtime_api.py),
# with the environment infra/template.yaml gives it, against DynamoDB and SQS
# from moto:
#   api      answers GET /api/v1/flex/capabilities with the registry's capabilities,
#            GET / with the run viewer's page and GET /.well-known/agent-card.json
#            with the A2A agent card (its interface on the function URL's host), and
#            creates a schedule in EventBridge Scheduler (POST /api/v1/flex/schedules);
#            after the steps, it accepts a served evaluation (POST /api/v1/flex/evaluations:
#            kept in the table, its first pass submitting the example's run)
#   ingest   accepts an envelope (a run is created, its planning step queued)
#   step     handles that real planning message (plan_generated is committed), then
#            the run's first node, whose model is the catalog's Bedrock model (the
#            envelope prefers it): the built function calls Bedrock's ConverseStream,
#            signed with its credentials, at the scripted double of that API
#            (tests/scripted-llm; AWS_ENDPOINT_URL_BEDROCK_RUNTIME points the SDK at it)
#   stream   streams that run's frames as SSE through a streamed response
#   sweeper  runs once, its passes ending the served evaluation the api accepted
# and checks that each stripped binary is at most 22 MiB (15 MiB until the step
# function took MCP over streamable HTTP, rmcp's client adding 1.3 MB; 17 MiB
# until it announced runs on EventBridge and counted its commits, +0.5 MB; the
# cold-start bench measured the difference, see docs/benchmarks.md; 18 MiB until it took
# Amazon Bedrock's runtime client, which put it at 18,933,936 bytes; the client is
# made on the first Bedrock call, so a process that never calls one never loads it;
# 19 MiB until 2026-11-28, when the step function measured 20,070,960 bytes at
# 5debc5f: about 1.1 MB of engine and runtime growth since 18,933,936, not yet
# attributed to a change nor measured by the cold-start bench; the api function
# measured 18,700,208 bytes once the MCP server was left out of it). With schedules
# (2026-11-28: croner and jiff with its bundled tz database in the engine, EventBridge
# Scheduler's client in the api and stream functions) the step function measured
# 20,649,648 bytes and the api 20,123,888: about 320 KB and 850 KB of headroom.
# 20 MiB until 2026-11-29, when the api measured 21,062,896 bytes at 7cacf52:
# +939 KB since 20,123,888, from escalation health, the live life cycle, request
# idempotency keys (a store port and its DynamoDB adapter), the one AWS error
# mapping and every streaming route's budget; not yet attributed change by change.
# Lambda's own limit is 250 MB unzipped; this is the house's budget: 22 MiB.
#
#   bash infra/check-deploy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "check-deploy: $*" >&2; }
started_at=$(date +%s)

need=()
command -v sam >/dev/null || need+=(aws-sam-cli)
command -v cargo-lambda >/dev/null || need+=(cargo-lambda)
python3 -c "import ziglang" 2>/dev/null || need+=(ziglang)
python3 -c "import moto.moto_server.werkzeug_app, boto3, yaml" 2>/dev/null || need+=("moto[server]" boto3 pyyaml)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} (pip)"
  python3 -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi

work="$(mktemp -d)"
moto_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
cleanup() {
  BATON_LOCAL_STATE_DIR="$work/local" BATON_LOCAL_PORT="$moto_port" bash infra/local.sh down || true
  jobs -p | xargs -r kill 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

say "sam build (x86_64; LTO, strip, panic=abort)"
bash infra/build.sh --parameter-overrides Architecture=x86_64 --build-dir "$work/build" >"$work/sam-build.log" 2>&1 \
  || { tail -n 40 "$work/sam-build.log" >&2; exit 1; }
for function in Api Stream Step Sweeper Ingest; do
  binary="$work/build/${function}Function/bootstrap"
  [ -x "$binary" ] || { say "sam build produced no $binary"; exit 1; }
  size="$(stat -c %s "$binary")"
  say "built ${function}Function/bootstrap: $size bytes"
  [ "$size" -le $((22 * 1024 * 1024)) ] || { say "${function}Function is over 22 MiB"; exit 1; }
done

say "moto on 127.0.0.1:$moto_port (the table and queues encrypted with a customer KMS key, as CustomerKmsKey=create deploys them)"
BATON_LOCAL_STATE_DIR="$work/local" BATON_LOCAL_PORT="$moto_port" BATON_TABLE=baton-check \
  BATON_QUEUE_NAME=baton-check-steps BATON_LOCAL_KMS_KEY=create bash infra/local.sh up >"$work/exports"
# shellcheck disable=SC1090
source "$work/exports"
python3 - <<'PY'
import os
import sys
import boto3
key = os.environ["BATON_LOCAL_KMS_KEY_ARN"]
region, endpoint = os.environ["AWS_REGION"], os.environ["AWS_ENDPOINT_URL"]
table = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint).describe_table(
    TableName=os.environ["BATON_TABLE"])["Table"]
assert table["SSEDescription"]["SSEType"] == "KMS", table.get("SSEDescription")
assert table["SSEDescription"]["KMSMasterKeyArn"] == key, table["SSEDescription"]
sqs = boto3.client("sqs", region_name=region, endpoint_url=endpoint)
for url in (os.environ["BATON_QUEUE_URL"], os.environ["BATON_DEAD_LETTER_QUEUE_URL"]):
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])["Attributes"]
    assert attributes.get("KmsMasterKeyId") == key, (url, attributes)
print(f"check-deploy: the table and the step queues are encrypted with the customer key {key}", file=sys.stderr)
PY

say "the scripted model double (OpenAI, Anthropic and Bedrock ConverseStream wire protocols)"
cargo build --quiet -p scripted-llm --bin scripted-llm
double_binary="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/scripted-llm"
double_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
"$double_binary" --port "$double_port" >"$work/double.log" 2>&1 &
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$double_port") 2>/dev/null && break
  sleep 0.1
done
double_url="http://127.0.0.1:$double_port"

token="check-deploy-token"
digest="$(printf %s "$token" | sha256sum | cut -d' ' -f1)"
values=(RunsTable="$BATON_TABLE" StepQueue="$BATON_QUEUE_URL" StepDeadLetterQueue="$BATON_DEAD_LETTER_QUEUE_URL"
        LlmBaseUrl=http://127.0.0.1:9/v1
        LlmModel=unused-by-deterministic-planning LlmApiKey= ApiTokens="local:$digest"
        IngestQueue.Arn=arn:aws:sqs:us-east-1:123456789012:baton-check-ingest
        SchedulerRole.Arn=arn:aws:iam::123456789012:role/baton-check-scheduler
        ScheduleGroup=baton-check-schedules)
# The stack's schedule group, as the template creates it.
python3 - <<'PY'
import os
import boto3
scheduler = boto3.client("scheduler", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
if "baton-check-schedules" not in [group["Name"] for group in scheduler.list_schedule_groups()["ScheduleGroups"]]:
    scheduler.create_schedule_group(Name="baton-check-schedules")
PY

# invoke FUNCTION EVENT_FILE [STREAMED_TEXT]: runs the function once, prints
# its answer JSON; with STREAMED_TEXT, stops it once its streamed response
# holds that text (a stream that follows a run does not end by itself).
invoke() {
  local function="$1" event="$2" until_streamed="${3:-}" directory="$work/run-$1" api_port answer pid_api pid_function
  mkdir -p "$directory/task"
  cp "$work/build/${function}Function/bootstrap" "$directory/task/bootstrap"
  api_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
  answer="$directory/answer.json"
  # A function invoked twice (api: the API, then the viewer) answers afresh.
  rm -f "$answer" "$answer.stream"
  python3 infra/runtime_api.py "$api_port" "$event" "$answer" &
  pid_api=$!
  # The function's first call is to the Runtime API: wait until it listens.
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$api_port") 2>/dev/null && break
    sleep 0.1
  done
  mapfile -t template_environment < <(python3 infra/template_env.py "${function}Function" "${values[@]}")
  (cd "$directory/task" && exec env -i PATH=/usr/bin:/bin HOME="$directory" \
      AWS_ENDPOINT_URL="$AWS_ENDPOINT_URL" AWS_REGION="$AWS_REGION" \
      AWS_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" AWS_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
      AWS_ENDPOINT_URL_BEDROCK_RUNTIME="$double_url" \
      "${template_environment[@]}" \
      AWS_LAMBDA_RUNTIME_API="127.0.0.1:$api_port" AWS_LAMBDA_FUNCTION_NAME="$function" \
      AWS_LAMBDA_FUNCTION_VERSION=1 AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512 \
      AWS_LAMBDA_LOG_STREAM_NAME="check/$function" ./bootstrap) >"$directory/log" 2>&1 &
  pid_function=$!
  for _ in $(seq 1 600); do
    [ -f "$answer" ] && break
    if [ -n "$until_streamed" ] && grep -qa -- "$until_streamed" "$answer.stream" 2>/dev/null; then
      python3 -c 'import json,sys; json.dump({"kind": "stream", "body": open(sys.argv[1], "rb").read().decode("utf-8", "replace")}, open(sys.argv[2], "w"))' "$answer.stream" "$answer"
      break
    fi
    kill -0 "$pid_function" 2>/dev/null || break
    sleep 0.1
  done
  kill "$pid_function" "$pid_api" 2>/dev/null || true
  wait "$pid_function" "$pid_api" 2>/dev/null || true
  if [ ! -f "$answer" ]; then
    say "$function gave no answer; its log:"; tail -n 30 "$directory/log" >&2; exit 1
  fi
  cat "$answer"
}

sed "s/local-dev-token/$token/" events/lambda/api-list-capabilities.json >"$work/api-event.json"
invoke Api "$work/api-event.json" >"$work/api.json"
python3 - "$work/api.json" <<'PY'
import json, os, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response", answer
response = answer["body"]
assert response["statusCode"] == 200, response
capabilities = json.loads(response["body"])["capabilities"]
expected = len([name for name in os.listdir("registry/capabilities") if name.endswith(".json")])
assert len(capabilities) == expected, (len(capabilities), expected)
print(f"check-deploy: api listed the {expected} registry capabilities", file=sys.stderr)
PY

# The run viewer is served by the same function, beside the API.
invoke Api events/lambda/api-viewer-page.json >"$work/viewer.json"
python3 - "$work/viewer.json" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response", answer
response = answer["body"]
assert response["statusCode"] == 200, response
body = response["body"]
assert "<title>Baton · runs and chats</title>" in body, body[:200]
print("check-deploy: api served the run viewer at /", file=sys.stderr)
PY

# The A2A agent card, public, its interface on the function URL's host.
invoke Api events/lambda/api-agent-card.json >"$work/agent-card.json"
python3 - "$work/agent-card.json" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response", answer
response = answer["body"]
assert response["statusCode"] == 200, response
card = json.loads(response["body"])
interface = card["supportedInterfaces"][0]
assert interface["url"] == "https://abcdefg.lambda-url.us-east-1.on.aws/a2a", interface
assert interface["protocolBinding"] == "JSONRPC", interface
print(f"check-deploy: api served the A2A agent card ({len(card['skills'])} skills, JSON-RPC at {interface['url']})", file=sys.stderr)
PY

# A schedule: the built api creates it in EventBridge Scheduler (moto's), in
# the stack's group, targeting the ingest queue as the template's role.
python3 - "$work/schedule-event.json" <<'PY'
import json, sys
event = json.load(open("events/lambda/api-list-capabilities.json"))
event["rawPath"] = event["requestContext"]["http"]["path"] = "/api/v1/flex/schedules"
event["requestContext"]["http"]["method"] = "POST"
event["body"] = json.dumps({
    "expression": "cron(0 8 ? * MON-FRI *)", "timezone": "Europe/Paris",
    "envelope": json.load(open("registry/examples/social-post-new-case.json")),
})
json.dump(event, open(sys.argv[1], "w"))
PY
sed -i "s/local-dev-token/$token/" "$work/schedule-event.json"
invoke Api "$work/schedule-event.json" >"$work/schedule.json"
python3 - "$work/schedule.json" <<'PY'
import json, os, sys
import boto3
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response", answer
response = answer["body"]
assert response["statusCode"] == 201, response
schedule = json.loads(response["body"])
assert schedule["trigger"] == "event_bridge", schedule
scheduler = boto3.client("scheduler", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
kept = scheduler.get_schedule(Name=schedule["scheduleId"], GroupName="baton-check-schedules")
assert kept["ScheduleExpression"] == "cron(0 8 ? * MON-FRI *)", kept
assert kept["ScheduleExpressionTimezone"] == "Europe/Paris", kept
assert kept["Target"]["Arn"] == "arn:aws:sqs:us-east-1:123456789012:baton-check-ingest", kept["Target"]
assert kept["Target"]["RoleArn"] == "arn:aws:iam::123456789012:role/baton-check-scheduler", kept["Target"]
assert json.loads(kept["Target"]["Input"])["scheduleFire"]["scheduleId"] == schedule["scheduleId"], kept["Target"]
print(f"check-deploy: api created schedule {schedule['scheduleId']} in EventBridge Scheduler (group baton-check-schedules, target the ingest queue)", file=sys.stderr)
PY

# The sample ingest event, its envelope preferring the catalog's Bedrock model.
python3 - "$work/ingest-event.json" <<'PY'
import json, sys
event = json.load(open("events/lambda/ingest-sqs-event.json"))
body = json.loads(event["Records"][0]["body"])
body["envelope"].setdefault("constraints", {})["preferredModels"] = ["bedrock-nova-lite"]
event["Records"][0]["body"] = json.dumps(body)
json.dump(event, open(sys.argv[1], "w"))
PY
invoke Ingest "$work/ingest-event.json" >"$work/ingest.json"
python3 - "$work/ingest.json" "$work/step-event.json" <<'PY'
import json, os, sys
import boto3
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response" and answer["body"]["batchItemFailures"] == [], answer
sqs = boto3.client("sqs", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
messages = sqs.receive_message(QueueUrl=os.environ["BATON_QUEUE_URL"], MaxNumberOfMessages=1, WaitTimeSeconds=2).get("Messages", [])
assert messages, "ingest queued no planning step"
body = json.loads(messages[0]["Body"])
assert body["command"]["kind"] == "plan", body
event = {"Records": [{"messageId": messages[0]["MessageId"], "receiptHandle": messages[0]["ReceiptHandle"],
                      "body": messages[0]["Body"], "attributes": {"ApproximateReceiveCount": "1"},
                      "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": os.environ["AWS_REGION"]}]}
json.dump(event, open(sys.argv[2], "w"))
print(f"check-deploy: ingest created run {body['runId']} and queued its planning step", file=sys.stderr)
PY

invoke Step "$work/step-event.json" >"$work/step.json"
python3 - "$work/step.json" "$work/step-event.json" <<'PY'
import json, os, sys
import boto3
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response" and answer["body"]["batchItemFailures"] == [], answer
message = json.loads(json.load(open(sys.argv[2]))["Records"][0]["body"])
dynamodb = boto3.client("dynamodb", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
items = dynamodb.query(TableName=os.environ["BATON_TABLE"], ConsistentRead=True,
                       KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
                       ExpressionAttributeValues={":pk": {"S": f"T#{message['tenantId']}#R#{message['runId']}"},
                                                  ":events": {"S": "EV#"}})["Items"]
types = [json.loads(item["frame"]["S"])["type"] for item in items]
assert "plan_generated" in types, types
print(f"check-deploy: step planned the run ({', '.join(types)})", file=sys.stderr)
PY

python3 - "$work/step-event.json" "$work/stream-event.json" <<'PY'
import json, sys
message = json.loads(json.load(open(sys.argv[1]))["Records"][0]["body"])
event = json.load(open("events/lambda/stream-run-events.json"))
path = f"/api/v1/flex/runs/{message['runId']}/events"
event["rawPath"] = event["requestContext"]["http"]["path"] = path
event["headers"]["authorization"] = "Bearer check-deploy-token"
event["headers"]["last-event-id"] = "0"
json.dump(event, open(sys.argv[2], "w"))
PY
invoke Stream "$work/stream-event.json" "plan_generated" >"$work/stream.json"
python3 - "$work/stream.json" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "stream", answer
# A function URL stream: a JSON prelude (status, headers), 8 NUL bytes, the body.
prelude, _, body = answer["body"].partition("\0" * 8)
prelude = json.loads(prelude)
assert prelude["statusCode"] == 200, prelude
assert prelude["headers"]["content-type"].startswith("text/event-stream"), prelude
events = [line.split(":", 1)[1].strip() for line in body.splitlines() if line.startswith("event:")]
# The sample's legacy policy keys are each said in a warning; the story is the rest.
story = [event for event in events if event != "warning"]
assert story[:4] == ["start", "phase", "plan_requested", "plan_generated"], events
assert events.count("warning") >= 3, events
print(f"check-deploy: stream relayed the run's frames as SSE ({', '.join(events)})", file=sys.stderr)
PY

# The run's first node, on Bedrock: the step message the planning step queued.
python3 - "$work/step-event.json" "$work/node-event.json" <<'PY'
import json, os, sys
import boto3
run_id = json.loads(json.load(open(sys.argv[1]))["Records"][0]["body"])["runId"]
sqs = boto3.client("sqs", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
node = None
for _ in range(10):
    for message in sqs.receive_message(QueueUrl=os.environ["BATON_QUEUE_URL"], MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
        body = json.loads(message["Body"])
        if body["runId"] == run_id and body["command"]["kind"] != "plan":
            node = message
    if node:
        break
assert node, "the planning step queued no node step"
event = {"Records": [{"messageId": node["MessageId"], "receiptHandle": node["ReceiptHandle"],
                      "body": node["Body"], "attributes": {"ApproximateReceiveCount": "1"},
                      "messageAttributes": {}, "eventSource": "aws:sqs", "awsRegion": os.environ["AWS_REGION"]}]}
json.dump(event, open(sys.argv[2], "w"))
PY
invoke Step "$work/node-event.json" >"$work/node-step.json"
python3 - "$work/node-step.json" "$work/node-event.json" "$double_url" <<'PY'
import json, os, sys, urllib.request
import boto3
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response" and answer["body"]["batchItemFailures"] == [], answer
message = json.loads(json.load(open(sys.argv[2]))["Records"][0]["body"])
dynamodb = boto3.client("dynamodb", region_name=os.environ["AWS_REGION"], endpoint_url=os.environ["AWS_ENDPOINT_URL"])
items = dynamodb.query(TableName=os.environ["BATON_TABLE"], ConsistentRead=True,
                       KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
                       ExpressionAttributeValues={":pk": {"S": f"T#{message['tenantId']}#R#{message['runId']}"},
                                                  ":events": {"S": "EV#"}})["Items"]
frames = [json.loads(item["frame"]["S"]) for item in items]
starts = [frame for frame in frames if frame["type"] == "node_start"]
assert starts and starts[0]["payload"].get("model") == "bedrock-nova-lite", starts
completed = [frame for frame in frames if frame["type"] == "node_complete"]
assert completed, [frame["type"] for frame in frames]
seen = json.load(urllib.request.urlopen(sys.argv[3] + "/_requests"))["requests"]
bedrock = [request for request in seen if request["protocol"] == "BedrockConverseStream"]
assert bedrock and all(request["model"] == "amazon.nova-lite-v1:0" for request in bedrock), seen
print(f"check-deploy: step ran {starts[0]['nodeId']} on Bedrock (ConverseStream to {bedrock[0]['model']}, "
      f"{len(bedrock)} call(s) at the double; node_complete committed)", file=sys.stderr)
PY

# A served evaluation: the built api keeps it in the table and its first
# pass submits the example's run (its id in the answer). The example allows
# 1 ms (its run is cancelled 2 s after it began), so the sweeper's passes
# below end it: the sweeper drives evaluations on Lambda.
python3 - "$work/evaluation-event.json" <<'PY'
import json, sys
event = json.load(open("events/lambda/api-list-capabilities.json"))
event["rawPath"] = event["requestContext"]["http"]["path"] = "/api/v1/flex/evaluations"
event["requestContext"]["http"]["method"] = "POST"
event["body"] = json.dumps({
    "name": "check-deploy",
    "template": json.load(open("registry/examples/seed-10.0.1-stream-contract-variants.json")),
    "dataset": [{"id": "one", "inputs": {}, "expect": {"maxDurationMs": 1}}],
})
json.dump(event, open(sys.argv[1], "w"))
PY
sed -i "s/local-dev-token/$token/" "$work/evaluation-event.json"
invoke Api "$work/evaluation-event.json" >"$work/evaluation.json"
python3 - "$work/evaluation.json" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response", answer
response = answer["body"]
assert response["statusCode"] == 202, response
record = json.loads(response["body"])
assert record["status"] == "running", record
print(f"check-deploy: api accepted evaluation {record['evaluationId']} (kept in the table)", file=sys.stderr)
PY

invoke Sweeper events/lambda/sweeper-scheduled-event.json >"$work/sweeper.json"
python3 - "$work/sweeper.json" <<'PY'
import json, sys
answer = json.load(open(sys.argv[1]))
assert answer["kind"] == "response" and isinstance(answer["body"]["resent"], int), answer
assert isinstance(answer["body"]["deadLetteredRunsEnded"], int), answer
body = answer["body"]
assert body["evaluationsAdvanced"] >= 1 and body["evaluationsEnded"] == 1, body
print(f"check-deploy: sweeper ran once (re-sent {body['resent']}, "
      f"read the dead-letter queue: {body['deadLetteredRunsEnded']} run(s) ended, "
      f"ended the served evaluation in {body['evaluationsAdvanced']} pass(es))", file=sys.stderr)
PY

say "ok in $(( $(date +%s) - started_at )) s"
