// The run viewer: runs list, a run's plan graph live from its SSE stream,
// node details (input bundle, output, validation errors, tokens, cost,
// duration), the approval view, human task forms, judge transcripts, and
// chat threads (`chat.js`).
// Plain modules over the HTTP API; nothing is fetched from elsewhere.

import { ApiError, flex, followRun, getJson, postJson, refusedApi, setToken, token } from "./api.js";
import { drawPlan, modelName } from "./graph.js";
import { schemaForm, showErrors } from "./form.js";
import { transcriptIn, transcriptView } from "./transcript.js";
import { loadThreads, openThread } from "./chat.js";
import { make, millis, pretty } from "./dom.js";
import { forkForm, forkTree } from "./forks.js";
import { timelineView } from "./timeline.js";
import { createSchedule, loadSchedules } from "./schedules.js";
import { loadMemory, searchMemory } from "./memory.js";
import { showSandbox } from "./sandbox.js";
import { loadEvaluations, showEvaluation, startEvaluation } from "./evaluations.js";

const $ = (selector) => document.querySelector(selector);

const badge = (status) => make("span", { class: `badge ${status}`, "data-status": status }, status);
const money = (cost) => (cost == null ? "—" : `$${cost.toFixed(6)}`);
const tokens = (usage) => (usage ? `${usage.total ?? usage.totalTokens} (${usage.prompt ?? usage.promptTokens} in, ${usage.completion ?? usage.completionTokens} out)` : "—");

function figure(name, value) { return make("div", {}, make("b", {}, name), value); }

function errorText(error) {
  return error instanceof ApiError ? `${error.status} ${error.code || ""}: ${error.message}` : String(error);
}

// ---- runs list ------------------------------------------------------------

let nextCursor = null;

async function loadRuns(more = false) {
  const list = $("#runs");
  const status = $("#status-filter").value;
  const query = new URLSearchParams({ limit: "20" });
  if (status) query.set("status", status);
  if (more && nextCursor) query.set("cursor", nextCursor);
  try {
    const page = await getJson(`${flex}/runs?${query}`);
    if (!more) list.replaceChildren();
    for (const run of page.runs) {
      const item = make("li", { "data-run-id": run.runId },
        badge(run.status), " ", make("code", {}, run.runId),
        run.forkedFromRunId ? make("span", { class: "hint fork-mark", title: `forked from ${run.forkedFromRunId}` }, " fork") : null,
        make("span", { class: "objective" }, run.objective));
      item.addEventListener("click", () => { location.hash = `#run/${run.runId}`; });
      list.append(item);
    }
    nextCursor = page.nextCursor || null;
    $("#more-runs").hidden = !nextCursor;
  } catch (error) {
    list.replaceChildren(make("li", { class: "error" }, errorText(error)));
  }
}

async function loadTasks() {
  const list = $("#tasks");
  try {
    const { tasks } = await getJson(`${flex}/tasks`);
    list.replaceChildren(...tasks.map((task) => {
      const item = make("li", { "data-task-id": task.taskId }, make("code", {}, task.taskId),
        make("span", { class: "objective" }, task.capabilityId));
      item.addEventListener("click", () => { location.hash = `#task/${task.taskId}`; });
      return item;
    }));
    if (!tasks.length) list.append(make("li", { class: "hint" }, "nothing waits for a person"));
  } catch (error) {
    list.replaceChildren(make("li", { class: "error" }, errorText(error)));
  }
}

async function startRun() {
  $("#start-error").textContent = "";
  let envelope;
  try {
    envelope = JSON.parse($("#envelope").value);
  } catch (error) {
    $("#start-error").textContent = `not JSON: ${error.message}`;
    return;
  }
  try {
    const created = await postJson(`${flex}/runs`, envelope);
    location.hash = `#run/${created.runId}`;
    loadRuns();
  } catch (error) {
    const path = error.details && error.details.path ? ` (${error.details.path})` : "";
    $("#start-error").textContent = `${errorText(error)}${path}`;
  }
}

// ---- one run --------------------------------------------------------------

let current = null;

function newRunView(runId) {
  return {
    runId, frames: [], lastId: 0, plans: new Map(), statuses: {}, nodes: new Map(),
    selectedNode: null, selectedVersion: null, snapshot: null, runMetrics: null,
    abort: new AbortController(), following: false, error: null,
    // Transcript verdicts by topic: a redraw shows the verdict already given.
    verdicts: new Map(),
  };
}

