"""A remote agent served by the official `a2a-sdk` server (A2A 1.0,
JSON-RPC), a test double of an agent service someone else runs, for
`functions/baton/tests/a2a_remote_agent.rs`: Baton invokes it as a
capability's `remoteAgent`.

It records every message it receives (one JSON line per call in
REMOTE_AGENT_LOG), streams a progress status, and answers an artifact
with a data part built from the message's `outputSchema`; its first
answer breaks the contract on purpose (a required field missing), so the
test sees Baton re-prompt it.

Usage: remote_agent.py PORT
"""

import json
import os
import sys

import uvicorn
from google.protobuf import json_format, struct_pb2
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2

sys.path.insert(0, os.path.dirname(__file__))
from schema_instances import instance_of  # noqa: E402

PORT = int(sys.argv[1])
LOG = os.environ["REMOTE_AGENT_LOG"]
calls = {"count": 0}


def data(value):
    return a2a_pb2.Part(data=json_format.ParseDict(value, struct_pb2.Value()))


class RemoteWriter(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        calls["count"] += 1
        parts = [json_format.MessageToDict(part) for part in context.message.parts]
        with open(LOG, "a") as log:
            log.write(json.dumps({"call": calls["count"], "parts": parts}) + "\n")
        await event_queue.enqueue_event(
            new_task(context.task_id, context.context_id, a2a_pb2.TASK_STATE_SUBMITTED))
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work(updater.new_agent_message([a2a_pb2.Part(text="drafting the answer")]))
        schema = next(part["data"]["outputSchema"] for part in parts if "data" in part)
        answer = instance_of(schema)
        if calls["count"] == 1:
            # Breaks the contract: the first required field is missing.
            answer.pop(schema["required"][0])
        await updater.add_artifact([data(answer)], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


card = a2a_pb2.AgentCard(
    name="Remote writer",
    description="Writes what it is asked for, as a data part matching the schema it is sent.",
    version="1.0.0",
    supported_interfaces=[a2a_pb2.AgentInterface(url=f"http://127.0.0.1:{PORT}/",
                                                 protocol_binding="JSONRPC", protocol_version="1.0")],
    capabilities=a2a_pb2.AgentCapabilities(streaming=True),
    default_input_modes=["text/plain", "application/json"],
    default_output_modes=["application/json"],
    skills=[a2a_pb2.AgentSkill(id="write", name="Write", description="Writes to a schema.",
                               tags=["writing"])],
)
handler = DefaultRequestHandler(agent_executor=RemoteWriter(), task_store=InMemoryTaskStore(),
                                agent_card=card)
app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
uvicorn.run(app, host="127.0.0.1", port=PORT, log_level="warning")
