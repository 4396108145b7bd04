"""`BatonClient` (sync) and `AsyncBatonClient` (asyncio) over httpx: one
method per operation of `docs/openapi.json` (its `operationId` in
snake_case), answers parsed into the generated models, refusals raised as
`BatonApiError` with the JSON path, and event streams that resume with
`Last-Event-ID` after a dropped connection."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import httpx_sse

from . import models
from .errors import BatonApiError, BatonError, StreamGaveUp
from .operations import OPERATIONS

# A run whose stream ended in one of these has nothing more to stream now.
SETTLED = {"completed", "failed", "plan_rejected", "cancelled",
           "awaiting_human", "awaiting_hitl", "paused"}


@dataclass(frozen=True)
class Frame:
    """One event frame of a run's stream: its sequence (`None` for a child
    run's frame relayed in its parent's stream), type and JSON."""
    id: int | None
    event: str
    data: dict[str, Any]


def _body(value: Any) -> Any:
    """A model (by its JSON names) or plain JSON, as the request body."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def _query(**parameters: Any) -> dict[str, Any]:
    return {name: value for name, value in parameters.items() if value is not None}


def _refusal(response: httpx.Response, body: bytes) -> BatonApiError:
    try:
        error = json.loads(body)["error"]
        code, message, details = error["code"], error["message"], error.get("details")
    except (ValueError, KeyError, TypeError):
        code, message, details = "http_error", body.decode(errors="replace")[:500], None
    retry_after = response.headers.get("retry-after")
    return BatonApiError(response.status_code, code, message, details,
                         float(retry_after) if retry_after and retry_after.isdigit() else None)


def _parse(operation_id: str, response: httpx.Response) -> Any:
    if response.status_code >= 400:
        raise _refusal(response, response.content)
    answer = OPERATIONS[operation_id].answer
    if response.status_code == 204:
        return None
    payload = response.json()
    return answer.model_validate(payload) if answer is not None else payload


def status_text(status: Any) -> str:
    """A run status of the generated models (an enum, a literal or their
    root model) as its text: `completed`, `awaiting_hitl`, …"""
    value = getattr(status, "root", status)
    return str(getattr(value, "value", value))


def _frame(sse: httpx_sse.ServerSentEvent) -> Frame:
    return Frame(int(sse.id) if sse.id else None, sse.event, json.loads(sse.data) if sse.data else {})


class _Requests:
    """What both clients share: the base URL, headers and each operation's
    request."""

    def __init__(self, base_url: str, token: str | None, user: str | None):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        if user:
            self.headers["X-Baton-User"] = user

    def url(self, operation_id: str, **path: str) -> tuple[str, str]:
        operation = OPERATIONS[operation_id]
        return operation.method.upper(), self.base_url + operation.path.format(**path)