function nodeInfo(view, nodeId) {
  if (!view.nodes.has(nodeId)) view.nodes.set(nodeId, { validation: [], errors: [], complete: null, start: null, metrics: null, skipped: null });
  return view.nodes.get(nodeId);
}

/** Folds one frame into the view's state. */
function apply(view, frame) {
  // A child run's frames relayed in its parent's stream (an agent's plan):
  // they belong to the child's own view.
  if (frame.runId && frame.runId !== view.runId) return;
  view.frames.push(frame);
  if (frame.id) view.lastId = frame.id;
  const payload = frame.payload || {};
  switch (frame.type) {
    case "plan_generated":
    case "plan_updated": {
      const version = payload.planVersion ?? frame.planVersion;
      if (payload.nodes) view.plans.set(version, { nodes: payload.nodes, edges: payload.edges || [] });
      for (const node of payload.nodes || []) {
        if (!view.statuses[node.nodeId]) view.statuses[node.nodeId] = "pending";
      }
      view.selectedVersion = version;
      break;
    }
    case "node_start":
      nodeInfo(view, frame.nodeId).start = frame;
      view.statuses[frame.nodeId] = payload.executorType === "human" ? "awaiting_human" : "running";
      break;
    case "node_complete":
      nodeInfo(view, frame.nodeId).complete = payload;
      view.statuses[frame.nodeId] = "completed";
      break;
    case "node_error":
      nodeInfo(view, frame.nodeId).errors.push(frame.message || payload.code);
      view.statuses[frame.nodeId] = "failed";
      break;
    case "node_skipped":
      nodeInfo(view, frame.nodeId).skipped = { message: frame.message, ...payload };
      view.statuses[frame.nodeId] = "skipped";
      break;
    case "validation_error":
      if (frame.nodeId) nodeInfo(view, frame.nodeId).validation.push(payload);
      break;
    case "metrics":
      if (frame.nodeId) nodeInfo(view, frame.nodeId).metrics = payload;
      else view.runMetrics = payload;
      break;
    case "hitl_request":
      view.hitl = payload;
      break;
    default:
      break;
  }
}

/** The plan drawn for the selected version: the snapshot's full nodes when it is the latest. */
function planFor(view) {
  const latest = view.snapshot && view.snapshot.latestSnapshot;
  if (latest && (view.selectedVersion == null || latest.version === view.selectedVersion)) {
    return { nodes: latest.nodes, edges: latest.edges, version: latest.version };
  }
  const plan = view.plans.get(view.selectedVersion);
  return plan ? { ...plan, version: view.selectedVersion } : null;
}

function inputBundle(view, node) {
  const bundle = {};
  const envelopeInputs = (view.snapshot && view.snapshot.run.envelope.inputs) || {};
  const plan = planFor(view);
  for (const facet of node.inputFacets || []) {
    const edge = plan.edges.find((candidate) => candidate.to === node.nodeId && candidate.facet === facet);
    const upstream = edge && view.snapshot.nodes[edge.from];
    if (upstream && upstream.output) bundle[facet] = upstream.output[facet];
    else if (facet in envelopeInputs) bundle[facet] = envelopeInputs[facet];
  }
  return bundle;
}

