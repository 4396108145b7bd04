/**
 * A typed client for Baton's HTTP API on `fetch`: one method per operation
 * of `docs/openapi.json` (named by its `operationId`), request and answer
 * types generated from that document (`openapi.ts`, by openapi-typescript),
 * refusals thrown as `BatonApiError` with the JSON path at fault, and event
 * streams that resume with `Last-Event-ID` after a dropped connection.
 */

import { createParser, type EventSourceMessage } from "eventsource-parser";

import type { components } from "./openapi.js";

export type { components, operations, paths } from "./openapi.js";
export type Schemas = components["schemas"];
export type TaskEnvelope = Schemas["TaskEnvelope"];
export type RunAccepted = Schemas["RunAccepted"];
export type RunSnapshotResponse = Schemas["RunSnapshotResponse"];
export type RunListPage = Schemas["RunListPage"];
export type RunStatusAnswer = Schemas["RunStatusAnswer"];
export type HumanActionApplied = Schemas["HumanActionApplied"];

/** Every operation the client calls: operationId → [verb, path]. Checked
 * against `docs/openapi.json` by `test/document.test.mjs`. */
export const OPERATIONS = {
  submitRun: ["post", "/api/v1/flex/runs"],
  listRuns: ["get", "/api/v1/flex/runs"],
  submitRunAndStream: ["post", "/api/v1/flex/run.stream"],
  getRun: ["get", "/api/v1/flex/runs/{run_id}"],
  streamRunEvents: ["get", "/api/v1/flex/runs/{run_id}/events"],
  cancelRun: ["post", "/api/v1/flex/runs/{run_id}/cancel"],
  getRunHistory: ["get", "/api/v1/flex/runs/{run_id}/history"],
  forkRun: ["post", "/api/v1/flex/runs/{run_id}/fork"],
  listCapabilities: ["get", "/api/v1/flex/capabilities"],
  registerCapability: ["post", "/api/v1/flex/capabilities/register"],
  renewCapability: ["patch", "/api/v1/flex/capabilities/{capability_id}"],
  deregisterCapability: ["delete", "/api/v1/flex/capabilities/{capability_id}"],
  resumeRun: ["post", "/api/v1/flex/run.resume"],
  resolveRequest: ["post", "/api/v1/flex/hitl/resolve"],
  triggerPolicy: ["post", "/api/v1/flex/runs/{run_id}/policies/{policy_id}/trigger"],
  listTasks: ["get", "/api/v1/flex/tasks"],
  listRequests: ["get", "/api/v1/flex/hitl/requests"],
  declineTask: ["post", "/api/v1/flex/tasks/{task_id}/decline"],
  createDatasetEvaluation: ["post", "/api/v1/flex/evaluations"],
  listDatasetEvaluations: ["get", "/api/v1/flex/evaluations"],
  getDatasetEvaluation: ["get", "/api/v1/flex/evaluations/{evaluation_id}"],
  createSchedule: ["post", "/api/v1/flex/schedules"],
  listSchedules: ["get", "/api/v1/flex/schedules"],
  listAuditRecords: ["get", "/api/v1/flex/audit"],
  getSandboxMetadata: ["get", "/api/v1/flex/sandbox/metadata"],
  draftEnvelope: ["post", "/api/v1/flex/sandbox/drafts"],
  getSchedule: ["get", "/api/v1/flex/schedules/{schedule_id}"],
  deleteSchedule: ["delete", "/api/v1/flex/schedules/{schedule_id}"],
  pauseSchedule: ["post", "/api/v1/flex/schedules/{schedule_id}/pause"],
  resumeSchedule: ["post", "/api/v1/flex/schedules/{schedule_id}/resume"],
  createEvaluation: ["post", "/api/v1/judge/evaluations"],
  getEvaluation: ["get", "/api/v1/judge/evaluations/{evaluation_id}"],
  sendChatMessage: ["post", "/api/v1/chat"],
  listThreads: ["get", "/api/v1/threads"],
  getThread: ["get", "/api/v1/threads/{thread_id}"],
  getOpenApiDocument: ["get", "/api/v1/flex/openapi.json"],
  putMemoryItem: ["put", "/api/v1/flex/memory/items"],
  listMemoryItems: ["get", "/api/v1/flex/memory/items"],
  getMemoryItem: ["get", "/api/v1/flex/memory/item"],
  deleteMemoryItem: ["delete", "/api/v1/flex/memory/item"],
  searchMemory: ["post", "/api/v1/flex/memory/search"],
  forgetMemory: ["post", "/api/v1/flex/memory/forget"],
} as const;

