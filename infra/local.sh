#!/usr/bin/env bash
# Local AWS for Baton: the moto server (DynamoDB + SQS) on 127.0.0.1.
#
#   infra/local.sh up     start moto (installing it if missing), create the table and the
#                         queues idempotently, print the `export` lines to use them
#   infra/local.sh up --endpoint URL
#                         use an emulator that is already running (LocalStack, moto, …)
#                         at URL: create the table and queues there, start nothing
#   infra/local.sh down   stop the moto server this script started (and nothing else)
#
# BATON_LOCAL_KMS_KEY=create (a key made in the emulator) or a key ARN encrypts
# the table and the queues with that key, as the template's CustomerKmsKey does.
#
# Then:  eval "$(infra/local.sh up)"; baton serve --store dynamodb
set -euo pipefail

port="${BATON_LOCAL_PORT:-4566}"
state_dir="${BATON_LOCAL_STATE_DIR:-$HOME/.cache/baton/local}"
pid_file="$state_dir/moto-$port.pid"
table="${BATON_TABLE:-baton-local}"
queue="${BATON_QUEUE_NAME:-baton-local-steps}"
endpoint="http://127.0.0.1:$port"

say() { echo "local.sh: $*" >&2; }

up() {
  mkdir -p "$state_dir"
  if [ "${1:-}" = "--endpoint" ]; then
    [ -n "${2:-}" ] || { echo "usage: infra/local.sh up --endpoint URL" >&2; exit 2; }
    endpoint="$2"
    say "using the emulator at $endpoint (nothing started)"
    python3 -c "import boto3, yaml" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check boto3 pyyaml >&2
  elif ! command -v moto_server >/dev/null 2>&1; then
    say "installing the moto server (pip install \"moto[server]\")"
    python3 -m pip install --quiet --disable-pip-version-check "moto[server]" >&2
  fi
  if [ "${1:-}" = "--endpoint" ]; then
    :
  elif [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
    say "moto already running on $endpoint (pid $(cat "$pid_file"))"
  else
    say "starting moto on $endpoint"
    # moto with DynamoDB requests serialized (moto does not isolate concurrent transactions).
    nohup python3 "$(dirname "$0")/moto_isolated.py" "$port" >"$state_dir/moto-$port.log" 2>&1 &
    echo $! >"$pid_file"
    for _ in $(seq 1 100); do
      if python3 - "$port" <<'PY' 2>/dev/null; then break; fi
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.2).close()
PY
      sleep 0.1
    done
  fi
  python3 -c "import boto3, yaml" 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check boto3 pyyaml >&2
  say "creating table $table and queue $queue (idempotent; timings from infra/template.yaml)"
  queue_url="$(AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test python3 - "$endpoint" "$table" "$queue" "$(dirname "$0")/template.yaml" "${BATON_LOCAL_KMS_KEY:-}" <<'PY'
import json, sys
import boto3
import yaml
endpoint, table, queue, template_path, kms_key = sys.argv[1:6]

# The step queue's timings as the template ships them (Mappings.Timeouts.Step):
# one set for the cloud, this stack and the tests. CloudFormation's tags (!Ref,
# !FindInMap, ...) are read as plain values; only the mapping is used.
class TemplateLoader(yaml.SafeLoader):
    pass
TemplateLoader.add_multi_constructor("!", lambda loader, suffix, node: None)
with open(template_path) as template_file:
    timings = yaml.load(template_file, Loader=TemplateLoader)["Mappings"]["Timeouts"]["Step"]
session = boto3.session.Session(region_name="us-east-1")
# The customer's key, as the template's CustomerKmsKey: made here, or given.
if kms_key == "create":
    kms_key = session.client("kms", endpoint_url=endpoint).create_key(
        Description=f"{table}: the runs table and the queues")["KeyMetadata"]["Arn"]
table_encryption = {"SSESpecification": {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": kms_key}} if kms_key else {}
queue_encryption = {"KmsMasterKeyId": kms_key} if kms_key else {}
dynamodb = session.client("dynamodb", endpoint_url=endpoint)
if table not in dynamodb.list_tables()["TableNames"]:
    dynamodb.create_table(
        **table_encryption,
        TableName=table, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "gsi1pk", "gsi1sk")],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "gsi1", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "gsi1pk", "KeyType": "HASH"}, {"AttributeName": "gsi1sk", "KeyType": "RANGE"}]}])
    dynamodb.update_time_to_live(TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"})
sqs = session.client("sqs", endpoint_url=endpoint)
dead_letter_url = sqs.create_queue(QueueName=queue + "-dlq", Attributes=queue_encryption)["QueueUrl"]
dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letter_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
url = sqs.create_queue(QueueName=queue, Attributes={
    **queue_encryption,
    "VisibilityTimeout": str(timings["QueueVisibilitySeconds"]),
    "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": str(timings["MaxReceiveCount"])})})["QueueUrl"]
print(url, dead_letter_url, timings["NodeLeaseSeconds"], kms_key or "-")
PY
)"
  read -r queue_url dead_letter_url node_lease_seconds kms_key_arn <<<"$queue_url"
  cat <<EXPORTS
export AWS_ENDPOINT_URL=$endpoint
export AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export BATON_TABLE=$table
export BATON_QUEUE_URL=$queue_url
export BATON_DEAD_LETTER_QUEUE_URL=$dead_letter_url
export BATON_NODE_LEASE_SECONDS=$node_lease_seconds
EXPORTS
  if [ "$kms_key_arn" != "-" ]; then
    echo "export BATON_LOCAL_KMS_KEY_ARN=$kms_key_arn"
  fi
}

down() {
  if [ -f "$pid_file" ]; then
    pid="$(cat "$pid_file")"
    if kill -0 "$pid" 2>/dev/null; then
      say "stopping moto (pid $pid)"
      kill "$pid"
    fi
    rm -f "$pid_file"
  else
    say "nothing to stop: this script did not start moto on port $port"
  fi
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  *) echo "usage: infra/local.sh up [--endpoint URL] | down" >&2; exit 2 ;;
esac