function nodeDetails(view, node) {
  const info = nodeInfo(view, node.nodeId);
  const ledger = (view.snapshot && view.snapshot.nodes[node.nodeId]) || {};
  const complete = info.complete || {};
  const status = view.statuses[node.nodeId] || ledger.status || "pending";
  const usage = complete.usage || (ledger.usage && ledger.usage.totalTokens ? ledger.usage : null);
  const cost = complete.costUsd ?? (ledger.usage ? ledger.usage.costUsd : null);
  const panel = make("section", { class: "panel node-details", "data-node-id": node.nodeId },
    make("h3", {}, `${node.label} `, badge(status)),
    make("p", { class: "hint" }, `${node.nodeId} · ${node.capabilityId} · ${node.agentType}${node.kind ? ` · ${node.kind}` : ""}`),
    make("div", { class: "figures" },
      // The catalog model the plan chose for the node, and the model that answered.
      figure("Chosen model", make("span", { class: "catalog-model" },
        node.model ? [modelName(node.model), node.model.provider].filter(Boolean).join(" · ") : "deployment default")),
      figure("Model", make("span", { class: "model" }, complete.model || ledger.model || "—")),
      figure("Tokens", make("span", { class: "tokens" }, tokens(usage))),
      figure("Cost", make("span", { class: "cost" }, money(cost))),
      figure("Duration", make("span", { class: "duration" }, millis(complete.durationMs ?? (info.metrics && info.metrics.durationMs)))),
      figure("Attempt", String(complete.attempt ?? ledger.currentAttempt ?? "—"))));
  // A person's answer names who gave it (the signed-in user).
  const answeredBy = complete.answeredBy || ledger.answeredBy;
  if (answeredBy) {
    panel.querySelector(".figures").append(figure("Answered by", make("span", { class: "answered-by" }, answeredBy)));
  }
  if (node.guard) panel.append(make("h4", {}, "Runs only if"), make("div", { class: "guard" }, pretty(node.guard)));
  if (info.skipped) {
    panel.append(make("h4", {}, "Skipped"), make("p", { class: "skipped" }, info.skipped.message || info.skipped.reason));
    if (info.skipped.read) panel.append(make("div", { class: "guard-read" }, pretty(info.skipped.read)));
  }
  if (node.inputFacets) panel.append(make("h4", {}, "Input bundle"), make("div", { class: "input-bundle" }, pretty(inputBundle(view, node))));
  const output = complete.output || ledger.output;
  if (output) panel.append(make("h4", {}, "Output"), make("div", { class: "output" }, pretty(output)));
  if (info.validation.length) {
    const list = make("ul", { class: "validation-errors" });
    for (const entry of info.validation) {
      const errors = Array.isArray(entry.errors) ? entry.errors : [entry.errors];
      for (const error of errors) {
        list.append(make("li", {}, `attempt ${entry.attempt ?? "?"}: ${error.instancePointer || error.path || ""} ${error.message || JSON.stringify(error)}`));
      }
    }
    panel.append(make("h4", {}, "Validation errors"), list);
  }
  for (const message of info.errors) panel.append(make("p", { class: "error" }, message));
  const transcript = transcriptIn(output);
  if (transcript) panel.append(transcriptView(transcript, view.verdicts));
  // The form is kept across redraws (what the person typed stays).
  const fork = make("button", { type: "button", class: "fork-from-here" }, "Fork from here");
  fork.addEventListener("click", () => {
    view.forking = { nodeId: node.nodeId, form: forkForm(view, node, output, (runId) => { location.hash = `#run/${runId}`; }) };
    render(view);
  });
  if (view.snapshot) panel.append(make("p", {}, fork));
  if (view.forking && view.forking.nodeId === node.nodeId) panel.append(view.forking.form);
  return panel;
}

function approvalView(view) {
  const request = view.snapshot && view.snapshot.run.pendingRequest;
  if (!request || request.kind !== "approval") return null;
  // The stored request keeps its contract summary; the frame's is the
  // fallback for a request stored before requests kept one.
  const summary = request.contractSummary
    || (view.hitl && view.hitl.requestId === request.requestId ? view.hitl.contractSummary : null);
  const note = make("input", { type: "text", class: "note", placeholder: "note (optional)" });
  const state = make("p", { class: "error", role: "alert" });
  const decide = (decision) => async () => {
    try {
      await postJson(`${flex}/hitl/resolve`, { runId: view.runId, requestId: request.requestId, decision, note: note.value || undefined });
      follow(view);
    } catch (error) {
      state.textContent = errorText(error);
    }
  };
  const approve = make("button", { type: "button", class: "approve" }, "Approve");
  const reject = make("button", { type: "button", class: "reject" }, "Reject");
  approve.addEventListener("click", decide("approve"));
  reject.addEventListener("click", decide("reject"));
  return make("section", { class: "panel approval", role: "dialog", "aria-label": "approval request" },
    make("h3", {}, "Approval requested"),
    make("p", { class: "operator-prompt" }, request.operatorPrompt),
    request.pendingNodeId ? make("p", {}, "Pending node: ", make("code", {}, request.pendingNodeId)) : null,
    summary ? make("div", { class: "contract-summary" },
      make("p", {}, `${summary.capabilityId}: ${summary.inputFacets.join(", ")} → ${summary.outputFacets.join(", ")}`),
      summary.output !== undefined ? make("details", { class: "pending-output", open: "" }, make("summary", {}, "Output to approve"), pretty(summary.output)) : null,
      make("details", {}, make("summary", {}, "Output schema"), pretty(summary.outputSchema))) : null,
    make("p", {}, note, " ", approve, " ", reject), state);
}

