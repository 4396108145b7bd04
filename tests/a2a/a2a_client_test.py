"""Baton's A2A server driven by the official `a2a-sdk` Python client (a
client no one here wrote, used unchanged): it fetches Baton's agent card,
sends an envelope as a data part and streams the run to a completed task
whose artifact is the validated output; a run parked for a person goes
`input-required`, and the answer sent as the next message on the task
completes it; GetTask, CancelTask, a bad envelope (refused with its JSON
path) and a request without a token are checked too.
Run by `functions/baton/tests/a2a_server.rs`, which starts the model double
(the test double of the LLM endpoint) and `baton serve`, and fails when
this fails.

Environment: BATON_ROOT (the server's root URL), BATON_TOKEN,
BATON_ENVELOPE and BATON_PARKED_ENVELOPE (envelope files).
"""

import asyncio
import json
import os
import uuid

import httpx
from google.protobuf import json_format, struct_pb2

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError

from schema_instances import instance_of

ROOT = os.environ["BATON_ROOT"]
ENVELOPE = json.loads(open(os.environ["BATON_ENVELOPE"]).read())
PARKED = json.loads(open(os.environ["BATON_PARKED_ENVELOPE"]).read())


def data_part(value):
    return a2a_pb2.Part(data=json_format.ParseDict(value, struct_pb2.Value()))


def message(parts, task_id=None, metadata=None):
    built = a2a_pb2.Message(message_id=str(uuid.uuid4()), role=a2a_pb2.ROLE_USER, parts=parts)
    if task_id:
        built.task_id = task_id
    if metadata:
        built.metadata.update(metadata)
    return a2a_pb2.SendMessageRequest(message=built)


def as_json(proto_value):
    return json_format.MessageToDict(proto_value)


async def stream(client, request):
    events = []
    async for event in client.send_message(request):
        events.append(event)
    return events


def final_state(events):
    updates = [e.status_update for e in events if e.HasField("status_update")]
    return updates[-1].status.state if updates else events[-1].task.status.state


async def main():
    headers = {"Authorization": f"Bearer {os.environ['BATON_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        card = await A2ACardResolver(http, ROOT).get_agent_card()
        skills = [skill.id for skill in card.skills]
        assert skills[:2] == ["run-envelope", "chat"], skills
        assert len(skills) > 2, "the registry's capabilities are skills"
        assert card.capabilities.streaming, card
        assert "bearer" in card.security_schemes, card
        assert card.supported_interfaces[0].url == f"{ROOT}/a2a", card.supported_interfaces
        print(f"ok: the agent card: {len(skills)} skills, bearer security, JSON-RPC at "
              f"{card.supported_interfaces[0].url}")

        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)

        # An envelope streams to a completed task whose artifact is the output.
        events = await stream(client, message([data_part(ENVELOPE)]))
        assert events[0].HasField("task"), events[0]
        task_id = events[0].task.id
        working = [e for e in events if e.HasField("status_update")
                   and e.status_update.status.state == a2a_pb2.TASK_STATE_WORKING]
        assert working, "one working update per frame"
        kinds = [e.status_update.status.message.parts[0].text.split(" ")[0] for e in working]
        assert "plan_generated" in kinds and kinds[-1] == "complete", kinds
        artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
        assert len(artifacts) == 1 and artifacts[0].name == "output", artifacts
        output = json_format.MessageToDict(artifacts[0].parts[0].data)
        assert output["copyVariants"], output
        assert final_state(events) == a2a_pb2.TASK_STATE_COMPLETED, events[-1]
        fetched = await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
        assert fetched.status.state == a2a_pb2.TASK_STATE_COMPLETED, fetched
        assert as_json(fetched.artifacts[0].parts[0])["data"] == output
        print(f"ok: an envelope streamed as task {task_id}: {len(working)} working updates, "
              f"the validated output as the `output` artifact, completed; GetTask agrees")

        # A parked run goes input-required; the answer completes it.
        events = await stream(client, message([data_part(PARKED)]))
        parked_id = events[0].task.id
        assert final_state(events) == a2a_pb2.TASK_STATE_INPUT_REQUIRED, events[-1]
        waiting = as_json(events[-1].status_update.status.message.parts[1])["data"]
        task = waiting["tasks"][0]
        wrong = {key: 7 for key in task["outputSchema"].get("required", ["x"])}
        try:
            await stream(client, message([data_part(wrong)], task_id=parked_id))
            raise AssertionError("an answer breaking the contract was applied")
        except InvalidParamsError as refused:
            assert "output_contract_violated" in str(refused), refused
        answer = instance_of(task["outputSchema"])
        events = await stream(client, message([data_part(answer)], task_id=parked_id))
        assert events[0].task.id == parked_id, events[0]
        assert final_state(events) == a2a_pb2.TASK_STATE_COMPLETED, events[-1]
        assert any(e.HasField("artifact_update") for e in events), "the output artifact"
        print(f"ok: task {parked_id} went input-required on node {task['nodeId']}; an answer "
              f"breaking its contract was refused; the answer message completed it")

        # Cancel: a parked run cancels; an ended one cannot be.
        events = await stream(client, message([data_part(PARKED)]))
        cancelled = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=events[0].task.id))
        assert cancelled.status.state == a2a_pb2.TASK_STATE_CANCELED, cancelled
        try:
            await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task_id))
            raise AssertionError("an ended task was cancelled")
        except TaskNotCancelableError:
            pass
        try:
            await client.get_task(a2a_pb2.GetTaskRequest(id="run-of-nobody"))
            raise AssertionError("an unknown task was found")
        except TaskNotFoundError:
            pass

        # ListTasks: the tenant's runs as tasks, filtered by state.
        listed = await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=20))
        listed_ids = [task.id for task in listed.tasks]
        assert task_id in listed_ids and parked_id in listed_ids, listed_ids
        completed = await client.list_tasks(a2a_pb2.ListTasksRequest(
            page_size=20, status=a2a_pb2.TASK_STATE_COMPLETED))
        assert all(task.status.state == a2a_pb2.TASK_STATE_COMPLETED for task in completed.tasks)
        assert task_id in [task.id for task in completed.tasks], completed
        assert cancelled.id not in [task.id for task in completed.tasks]

        # A bad envelope is refused with the JSON path at fault.
        broken = dict(ENVELOPE)
        broken["objective"] = 42
        try:
            await stream(client, message([data_part(broken)]))
            raise AssertionError("a bad envelope was run")
        except InvalidParamsError as refused:
            assert "objective" in str(refused), refused
        print("ok: CancelTask cancels a parked task and refuses an ended one; an unknown task "
              f"is TaskNotFound; ListTasks lists {len(listed_ids)} tasks and filters by state; "
              "a bad envelope is InvalidParams naming $.objective")

    # Without the token: refused.
    async with httpx.AsyncClient(timeout=30) as anonymous:
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=anonymous)).create(card)
        try:
            await client.get_task(a2a_pb2.GetTaskRequest(id=task_id))
            raise AssertionError("a request without a token was served")
        except A2AClientError as refused:
            assert "401" in str(refused), refused
        print("ok: a request without a token is refused (401)")


asyncio.run(main())