/** The viewer's pages are HTML for browsers, not API calls. */
export const NOT_CALLED = ["getViewer", "getViewerPage", "getViewerFile"] as const;

type OperationId = keyof typeof OPERATIONS;

/** A run status that has nothing more to stream now. */
const SETTLED = new Set([
  "completed", "failed", "plan_rejected", "cancelled", "awaiting_human", "awaiting_hitl", "paused",
]);

/** One event frame: its sequence (`null` for a child run's frame relayed in
 * its parent's stream), type and JSON. */
export interface Frame {
  id: number | null;
  event: string;
  data: Record<string, unknown>;
}

/** Anything the client could not do. */
export class BatonError extends Error {}

/** The API refused a request (`{"error": {"code", "message", "details"?}}`). */
export class BatonApiError extends BatonError {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly details: Record<string, unknown>,
    readonly retryAfterSeconds: number | null,
  ) {
    super(`${status} ${code}: ${detail}`);
  }

  /** The JSON path of what is wrong (`$.objective`), when the API named
   * one; the first of `details.errors[]` otherwise. */
  get path(): string | null {
    if (typeof this.details.path === "string") return this.details.path;
    const errors = this.details.errors;
    if (Array.isArray(errors) && errors.length > 0 && typeof errors[0]?.path === "string") {
      return errors[0].path;
    }
    return null;
  }

  /** Whether the same request may succeed later. */
  get retryable(): boolean {
    return [408, 425, 429, 502, 503, 504].includes(this.status);
  }
}

/** A run's event stream kept dropping. */
export class StreamGaveUp extends BatonError {}

export interface ClientOptions {
  /** A bearer token of the API (`BATON_API_TOKENS`). */
  token?: string;
  /** The person runs are attributed to (`X-Baton-User`). */
  user?: string;
  /** Another `fetch` (a test's, a proxy's). */
  fetch?: typeof fetch;
  /** The first reconnection's delay; each later one grows by it. */
  reconnectDelayMs?: number;
}

async function refusal(response: Response): Promise<BatonApiError> {
  const text = await response.text();
  const retryAfter = Number(response.headers.get("retry-after"));
  try {
    const { error } = JSON.parse(text);
    return new BatonApiError(response.status, error.code, error.message, error.details ?? {},
      Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null);
  } catch {
    return new BatonApiError(response.status, "http_error", text.slice(0, 500), {}, null);
  }
}

function query(parameters: Record<string, string | number | undefined>): string {
  const present = Object.entries(parameters).filter(([, value]) => value !== undefined);
  return present.length === 0
    ? ""
    : "?" + new URLSearchParams(present.map(([name, value]) => [name, String(value)])).toString();
}