/** The run's `maxCostUsd` and `maxDurationSeconds`, as spend against budget. */
function budgetOf(snapshot) {
  const constraints = (snapshot && snapshot.run.envelope.constraints) || {};
  const parts = [];
  if (constraints.maxCostUsd != null) parts.push(`of ${money(constraints.maxCostUsd)} budget`);
  if (constraints.maxDurationSeconds != null) parts.push(`within ${constraints.maxDurationSeconds} s`);
  return parts.length ? make("span", { class: "run-budget hint" }, ` ${parts.join(", ")}`) : "";
}

function render(view) {
  if (current !== view) return;
  const container = $("#view");
  const snapshot = view.snapshot;
  const status = snapshot ? snapshot.run.status : "loading";
  const usage = snapshot ? snapshot.run.usage : null;
  const header = make("div", {},
    make("h2", {}, "Run ", make("code", {}, view.runId), " ", badge(status)),
    snapshot ? make("p", { class: "hint" }, snapshot.run.envelope.objective) : null,
    make("div", { class: "figures run-figures" },
      figure("Tokens", make("span", { class: "run-tokens" }, usage ? tokens(usage) : "—")),
      figure("Cost", make("span", {}, make("span", { class: "run-cost" }, money(usage ? usage.costUsd : null)), budgetOf(snapshot))),
      figure("Wall time", make("span", {}, millis(view.runMetrics && view.runMetrics.durationMs))),
      figure("Stream", make("span", { class: "stream-state" }, view.following ? "live" : "ended"))));
  if (snapshot && snapshot.run.failure) header.append(make("p", { class: "error run-failure" }, `${snapshot.run.failure.code}: ${snapshot.run.failure.message}`));
  const parts = [header];
  const versions = [...new Set([...view.plans.keys(), ...(snapshot ? snapshot.planVersions.map((plan) => plan.version) : [])])].sort((a, b) => a - b);
  if (versions.length > 1) {
    const select = make("select", { class: "plan-version" }, ...versions.map((version) => make("option", { value: String(version) }, `plan v${version}`)));
    select.value = String(view.selectedVersion);
    select.addEventListener("change", () => { view.selectedVersion = Number(select.value); render(view); });
    parts.push(make("label", {}, "Plan version ", select));
  }
  const plan = planFor(view);
  if (plan && snapshot) {
    const contract = snapshot.run.envelope.outputContract || {};
    const goals = Object.keys((contract.schema && contract.schema.properties) || {});
    parts.push(drawPlan(plan, {
      supplied: Object.keys(snapshot.run.envelope.inputs || {}), goals,
      statuses: view.statuses, selected: view.selectedNode,
      onSelect: (nodeId) => { view.selectedNode = nodeId; render(view); },
    }));
  }
  const approval = approvalView(view);
  if (approval) parts.push(approval);
  if (plan && view.selectedNode) {
    const node = plan.nodes.find((candidate) => candidate.nodeId === view.selectedNode);
    if (node) parts.push(nodeDetails(view, node));
  }
  if (view.forkTree) parts.push(view.forkTree);
  if (snapshot && snapshot.output) parts.push(make("section", { class: "panel run-output" }, make("h3", {}, "Validated output"), pretty(snapshot.output)));
  if (view.error) parts.push(make("p", { class: "error" }, view.error));
  // The timeline, kept open across redraws once opened.
  const timeline = make("details", { class: "timeline-details", open: view.timelineOpen ? "" : null },
    make("summary", {}, "Timeline"),
    timelineView(view.frames, view.runId, {
      correlationId: snapshot && snapshot.run.correlationId,
      traceId: snapshot && snapshot.run.traceId,
    }));
  timeline.addEventListener("toggle", () => { view.timelineOpen = timeline.open; });
  parts.push(timeline);
  parts.push(make("details", {}, make("summary", {}, `${view.frames.length} frames`),
    make("ol", { class: "frames" }, ...view.frames.map((frame) => make("li", { "data-type": frame.type }, `${frame.type}${frame.nodeId ? ` ${frame.nodeId}` : ""}${frame.message ? ` — ${frame.message}` : ""}`)))));
  container.replaceChildren(...parts);
}