class BatonClient:
    """Baton's HTTP API, synchronously.

    `BatonClient("https://baton.example.com", token="…")`; `user` names the
    person runs are attributed to (`X-Baton-User`)."""

    def __init__(self, base_url: str, token: str | None = None, *, user: str | None = None,
                 timeout: float = 30.0, http: httpx.Client | None = None,
                 reconnect_delay: float = 0.5):
        self._requests = _Requests(base_url, token, user)
        self._http = http or httpx.Client(timeout=timeout)
        self._reconnect_delay = reconnect_delay

    def __enter__(self) -> BatonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, operation_id: str, *, path: dict[str, str] | None = None,
              params: dict[str, Any] | None = None, body: Any = None) -> Any:
        method, url = self._requests.url(operation_id, **(path or {}))
        response = self._http.request(method, url, headers=self._requests.headers,
                                      params=params, json=_body(body) if body is not None else None)
        return _parse(operation_id, response)

    # Runs
    def submit_run(self, envelope: models.TaskEnvelope | dict) -> models.RunAccepted:
        return self._call("submitRun", body=envelope)

    def list_runs(self, *, status: str | None = None, limit: int | None = None,
                  cursor: str | None = None, forked_from: str | None = None) -> models.RunListPage:
        return self._call("listRuns", params=_query(status=status, limit=limit, cursor=cursor,
                                                     forkedFrom=forked_from))

    def get_run(self, run_id: str) -> models.RunSnapshotResponse:
        return self._call("getRun", path={"run_id": run_id})

    def cancel_run(self, run_id: str) -> models.RunStatusAnswer:
        return self._call("cancelRun", path={"run_id": run_id})

    def get_run_history(self, run_id: str) -> models.RunHistory:
        return self._call("getRunHistory", path={"run_id": run_id})

    def fork_run(self, run_id: str, request: models.ForkRequest | dict) -> models.RunAccepted:
        return self._call("forkRun", path={"run_id": run_id}, body=request)

    def stream_run_events(self, run_id: str, *, last_event_id: int | None = None,
                          max_reconnects: int = 5) -> Iterator[Frame]:
        """The run's frames after `last_event_id`, replayed then followed until
        the run settles (ends or waits for a person). A dropped connection is
        resumed with `Last-Event-ID`: no frame twice, none lost."""
        method, url = self._requests.url("streamRunEvents", run_id=run_id)
        last = last_event_id
        failures = 0
        while True:
            headers = dict(self._requests.headers, Accept="text/event-stream")
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                with httpx_sse.connect_sse(self._http, method, url, headers=headers,
                                           timeout=httpx.Timeout(30.0, read=None)) as source:
                    if source.response.status_code >= 400:
                        raise _refusal(source.response, source.response.read())
                    for sse in source.iter_sse():
                        frame = _frame(sse)
                        if frame.id is not None:
                            last = frame.id
                            failures = 0
                        yield frame
                if status_text(self.get_run(run_id).run.status) in SETTLED:
                    return
            except (httpx.TransportError, httpx_sse.SSEError):
                pass
            failures += 1
            if failures > max_reconnects:
                raise StreamGaveUp(f"the stream of run {run_id} dropped {failures} times")
            time.sleep(self._reconnect_delay * failures)

    def run(self, envelope: models.TaskEnvelope | dict) -> Iterator[Frame]:
        """Submits the envelope and streams its frames (resumable)."""
        accepted = self.submit_run(envelope)
        yield from self.stream_run_events(accepted.run_id)

    # People
    def list_tasks(self, *, status: str | None = None,
                   capability_id: str | None = None) -> models.TaskList:
        return self._call("listTasks", params=_query(status=status, capabilityId=capability_id))

    def resume_run(self, request: models.ResumeRequest | dict) -> models.HumanActionApplied:
        return self._call("resumeRun", body=request)

    def resolve_request(self, request: models.ResolveRequest | dict) -> models.HumanActionApplied:
        return self._call("resolveRequest", body=request)

    def list_requests(self) -> models.RequestList:
        return self._call("listRequests")

    def decline_task(self, task_id: str,
                     request: models.DeclineRequest | dict) -> models.HumanActionApplied:
        return self._call("declineTask", path={"task_id": task_id}, body=request)

    def trigger_policy(self, run_id: str, policy_id: str) -> models.HumanActionApplied:
        return self._call("triggerPolicy", path={"run_id": run_id, "policy_id": policy_id})

    # Capabilities, threads, evaluations
    def list_capabilities(self, *, q: str | None = None,
                          limit: int | None = None) -> models.CapabilityList:
        """Every capability; with `q`, those a search finds, best first."""
        return self._call("listCapabilities", params=_query(q=q, limit=limit))

    def register_capability(self, registration: models.CapabilityRegistration | dict
                            ) -> models.CapabilityRegistered:
        return self._call("registerCapability", body=registration)

    def renew_capability(self, capability_id: str) -> models.CapabilitySummary:
        """A registered capability's heartbeat: seen now, active again."""
        return self._call("renewCapability", path={"capability_id": capability_id})

    def deregister_capability(self, capability_id: str) -> None:
        self._call("deregisterCapability", path={"capability_id": capability_id})

    def list_threads(self, *, limit: int | None = None,
                     cursor: str | None = None) -> models.ThreadListPage:
        return self._call("listThreads", params=_query(limit=limit, cursor=cursor))

    def get_thread(self, thread_id: str, *, limit: int | None = None,
                   before: str | None = None) -> models.ThreadView:
        """One page of the thread from its newest end; pass a page's
        `older_cursor` as `before` for the page before it."""
        return self._call("getThread", path={"thread_id": thread_id},
                          params=_query(limit=limit, before=before))

    # Memory across runs (a namespace is a list of strings)
    def put_memory_item(self, item: models.MemoryItemWrite | dict) -> models.MemoryItem:
        return self._call("putMemoryItem", body=item)

    def list_memory_items(self, prefix: list[str] | None = None, *,
                          limit: int | None = None) -> models.MemoryItemList:
        return self._call("listMemoryItems", params=_query(
            prefix=json.dumps(prefix) if prefix is not None else None, limit=limit))

    def get_memory_item(self, namespace: list[str], key: str) -> models.MemoryItem:
        return self._call("getMemoryItem", params={"namespace": json.dumps(namespace), "key": key})

    def delete_memory_item(self, namespace: list[str], key: str) -> None:
        self._call("deleteMemoryItem", params={"namespace": json.dumps(namespace), "key": key})

    def search_memory(self, namespaces: list[list[str]], query: str, *,
                      limit: int | None = None) -> models.MemorySearchAnswer:
        return self._call("searchMemory", body=_query(namespaces=namespaces, query=query,
                                                      limit=limit))

    def forget_memory(self, *, prefix: list[str] | None = None,
                      person: str | None = None) -> models.MemoryForgotten:
        return self._call("forgetMemory", body=_query(prefix=prefix, person=person))

    # Schedules
    def create_schedule(self, request: models.ScheduleRequest | dict) -> models.Schedule:
        return self._call("createSchedule", body=request)

    def list_schedules(self) -> models.ScheduleList:
        return self._call("listSchedules")

    # The audit trail (admin)
    def list_audit_records(self, *, limit: int | None = None,
                           cursor: str | None = None) -> models.AuditPage:
        return self._call("listAuditRecords", params=_query(limit=limit, cursor=cursor))

    # The developer sandbox (BATON_SANDBOX=on)
    def get_sandbox_metadata(self) -> models.SandboxMetadata:
        return self._call("getSandboxMetadata")

    def draft_envelope(self, messages: list[dict]) -> models.DraftTurn:
        """One turn of the envelope builder: the whole conversation so far
        (`{"role": "user" | "assistant", "content": …}` each)."""
        return self._call("draftEnvelope", body={"messages": messages})

    def create_dataset_evaluation(self, request: models.EvaluationRequest | dict) -> models.EvaluationRecord:
        """Run a dataset on the server (`baton serve`); answers at once, running."""
        return self._call("createDatasetEvaluation", body=request)

    def list_dataset_evaluations(self) -> models.EvaluationList:
        return self._call("listDatasetEvaluations")

    def get_dataset_evaluation(self, evaluation_id: str) -> models.EvaluationRecord:
        return self._call("getDatasetEvaluation", path={"evaluation_id": evaluation_id})

    def get_schedule(self, schedule_id: str) -> models.Schedule:
        return self._call("getSchedule", path={"schedule_id": schedule_id})

    def delete_schedule(self, schedule_id: str) -> None:
        self._call("deleteSchedule", path={"schedule_id": schedule_id})

    def pause_schedule(self, schedule_id: str) -> models.Schedule:
        return self._call("pauseSchedule", path={"schedule_id": schedule_id})

    def resume_schedule(self, schedule_id: str) -> models.Schedule:
        return self._call("resumeSchedule", path={"schedule_id": schedule_id})

    def get_evaluation(self, evaluation_id: str) -> dict:
        """The panel's output (`PanelOutput`), or `{"status": "pending"}`."""
        return self._call("getEvaluation", path={"evaluation_id": evaluation_id})

    def get_open_api_document(self) -> dict:
        return self._call("getOpenApiDocument")

    def _post_stream(self, operation_id: str, body: Any) -> Iterator[Frame]:
        method, url = self._requests.url(operation_id)
        headers = dict(self._requests.headers, Accept="text/event-stream")
        with httpx_sse.connect_sse(self._http, method, url, headers=headers, json=_body(body),
                                   timeout=httpx.Timeout(30.0, read=None)) as source:
            if source.response.status_code >= 400:
                raise _refusal(source.response, source.response.read())
            for sse in source.iter_sse():
                yield _frame(sse)

    def submit_run_and_stream(self, envelope: models.TaskEnvelope | dict) -> Iterator[Frame]:
        """`POST /run.stream`: submits and streams in one request; a dropped
        connection is resumed on the run's events route."""
        last: Frame | None = None
        try:
            for frame in self._post_stream("submitRunAndStream", envelope):
                if frame.id is not None:
                    last = frame
                yield frame
            return
        except (httpx.TransportError, httpx_sse.SSEError):
            if last is None:
                raise BatonError("the stream dropped before its first frame") from None
        yield from self.stream_run_events(last.data["runId"], last_event_id=last.id)

    def send_chat_message(self, request: models.ChatMessageRequest | dict) -> Iterator[Frame]:
        return self._post_stream("sendChatMessage", request)

    def create_evaluation(self, request: models.PanelRequest | dict) -> Iterator[Frame]:
        return self._post_stream("createEvaluation", request)