/** A stream dropped by the network (not a refusal, not the caller's abort). */
function isDrop(error: unknown): boolean {
  return !(error instanceof BatonError) && !(error instanceof DOMException && error.name === "AbortError");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class BatonClient {
  private readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly fetcher: typeof fetch;
  private readonly reconnectDelayMs: number;

  /** `new BatonClient("https://baton.example.com", {token: "…"})` */
  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.headers = { Accept: "application/json" };
    if (options.token) this.headers.Authorization = `Bearer ${options.token}`;
    if (options.user) this.headers["X-Baton-User"] = options.user;
    this.fetcher = options.fetch ?? fetch;
    this.reconnectDelayMs = options.reconnectDelayMs ?? 500;
  }

  private url(operationId: OperationId, path: Record<string, string> = {}, search = ""): string {
    const template = OPERATIONS[operationId][1] as string;
    return this.baseUrl + template.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(path[name])) + search;
  }

  private async call<T>(operationId: OperationId, options: {
    path?: Record<string, string>; search?: string; body?: unknown;
  } = {}): Promise<T> {
    const [method] = OPERATIONS[operationId];
    const headers: Record<string, string> = { ...this.headers };
    if (options.body !== undefined) headers["Content-Type"] = "application/json";
    const response = await this.fetcher(this.url(operationId, options.path, options.search), {
      method: method.toUpperCase(),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    if (!response.ok) throw await refusal(response);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  // Runs
  submitRun(envelope: TaskEnvelope): Promise<RunAccepted> {
    return this.call("submitRun", { body: envelope });
  }

  listRuns(parameters: { status?: string; limit?: number; cursor?: string; forkedFrom?: string } = {}): Promise<RunListPage> {
    return this.call("listRuns", { search: query(parameters) });
  }

  getRun(runId: string): Promise<RunSnapshotResponse> {
    return this.call("getRun", { path: { run_id: runId } });
  }

  cancelRun(runId: string): Promise<RunStatusAnswer> {
    return this.call("cancelRun", { path: { run_id: runId } });
  }

  getRunHistory(runId: string): Promise<Schemas["RunHistory"]> {
    return this.call("getRunHistory", { path: { run_id: runId } });
  }

  forkRun(runId: string, request: Schemas["ForkRequest"]): Promise<RunAccepted> {
    return this.call("forkRun", { path: { run_id: runId }, body: request });
  }

  /** The run's frames after `lastEventId`, replayed then followed until the
   * run settles (ends or waits for a person). A dropped connection is
   * resumed with `Last-Event-ID`: no frame twice, none lost. */
  async *streamRunEvents(runId: string, options: { lastEventId?: number; maxReconnects?: number; signal?: AbortSignal } = {}): AsyncGenerator<Frame> {
    let last = options.lastEventId ?? null;
    let failures = 0;
    const maxReconnects = options.maxReconnects ?? 5;
    for (;;) {
      const headers: Record<string, string> = { ...this.headers, Accept: "text/event-stream" };
      if (last !== null) headers["Last-Event-ID"] = String(last);
      try {
        for await (const frame of this.sse(this.url("streamRunEvents", { run_id: runId }), { method: "GET", headers, signal: options.signal })) {
          if (frame.id !== null) {
            last = frame.id;
            failures = 0;
          }
          yield frame;
        }
        const snapshot = await this.getRun(runId);
        if (SETTLED.has(String(snapshot.run.status))) return;
      } catch (error) {
        if (!isDrop(error)) throw error;
      }
      failures += 1;
      if (failures > maxReconnects) throw new StreamGaveUp(`the stream of run ${runId} dropped ${failures} times`);
      await sleep(this.reconnectDelayMs * failures);
    }
  }

  /** Submits the envelope and streams its frames (resumable). */
  async *run(envelope: TaskEnvelope): AsyncGenerator<Frame> {
    const accepted = await this.submitRun(envelope);
    yield* this.streamRunEvents(accepted.runId);
  }

  /** `POST /run.stream`: submits and streams in one request; a dropped
   * connection is resumed on the run's events route. */
  async *submitRunAndStream(envelope: TaskEnvelope): AsyncGenerator<Frame> {
    let last: Frame | null = null;
    try {
      for await (const frame of this.postStream("submitRunAndStream", envelope)) {
        if (frame.id !== null) last = frame;
        yield frame;
      }
      return;
    } catch (error) {
      if (!isDrop(error)) throw error;
      if (last === null) throw new BatonError("the stream dropped before its first frame");
    }
    yield* this.streamRunEvents(String(last.data.runId), { lastEventId: last.id ?? undefined });
  }

  // People
  listTasks(parameters: { status?: string; capabilityId?: string } = {}): Promise<Schemas["TaskList"]> {
    return this.call("listTasks", { search: query(parameters) });
  }

  resumeRun(request: Schemas["ResumeRequest"]): Promise<HumanActionApplied> {
    return this.call("resumeRun", { body: request });
  }

  resolveRequest(request: Schemas["ResolveRequest"]): Promise<HumanActionApplied> {
    return this.call("resolveRequest", { body: request });
  }

  listRequests(): Promise<Schemas["RequestList"]> {
    return this.call("listRequests");
  }

  declineTask(taskId: string, request: Schemas["DeclineRequest"]): Promise<HumanActionApplied> {
    return this.call("declineTask", { path: { task_id: taskId }, body: request });
  }

  triggerPolicy(runId: string, policyId: string): Promise<HumanActionApplied> {
    return this.call("triggerPolicy", { path: { run_id: runId, policy_id: policyId } });
  }

  // Capabilities, threads, evaluations
  /** Every capability; with `q`, those a search finds, best first. */
  listCapabilities(parameters: { q?: string; limit?: number } = {}): Promise<Schemas["CapabilityList"]> {
    return this.call("listCapabilities", { search: query(parameters) });
  }

  registerCapability(registration: Schemas["CapabilityRegistration"]): Promise<Schemas["CapabilityRegistered"]> {
    return this.call("registerCapability", { body: registration });
  }

  /** A registered capability's heartbeat: seen now, active again. */
  renewCapability(capabilityId: string): Promise<Schemas["CapabilitySummary"]> {
    return this.call("renewCapability", { path: { capability_id: capabilityId } });
  }

  deregisterCapability(capabilityId: string): Promise<void> {
    return this.call("deregisterCapability", { path: { capability_id: capabilityId } });
  }

  listThreads(parameters: { limit?: number; cursor?: string } = {}): Promise<Schemas["ThreadListPage"]> {
    return this.call("listThreads", { search: query(parameters) });
  }

  /** One page of the thread from its newest end; pass a page's `olderCursor` as `before` for the page before it. */
  getThread(
    threadId: string,
    parameters: { limit?: number; before?: string } = {},
  ): Promise<Schemas["ThreadView"]> {
    return this.call("getThread", { path: { thread_id: threadId }, search: query(parameters) });
  }

  // Schedules
  createSchedule(request: Schemas["ScheduleRequest"]): Promise<Schemas["Schedule"]> {
    return this.call("createSchedule", { body: request });
  }

  listSchedules(): Promise<Schemas["ScheduleList"]> {
    return this.call("listSchedules");
  }

  // The audit trail (admin)
  listAuditRecords(parameters: { limit?: number; cursor?: string } = {}): Promise<Schemas["AuditPage"]> {
    return this.call("listAuditRecords", { search: query(parameters) });
  }

  // The developer sandbox (BATON_SANDBOX=on)
  getSandboxMetadata(): Promise<Schemas["SandboxMetadata"]> {
    return this.call("getSandboxMetadata");
  }

  /** One turn of the envelope builder: the whole conversation so far. */
  draftEnvelope(messages: Schemas["DraftMessage"][]): Promise<Schemas["DraftTurn"]> {
    return this.call("draftEnvelope", { body: { messages } });
  }

  // Memory across runs (a namespace is an array of strings)
  putMemoryItem(item: Schemas["MemoryItemWrite"]): Promise<Schemas["MemoryItem"]> {
    return this.call("putMemoryItem", { body: item });
  }

  listMemoryItems(prefix: string[] = [], parameters: { limit?: number } = {}): Promise<Schemas["MemoryItemList"]> {
    return this.call("listMemoryItems", { search: query({ prefix: JSON.stringify(prefix), ...parameters }) });
  }

  getMemoryItem(namespace: string[], key: string): Promise<Schemas["MemoryItem"]> {
    return this.call("getMemoryItem", { search: query({ namespace: JSON.stringify(namespace), key }) });
  }

  deleteMemoryItem(namespace: string[], key: string): Promise<void> {
    return this.call("deleteMemoryItem", { search: query({ namespace: JSON.stringify(namespace), key }) });
  }

  searchMemory(request: Schemas["MemorySearchRequest"]): Promise<Schemas["MemorySearchAnswer"]> {
    return this.call("searchMemory", { body: request });
  }

  forgetMemory(request: Schemas["MemoryForgetRequest"]): Promise<Schemas["MemoryForgotten"]> {
    return this.call("forgetMemory", { body: request });
  }

  getSchedule(scheduleId: string): Promise<Schemas["Schedule"]> {
    return this.call("getSchedule", { path: { schedule_id: scheduleId } });
  }

  deleteSchedule(scheduleId: string): Promise<void> {
    return this.call("deleteSchedule", { path: { schedule_id: scheduleId } });
  }

  pauseSchedule(scheduleId: string): Promise<Schemas["Schedule"]> {
    return this.call("pauseSchedule", { path: { schedule_id: scheduleId } });
  }

  resumeSchedule(scheduleId: string): Promise<Schemas["Schedule"]> {
    return this.call("resumeSchedule", { path: { schedule_id: scheduleId } });
  }

  // Dataset evaluations (run by `baton serve`)
  createDatasetEvaluation(request: Schemas["EvaluationRequest"]): Promise<Schemas["EvaluationRecord"]> {
    return this.call("createDatasetEvaluation", { body: request });
  }

  listDatasetEvaluations(): Promise<Schemas["EvaluationList"]> {
    return this.call("listDatasetEvaluations");
  }

  getDatasetEvaluation(evaluationId: string): Promise<Schemas["EvaluationRecord"]> {
    return this.call("getDatasetEvaluation", { path: { evaluation_id: evaluationId } });
  }

  /** The panel's output, or `{status: "pending"}` while it runs. */
  getEvaluation(evaluationId: string): Promise<Schemas["PanelOutput"] | Schemas["EvaluationPending"]> {
    return this.call("getEvaluation", { path: { evaluation_id: evaluationId } });
  }

  getOpenApiDocument(): Promise<Schemas["OpenApiDocument"]> {
    return this.call("getOpenApiDocument");
  }

  sendChatMessage(request: Schemas["ChatMessageRequest"]): AsyncGenerator<Frame> {
    return this.postStream("sendChatMessage", request);
  }

  createEvaluation(request: Schemas["PanelRequest"]): AsyncGenerator<Frame> {
    return this.postStream("createEvaluation", request);
  }

  private postStream(operationId: OperationId, body: unknown): AsyncGenerator<Frame> {
    return this.sse(this.url(operationId), {
      method: "POST",
      headers: { ...this.headers, Accept: "text/event-stream", "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  /** One SSE response's frames; a refusal throws `BatonApiError`. */
  private async *sse(url: string, init: RequestInit): AsyncGenerator<Frame> {
    const response = await this.fetcher(url, init);
    if (!response.ok) throw await refusal(response);
    if (!response.body) return;
    const ready: Frame[] = [];
    const parser = createParser({
      onEvent(message: EventSourceMessage) {
        ready.push({
          id: message.id ? Number(message.id) : null,
          event: message.event ?? "message",
          data: message.data ? JSON.parse(message.data) : {},
        });
      },
    });
    const decoder = new TextDecoder();
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(decoder.decode(value, { stream: true }));
        while (ready.length > 0) yield ready.shift() as Frame;
      }
    } finally {
      reader.releaseLock();
    }
  }
}