async function refreshSnapshot(view) {
  try {
    view.snapshot = await getJson(`${flex}/runs/${encodeURIComponent(view.runId)}`);
    for (const [nodeId, entry] of Object.entries(view.snapshot.nodes)) {
      if (!view.statuses[nodeId] || entry.status !== "pending") view.statuses[nodeId] = entry.status;
    }
  } catch (error) {
    view.error = errorText(error);
  }
}

/** Loads the fork tree around the run (null when it has no fork relation). */
async function showForkTree(view) {
  if (!view.snapshot) return;
  try {
    view.forkTree = await forkTree(view.snapshot);
  } catch (error) {
    view.forkTree = make("p", { class: "error" }, `fork tree: ${errorText(error)}`);
  }
}

/** Follows the run's stream from the last frame seen, redrawing as frames arrive. */
async function follow(view) {
  view.following = true;
  await refreshSnapshot(view);
  await showForkTree(view);
  render(view);
  let pending = null;
  const soon = () => {
    if (pending) return;
    pending = setTimeout(async () => { pending = null; await refreshSnapshot(view); render(view); }, 150);
  };
  try {
    await followRun(view.runId, view.lastId, (frame) => {
      apply(view, frame);
      // Model text arrives in many small frames; the page shows no text, so
      // they only count (the next other frame redraws).
      if (frame.type !== "delta") render(view);
      if (["node_complete", "node_error", "complete", "error", "hitl_request", "plan_generated", "plan_updated"].includes(frame.type)) soon();
    }, view.abort.signal);
  } catch (error) {
    if (error.name !== "AbortError") view.error = errorText(error);
  }
  // A redraw still due from the last frames would replace what the person
  // does next on the page (a verdict, a selection): the final one below covers it.
  if (pending) clearTimeout(pending);
  pending = null;
  view.following = false;
  await refreshSnapshot(view);
  render(view);
  if (current === view) loadRuns();
}

/** Stops whatever the view shows (a run's stream, a thread's streams). */
function leaveView() {
  if (current && current.abort) current.abort.abort();
  if (openChat) openChat.close();
  if (openEvaluation) openEvaluation.close();
  if (openSandbox) openSandbox.close();
  openChat = null;
  openEvaluation = null;
  openSandbox = null;
  current = null;
}

let openEvaluation = null;
let openSandbox = null;

let openChat = null;

function openRun(runId) {
  leaveView();
  current = newRunView(runId);
  follow(current);
}

// ---- one human task -------------------------------------------------------

async function openTask(taskId) {
  leaveView();
  const container = $("#view");
  container.replaceChildren(make("p", { class: "hint" }, "loading the task…"));
  let task;
  try {
    const { tasks } = await getJson(`${flex}/tasks`);
    task = tasks.find((candidate) => candidate.taskId === taskId);
  } catch (error) {
    container.replaceChildren(make("p", { class: "error" }, errorText(error)));
    return;
  }
  if (!task) {
    container.replaceChildren(make("p", { class: "error" }, `task ${taskId} does not wait any more`));
    return;
  }
  const form = schemaForm(task.outputSchema, task.widgets);
  const state = make("p", { class: "error form-error", role: "alert" });
  const submit = make("button", { type: "submit", class: "submit-task" }, "Submit");
  const element = make("form", { class: "task-form", novalidate: "" }, form.element, submit, state);
  element.addEventListener("submit", async (event) => {
    event.preventDefault();
    state.textContent = "";
    try {
      await postJson(`${flex}/run.resume`, { runId: task.runId, nodeId: task.nodeId, expectedPlanVersion: task.planVersion, output: form.read() });
      location.hash = `#run/${task.runId}`;
      loadTasks();
    } catch (error) {
      state.textContent = errorText(error);
      if (error.details && Array.isArray(error.details.errors)) showErrors(element, error.details.errors);
    }
  });
  container.replaceChildren(
    make("h2", {}, "Task ", make("code", {}, task.taskId)),
    make("p", {}, make("a", { href: `#run/${task.runId}` }, "its run"), ` · ${task.capabilityId} · plan v${task.planVersion}${task.dueAt ? ` · due ${task.dueAt}` : ""}`),
    make("p", { class: "instructions" }, task.instructions || ""),
    task.escalatedFrom ? make("div", { class: "task-escalation" },
      make("h3", {}, "You take over a step that failed"),
      make("p", {}, `${task.escalatedFrom.capabilityId} (node ${task.escalatedFrom.nodeId}): ${task.escalatedFrom.failure}`)) : "",
    task.feedback && task.feedback.length ? make("div", { class: "task-feedback" },
      make("h3", {}, "Revise: feedback on your last answer"),
      make("ul", {}, ...task.feedback.map((item) => make("li", {},
        make("strong", {}, item.author || "reviewer"), ` on ${item.facet || item.nodeId || "the output"}: ${item.message || ""}`)))) : "",
    task.inputs ? make("details", { open: "" }, make("summary", {}, "Inputs"), pretty(task.inputs)) : "",
    element);
}