class AsyncBatonClient:
    """Baton's HTTP API for asyncio: the same methods as `BatonClient`,
    awaited (streams are async iterators)."""

    def __init__(self, base_url: str, token: str | None = None, *, user: str | None = None,
                 timeout: float = 30.0, http: httpx.AsyncClient | None = None,
                 reconnect_delay: float = 0.5):
        self._requests = _Requests(base_url, token, user)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._reconnect_delay = reconnect_delay

    async def __aenter__(self) -> AsyncBatonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, operation_id: str, *, path: dict[str, str] | None = None,
                    params: dict[str, Any] | None = None, body: Any = None) -> Any:
        method, url = self._requests.url(operation_id, **(path or {}))
        response = await self._http.request(method, url, headers=self._requests.headers,
                                            params=params,
                                            json=_body(body) if body is not None else None)
        return _parse(operation_id, response)

    async def submit_run(self, envelope: models.TaskEnvelope | dict) -> models.RunAccepted:
        return await self._call("submitRun", body=envelope)

    async def list_runs(self, *, status: str | None = None, limit: int | None = None,
                        cursor: str | None = None,
                        forked_from: str | None = None) -> models.RunListPage:
        return await self._call("listRuns", params=_query(status=status, limit=limit,
                                                           cursor=cursor, forkedFrom=forked_from))

    async def get_run(self, run_id: str) -> models.RunSnapshotResponse:
        return await self._call("getRun", path={"run_id": run_id})

    async def cancel_run(self, run_id: str) -> models.RunStatusAnswer:
        return await self._call("cancelRun", path={"run_id": run_id})

    async def get_run_history(self, run_id: str) -> models.RunHistory:
        return await self._call("getRunHistory", path={"run_id": run_id})

    async def fork_run(self, run_id: str, request: models.ForkRequest | dict) -> models.RunAccepted:
        return await self._call("forkRun", path={"run_id": run_id}, body=request)

    async def stream_run_events(self, run_id: str, *, last_event_id: int | None = None,
                                max_reconnects: int = 5) -> AsyncIterator[Frame]:
        """As `BatonClient.stream_run_events`."""
        method, url = self._requests.url("streamRunEvents", run_id=run_id)
        last = last_event_id
        failures = 0
        while True:
            headers = dict(self._requests.headers, Accept="text/event-stream")
            if last is not None:
                headers["Last-Event-ID"] = str(last)
            try:
                async with httpx_sse.aconnect_sse(self._http, method, url, headers=headers,
                                                  timeout=httpx.Timeout(30.0, read=None)) as source:
                    if source.response.status_code >= 400:
                        raise _refusal(source.response, await source.response.aread())
                    async for sse in source.aiter_sse():
                        frame = _frame(sse)
                        if frame.id is not None:
                            last = frame.id
                            failures = 0
                        yield frame
                if status_text((await self.get_run(run_id)).run.status) in SETTLED:
                    return
            except (httpx.TransportError, httpx_sse.SSEError):
                pass
            failures += 1
            if failures > max_reconnects:
                raise StreamGaveUp(f"the stream of run {run_id} dropped {failures} times")
            await asyncio.sleep(self._reconnect_delay * failures)

    async def run(self, envelope: models.TaskEnvelope | dict) -> AsyncIterator[Frame]:
        accepted = await self.submit_run(envelope)
        async for frame in self.stream_run_events(accepted.run_id):
            yield frame

    async def list_tasks(self, *, status: str | None = None,
                         capability_id: str | None = None) -> models.TaskList:
        return await self._call("listTasks",
                                params=_query(status=status, capabilityId=capability_id))

    async def resume_run(self, request: models.ResumeRequest | dict) -> models.HumanActionApplied:
        return await self._call("resumeRun", body=request)

    async def resolve_request(self, request: models.ResolveRequest | dict
                              ) -> models.HumanActionApplied:
        return await self._call("resolveRequest", body=request)

    async def list_requests(self) -> models.RequestList:
        return await self._call("listRequests")

    async def decline_task(self, task_id: str, request: models.DeclineRequest | dict
                           ) -> models.HumanActionApplied:
        return await self._call("declineTask", path={"task_id": task_id}, body=request)

    async def trigger_policy(self, run_id: str, policy_id: str) -> models.HumanActionApplied:
        return await self._call("triggerPolicy", path={"run_id": run_id, "policy_id": policy_id})

    async def list_capabilities(self, *, q: str | None = None,
                                limit: int | None = None) -> models.CapabilityList:
        """Every capability; with `q`, those a search finds, best first."""
        return await self._call("listCapabilities", params=_query(q=q, limit=limit))

    async def register_capability(self, registration: models.CapabilityRegistration | dict
                                  ) -> models.CapabilityRegistered:
        return await self._call("registerCapability", body=registration)

    async def renew_capability(self, capability_id: str) -> models.CapabilitySummary:
        """A registered capability's heartbeat: seen now, active again."""
        return await self._call("renewCapability", path={"capability_id": capability_id})

    async def deregister_capability(self, capability_id: str) -> None:
        await self._call("deregisterCapability", path={"capability_id": capability_id})

    async def list_threads(self, *, limit: int | None = None,
                           cursor: str | None = None) -> models.ThreadListPage:
        return await self._call("listThreads", params=_query(limit=limit, cursor=cursor))

    # Memory across runs (a namespace is a list of strings)
    async def put_memory_item(self, item: models.MemoryItemWrite | dict) -> models.MemoryItem:
        return await self._call("putMemoryItem", body=item)

    async def list_memory_items(self, prefix: list[str] | None = None, *,
                          limit: int | None = None) -> models.MemoryItemList:
        return await self._call("listMemoryItems", params=_query(
            prefix=json.dumps(prefix) if prefix is not None else None, limit=limit))

    async def get_memory_item(self, namespace: list[str], key: str) -> models.MemoryItem:
        return await self._call("getMemoryItem", params={"namespace": json.dumps(namespace), "key": key})

    async def delete_memory_item(self, namespace: list[str], key: str) -> None:
        await self._call("deleteMemoryItem", params={"namespace": json.dumps(namespace), "key": key})

    async def search_memory(self, namespaces: list[list[str]], query: str, *,
                      limit: int | None = None) -> models.MemorySearchAnswer:
        return await self._call("searchMemory", body=_query(namespaces=namespaces, query=query,
                                                      limit=limit))

    async def forget_memory(self, *, prefix: list[str] | None = None,
                      person: str | None = None) -> models.MemoryForgotten:
        return await self._call("forgetMemory", body=_query(prefix=prefix, person=person))

    # Schedules
    async def create_schedule(self, request: models.ScheduleRequest | dict) -> models.Schedule:
        return await self._call("createSchedule", body=request)

    async def list_schedules(self) -> models.ScheduleList:
        return await self._call("listSchedules")

    # The audit trail (admin)
    async def list_audit_records(self, *, limit: int | None = None,
                                 cursor: str | None = None) -> models.AuditPage:
        return await self._call("listAuditRecords", params=_query(limit=limit, cursor=cursor))

    # The developer sandbox (BATON_SANDBOX=on)
    async def get_sandbox_metadata(self) -> models.SandboxMetadata:
        return await self._call("getSandboxMetadata")

    async def draft_envelope(self, messages: list[dict]) -> models.DraftTurn:
        """One turn of the envelope builder: the whole conversation so far."""
        return await self._call("draftEnvelope", body={"messages": messages})

    async def create_dataset_evaluation(
        self, request: models.EvaluationRequest | dict
    ) -> models.EvaluationRecord:
        return await self._call("createDatasetEvaluation", body=request)

    async def list_dataset_evaluations(self) -> models.EvaluationList:
        return await self._call("listDatasetEvaluations")

    async def get_dataset_evaluation(self, evaluation_id: str) -> models.EvaluationRecord:
        return await self._call("getDatasetEvaluation", path={"evaluation_id": evaluation_id})

    async def get_schedule(self, schedule_id: str) -> models.Schedule:
        return await self._call("getSchedule", path={"schedule_id": schedule_id})

    async def delete_schedule(self, schedule_id: str) -> None:
        await self._call("deleteSchedule", path={"schedule_id": schedule_id})

    async def pause_schedule(self, schedule_id: str) -> models.Schedule:
        return await self._call("pauseSchedule", path={"schedule_id": schedule_id})

    async def resume_schedule(self, schedule_id: str) -> models.Schedule:
        return await self._call("resumeSchedule", path={"schedule_id": schedule_id})

    async def get_thread(self, thread_id: str, *, limit: int | None = None,
                         before: str | None = None) -> models.ThreadView:
        """One page of the thread from its newest end; pass a page's
        `older_cursor` as `before` for the page before it."""
        return await self._call("getThread", path={"thread_id": thread_id},
                                params=_query(limit=limit, before=before))

    async def get_evaluation(self, evaluation_id: str) -> dict:
        return await self._call("getEvaluation", path={"evaluation_id": evaluation_id})

    async def get_open_api_document(self) -> dict:
        return await self._call("getOpenApiDocument")

    async def _post_stream(self, operation_id: str, body: Any) -> AsyncIterator[Frame]:
        method, url = self._requests.url(operation_id)
        headers = dict(self._requests.headers, Accept="text/event-stream")
        async with httpx_sse.aconnect_sse(self._http, method, url, headers=headers,
                                          json=_body(body),
                                          timeout=httpx.Timeout(30.0, read=None)) as source:
            if source.response.status_code >= 400:
                raise _refusal(source.response, await source.response.aread())
            async for sse in source.aiter_sse():
                yield _frame(sse)

    async def submit_run_and_stream(self, envelope: models.TaskEnvelope | dict
                                    ) -> AsyncIterator[Frame]:
        last: Frame | None = None
        try:
            async for frame in self._post_stream("submitRunAndStream", envelope):
                if frame.id is not None:
                    last = frame
                yield frame
            return
        except (httpx.TransportError, httpx_sse.SSEError):
            if last is None:
                raise BatonError("the stream dropped before its first frame") from None
        async for frame in self.stream_run_events(last.data["runId"], last_event_id=last.id):
            yield frame

    def send_chat_message(self, request: models.ChatMessageRequest | dict
                          ) -> AsyncIterator[Frame]:
        return self._post_stream("sendChatMessage", request)

    def create_evaluation(self, request: models.PanelRequest | dict) -> AsyncIterator[Frame]:
        return self._post_stream("createEvaluation", request)
