"""Every operation of Baton's HTTP API the client calls: its `operationId`
(from `docs/openapi.json`), verb, path and the model of its JSON answer.
`tests/test_document.py` checks this table against the document, so the
client cannot drift from the server."""

from dataclasses import dataclass

from . import models


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    # The model of the 2xx JSON answer; None for a stream.
    answer: type | None


OPERATIONS: dict[str, Operation] = {
    operation.operation_id: operation
    for operation in [
        Operation("submitRun", "post", "/api/v1/flex/runs", models.RunAccepted),
        Operation("listRuns", "get", "/api/v1/flex/runs", models.RunListPage),
        Operation("submitRunAndStream", "post", "/api/v1/flex/run.stream", None),
        Operation("getRun", "get", "/api/v1/flex/runs/{run_id}", models.RunSnapshotResponse),
        Operation("streamRunEvents", "get", "/api/v1/flex/runs/{run_id}/events", None),
        Operation("cancelRun", "post", "/api/v1/flex/runs/{run_id}/cancel", models.RunStatusAnswer),
        Operation("getRunHistory", "get", "/api/v1/flex/runs/{run_id}/history", models.RunHistory),
        Operation("forkRun", "post", "/api/v1/flex/runs/{run_id}/fork", models.RunAccepted),
        Operation("listCapabilities", "get", "/api/v1/flex/capabilities", models.CapabilityList),
        Operation("registerCapability", "post", "/api/v1/flex/capabilities/register",
                  models.CapabilityRegistered),
        Operation("renewCapability", "patch", "/api/v1/flex/capabilities/{capability_id}",
                  models.CapabilitySummary),
        Operation("deregisterCapability", "delete", "/api/v1/flex/capabilities/{capability_id}",
                  None),
        Operation("resumeRun", "post", "/api/v1/flex/run.resume", models.HumanActionApplied),
        Operation("resolveRequest", "post", "/api/v1/flex/hitl/resolve", models.HumanActionApplied),
        Operation("triggerPolicy", "post",
                  "/api/v1/flex/runs/{run_id}/policies/{policy_id}/trigger",
                  models.HumanActionApplied),
        Operation("listTasks", "get", "/api/v1/flex/tasks", models.TaskList),
        Operation("listRequests", "get", "/api/v1/flex/hitl/requests", models.RequestList),
        Operation("declineTask", "post", "/api/v1/flex/tasks/{task_id}/decline",
                  models.HumanActionApplied),
        Operation("createSchedule", "post", "/api/v1/flex/schedules", models.Schedule),
        Operation("listSchedules", "get", "/api/v1/flex/schedules", models.ScheduleList),
        Operation("listAuditRecords", "get", "/api/v1/flex/audit", models.AuditPage),
        Operation("getSandboxMetadata", "get", "/api/v1/flex/sandbox/metadata",
                  models.SandboxMetadata),
        Operation("draftEnvelope", "post", "/api/v1/flex/sandbox/drafts", models.DraftTurn),
        Operation("getSchedule", "get", "/api/v1/flex/schedules/{schedule_id}", models.Schedule),
        Operation("deleteSchedule", "delete", "/api/v1/flex/schedules/{schedule_id}", None),
        Operation("pauseSchedule", "post", "/api/v1/flex/schedules/{schedule_id}/pause",
                  models.Schedule),
        Operation("resumeSchedule", "post", "/api/v1/flex/schedules/{schedule_id}/resume",
                  models.Schedule),
        Operation("createDatasetEvaluation", "post", "/api/v1/flex/evaluations",
                  models.EvaluationRecord),
        Operation("listDatasetEvaluations", "get", "/api/v1/flex/evaluations",
                  models.EvaluationList),
        Operation("getDatasetEvaluation", "get", "/api/v1/flex/evaluations/{evaluation_id}",
                  models.EvaluationRecord),
        Operation("createEvaluation", "post", "/api/v1/judge/evaluations", None),
        Operation("getEvaluation", "get", "/api/v1/judge/evaluations/{evaluation_id}", None),
        Operation("sendChatMessage", "post", "/api/v1/chat", None),
        Operation("listThreads", "get", "/api/v1/threads", models.ThreadListPage),
        Operation("getThread", "get", "/api/v1/threads/{thread_id}", models.ThreadView),
        Operation("getOpenApiDocument", "get", "/api/v1/flex/openapi.json", None),
        Operation("putMemoryItem", "put", "/api/v1/flex/memory/items", models.MemoryItem),
        Operation("listMemoryItems", "get", "/api/v1/flex/memory/items", models.MemoryItemList),
        Operation("getMemoryItem", "get", "/api/v1/flex/memory/item", models.MemoryItem),
        Operation("deleteMemoryItem", "delete", "/api/v1/flex/memory/item", None),
        Operation("searchMemory", "post", "/api/v1/flex/memory/search",
                  models.MemorySearchAnswer),
        Operation("forgetMemory", "post", "/api/v1/flex/memory/forget", models.MemoryForgotten),
    ]
}

# The viewer's pages are HTML for browsers, not API calls.
NOT_CALLED = {"getViewer", "getViewerPage", "getViewerFile"}