// ---- wiring ---------------------------------------------------------------

function route() {
  const [kind, id] = location.hash.replace(/^#/, "").split("/");
  if (kind === "run" && id) openRun(decodeURIComponent(id));
  else if (kind === "task" && id) openTask(decodeURIComponent(id));
  else if (kind === "thread" && id && !(openChat && openChat.threadId === decodeURIComponent(id))) showThread(decodeURIComponent(id));
  else if (kind === "chat") showThread(null);
  else if (kind === "sandbox") {
    leaveView();
    openSandbox = showSandbox($("#view"), { onUse: (text) => { $("#envelope").value = text; $("#envelope").focus(); } });
  }
  else if (kind === "evaluation" && id) {
    leaveView();
    openEvaluation = showEvaluation($("#view"), decodeURIComponent(id));
  }
}

function showThread(threadId) {
  leaveView();
  const chat = { threadId, close: () => {} };
  openChat = chat;
  chat.close = openThread($("#view"), threadId, {
    // The first message made the thread: its address, without reopening it.
    onCreated: (created) => {
      chat.threadId = created;
      history.replaceState(null, "", `#thread/${encodeURIComponent(created)}`);
    },
    onAnswered: () => loadThreads(),
  }).close;
}

function start() {
  if (refusedApi) {
    const notice = $("#api-refused");
    notice.textContent = `This page ignored ?api=${refusedApi}: it is not an API origin the operator allows here (BATON_VIEWER_API_ORIGINS), so it talks to its own server, and no token goes there.`;
    notice.hidden = false;
  }
  $("#token").value = token();
  $("#token-state").textContent = token() ? "token set" : "";
  $("#token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("#token").value);
    $("#token-state").textContent = "token set";
    loadRuns();
    loadTasks();
    loadThreads();
    loadSchedules();
    loadEvaluations();
    loadMemory();
    route();
  });
  $("#refresh-runs").addEventListener("click", () => loadRuns());
  $("#status-filter").addEventListener("change", () => loadRuns());
  $("#more-runs").addEventListener("click", () => loadRuns(true));
  $("#refresh-tasks").addEventListener("click", loadTasks);
  $("#new-chat").addEventListener("click", () => { location.hash = "#chat"; showThread(null); });
  $("#refresh-threads").addEventListener("click", () => loadThreads());
  $("#more-threads").addEventListener("click", () => loadThreads(true));
  $("#start-run").addEventListener("click", startRun);
  $("#open-sandbox").addEventListener("click", () => {
    if (location.hash === "#sandbox") route();
    else location.hash = "#sandbox";
  });
  $("#refresh-schedules").addEventListener("click", loadSchedules);
  $("#create-schedule").addEventListener("click", createSchedule);
  $("#refresh-evaluations").addEventListener("click", loadEvaluations);
  $("#list-memory").addEventListener("click", loadMemory);
  $("#search-memory").addEventListener("click", searchMemory);
  $("#start-evaluation").addEventListener("click", startEvaluation);
  window.addEventListener("hashchange", route);
  // The token form shows only when the server refuses a request (a server
  // started without BATON_API_TOKENS asks for none), or a token is kept.
  if (token()) $("#token-form").hidden = false;
  window.addEventListener("baton:unauthorized", () => {
    const form = $("#token-form");
    if (form.hidden) {
      form.hidden = false;
      $("#token").focus();
    }
    $("#token-state").textContent = token() ? "token refused" : "this server asks for a token";
  });
  loadRuns();
  loadTasks();
  loadThreads();
  loadSchedules();
  loadEvaluations();
  loadMemory();
  route();
}

start();
