// Chat threads: the threads list, and a thread view where messages stream
// as they arrive, each answer's tool calls and results folded under it, a
// drafted plan drawn with Approve / Revise, a child plan's run one click
// away, and the multitask strategy chosen per message.
//
// A thread is read from `GET /api/v1/threads/{id}` (its exchanges and who
// answers now); each answered exchange's run is then replayed from its
// event stream to show its tool calls and drafts; a run still answering or
// queued is followed live. A message is `POST /api/v1/chat`, whose answer
// is the run's SSE stream.

import { ApiError, followRun, getJson, sendChat, v1, flex } from "./api.js";
import { make, millis, pretty } from "./dom.js";
import { drawPlan } from "./graph.js";

const STRATEGIES = [
  ["enqueue", "enqueue: answer after the running message"],
  ["reject", "reject: refuse while a message is answering"],
  ["interrupt", "interrupt: stop the running answer, keep what it said"],
  ["rollback", "rollback: stop the running answer and drop it"],
];

function errorText(error) {
  return error instanceof ApiError ? `${error.status} ${error.code || ""}: ${error.message}` : String(error);
}

const when = (millisSinceEpoch) => new Date(millisSinceEpoch).toLocaleString();

// ---- threads list ---------------------------------------------------------

let nextThreadCursor = null;

/** Fills `#threads` with the tenant's threads, the most recently answered first. */
export async function loadThreads(more = false) {
  const list = document.querySelector("#threads");
  const query = new URLSearchParams({ limit: "20" });
  if (more && nextThreadCursor) query.set("cursor", nextThreadCursor);
  try {
    const page = await getJson(`${v1}/threads?${query}`);
    if (!more) list.replaceChildren();
    for (const thread of page.threads) {
      const item = make("li", { "data-thread-id": thread.threadId },
        make("span", { class: "objective thread-title" }, thread.firstMessage || "(a blank message)"),
        make("span", { class: "hint" }, thread.lastMessage && thread.lastMessage !== thread.firstMessage
          ? `${when(thread.lastAtMillis)} · ${thread.lastMessage}` : when(thread.lastAtMillis)));
      item.addEventListener("click", () => { location.hash = `#thread/${thread.threadId}`; });
      list.append(item);
    }
    if (!more && !page.threads.length) list.append(make("li", { class: "hint" }, "no chat yet"));
    nextThreadCursor = page.nextCursor || null;
    document.querySelector("#more-threads").hidden = !nextThreadCursor;
  } catch (error) {
    list.replaceChildren(make("li", { class: "error" }, errorText(error)));
  }
}

// ---- a drafted plan -------------------------------------------------------

/** A draft's plan (`{nodes[{consumes, produces}], goalFacets}`) as the graph draws plans. */
function draftGraph(plan) {
  const nodes = (plan.nodes || []).map((node) => ({
    nodeId: node.nodeId, capabilityId: node.capabilityId, label: node.label,
    inputFacets: node.consumes || [], outputFacets: node.produces || [],
  }));
  const edges = [];
  for (const consumer of nodes) {
    for (const facet of consumer.inputFacets) {
      for (const producer of nodes) {
        if (producer !== consumer && producer.outputFacets.includes(facet)) edges.push({ from: producer.nodeId, to: consumer.nodeId, facet });
      }
    }
  }
  const produced = new Set(nodes.flatMap((node) => node.outputFacets));
  const supplied = [...new Set(nodes.flatMap((node) => node.inputFacets))].filter((facet) => !produced.has(facet));
  return { plan: { nodes, edges }, supplied, goals: plan.goalFacets || [] };
}

function draftPanel(payload, say) {
  const { plan, supplied, goals } = draftGraph(payload.plan || {});
  const revision = make("input", { type: "text", class: "revision", placeholder: "what should change?" });
  const approve = make("button", { type: "button", class: "approve-draft" }, "Approve and run");
  const revise = make("button", { type: "button", class: "revise-draft" }, "Ask for changes");
  const quoted = `"${payload.objective}" (draft ${payload.draftId})`;
  approve.addEventListener("click", () => say(`Approved: run the drafted plan ${quoted}.`));
  revise.addEventListener("click", () => {
    if (!revision.value.trim()) { revision.focus(); return; }
    say(`Revise the drafted plan ${quoted}: ${revision.value.trim()}`);
  });
  return make("section", { class: "panel plan-draft", "data-draft-id": payload.draftId },
    make("h4", {}, "Plan drafted for your approval"),
    make("p", {}, payload.objective),
    drawPlan(plan, { supplied, goals, statuses: {}, selected: null, onSelect: () => {} }),
    payload.reasoning ? make("p", { class: "hint" }, payload.reasoning) : null,
    make("p", {}, approve, " ", revision, " ", revise));
}

// ---- one exchange ---------------------------------------------------------

/**
 * One message and its answer. `apply(frame)` folds a frame of the answering
 * run into it; frames of a child run relayed in the stream are counted under
 * the child's link.
 */
function exchangeView(userText, say) {
  const text = make("div", { class: "answer-text" });
  const activity = make("div", { class: "activity" });
  const state = make("span", { class: "agent-state hint" });
  const meta = make("p", { class: "exchange-meta hint" });
  const assistant = make("div", { class: "bubble assistant" }, activity, text, state, meta);
  const element = make("li", { class: "exchange" },
    make("div", { class: "bubble user" }, userText || make("em", {}, "(a blank message)")), assistant);
  const calls = new Map();
  const children = new Map();
  let streamed = "";
  const exchange = {
    element,
    runId: null,
    setRun(runId) {
      exchange.runId = runId;
      element.dataset.runId = runId;
      meta.replaceChildren(make("a", { href: `#run/${runId}`, class: "run-link" }, "its run"));
    },
    setText(value) { text.textContent = value; },
    fail(message) { assistant.append(make("p", { class: "error exchange-error", role: "alert" }, message)); },
    markInterrupted() { element.classList.add("interrupted"); meta.prepend(make("span", { class: "interrupted-mark" }, "cut short by a newer message · ")); },
    apply(frame, { replay = false } = {}) {
      if (exchange.runId && frame.runId !== exchange.runId) {
        const child = children.get(frame.runId);
        if (child) child.textContent = `${frame.type}${frame.nodeId ? ` ${frame.nodeId}` : ""}`;
        return;
      }
      const payload = frame.payload || {};
      switch (frame.type) {
        case "agent_state":
          element.dataset.state = payload.state;
          state.textContent = payload.state === "waiting_on_user" ? "" : `${payload.state.replace(/_/g, " ")}…`;
          if (payload.state === "executing_plan" && payload.childRunId && !children.has(payload.childRunId)) {
            const progress = make("span", { class: "hint child-progress" });
            children.set(payload.childRunId, progress);
            activity.append(make("p", { class: "child-run" },
              make("a", { href: `#run/${payload.childRunId}`, class: "child-run-link" }, "its plan's run"), " ", progress));
          }
          break;
        case "delta":
          if (replay) break;
          streamed += frame.message || "";
          text.textContent = streamed;
          break;
        case "warning":
          if (payload.code === "stream_restarted" || payload.code === "model_fallback") streamed = "";
          if (payload.code === "context_trimmed") activity.append(make("p", { class: "hint trimmed" }, frame.message || "older messages were left out"));
          break;
        case "tool_call": {
          const result = make("div", { class: "tool-result" }, make("span", { class: "hint" }, "running…"));
          const summary = make("summary", {}, make("code", {}, payload.toolName), " ", make("span", { class: "tool-duration hint" }));
          const folded = make("details", { class: "tool-call", "data-tool": payload.toolName, "data-call-id": payload.callId },
            summary, make("h5", {}, "Arguments"), pretty(payload.args), make("h5", {}, "Result"), result);
          calls.set(payload.callId, folded);
          activity.append(folded);
          break;
        }
        case "tool_result": {
          const folded = calls.get(payload.callId);
          if (!folded) break;
          folded.querySelector(".tool-result").replaceChildren(payload.error != null
            ? make("p", { class: "error" }, String(payload.error)) : pretty(payload.result));
          folded.querySelector(".tool-duration").textContent = payload.durationMs != null ? millis(payload.durationMs) : "refused";
          folded.dataset.outcome = payload.error != null ? "error" : "ok";
          break;
        }
        case "plan_ready_for_review":
          activity.append(draftPanel(payload, say));
          break;
        case "plan_review":
          activity.append(make("p", { class: "plan-review" }, make("b", {}, `Reviewer: ${payload.verdict}`), ` ${payload.notes}`));
          break;
        case "message":
          if (frame.message) text.textContent = frame.message;
          break;
        case "log":
          if (frame.message) activity.append(make("p", { class: "hint" }, frame.message));
          break;
        case "complete": {
          const output = payload.output || {};
          if (typeof output.message === "string") text.textContent = output.message;
          element.dataset.state = "answered";
          state.textContent = "";
          break;
        }
        case "error":
          element.dataset.state = "ended";
          state.textContent = "";
          exchange.fail(frame.message || (payload.code ? String(payload.code) : "the run failed"));
          break;
        default:
          break;
      }
    },
  };
  return exchange;
}

// ---- a thread -------------------------------------------------------------

/**
 * Shows thread `threadId` (null: a new one) in `container`. `onCreated`
 * is told the id of a thread the first message creates, `onAnswered` that a
 * message was answered (its exchange is recorded). Returns `close()`, which
 * stops every stream it follows.
 */
export function openThread(container, threadId, { onCreated, onAnswered = () => {} }) {
  const abort = new AbortController();
  let thread = threadId;
  const messages = make("ol", { class: "messages" });
  const title = make("code", { class: "thread-id" }, thread || "new");
  const status = make("span", { class: "thread-status hint", role: "status" });
  const input = make("textarea", { id: "chat-message", rows: "3", placeholder: "Write a message…" });
  const inputs = make("textarea", { class: "chat-inputs", rows: "3", spellcheck: "false", placeholder: '{"facetName": value}' });
  const strategy = make("select", { class: "strategy", title: "what happens when a message arrives while another is answering" },
    ...STRATEGIES.map(([value, label]) => make("option", { value }, label)));
  const send = make("button", { type: "submit", class: "send" }, "Send");
  const composerError = make("p", { class: "error composer-error", role: "alert" });
  const composer = make("form", { class: "composer" }, input,
    make("details", {}, make("summary", {}, "Inputs (facet values, JSON)"), inputs),
    make("p", {}, make("label", {}, "If busy ", strategy), " ", send), composerError);

  const follow = async (exchange, runId) => {
    try {
      await followRun(runId, 0, (frame) => exchange.apply(frame), abort.signal);
    } catch (error) {
      if (error.name !== "AbortError") exchange.fail(errorText(error));
    }
  };

  const say = async (text) => {
    composerError.textContent = "";
    let extra = {};
    if (inputs.value.trim()) {
      try {
        extra = { inputs: JSON.parse(inputs.value) };
      } catch (error) {
        composerError.textContent = `the inputs are not JSON: ${error.message}`;
        return;
      }
    }
    const exchange = exchangeView(text, say);
    messages.append(exchange.element);
    exchange.element.scrollIntoView({ block: "end" });
    const body = { message: text, multitaskStrategy: strategy.value, ...extra };
    if (thread) body.threadId = thread;
    let sent;
    try {
      sent = await sendChat(body, abort.signal);
    } catch (error) {
      if (error.name === "AbortError") return;
      exchange.element.dataset.state = "refused";
      exchange.fail(errorText(error));
      return;
    }
    if (sent.runId) exchange.setRun(sent.runId);
    if (!thread && sent.threadId) {
      thread = sent.threadId;
      title.textContent = thread;
      status.textContent = "";
      onCreated(thread);
    }
    try {
      await sent.frames((frame) => {
        exchange.apply(frame);
        if (frame.type === "complete" && frame.payload && frame.payload.output && !thread) {
          thread = frame.payload.output.threadId;
          title.textContent = thread;
          onCreated(thread);
        }
      });
    } catch (error) {
      if (error.name !== "AbortError") exchange.fail(errorText(error));
      return;
    }
    // The exchange is recorded with its run's end: the threads list has it now.
    onAnswered(thread);
  };

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = input.value;
    input.value = "";
    say(text);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) composer.requestSubmit();
  });

  container.replaceChildren(
    make("h2", {}, "Chat ", title, " ", status),
    messages, composer);

  const load = async () => {
    if (!thread) {
      status.textContent = "a new thread starts with your first message";
      return;
    }
    let view;
    try {
      view = await getJson(`${v1}/threads/${encodeURIComponent(thread)}`);
    } catch (error) {
      status.textContent = errorText(error);
      return;
    }
    const answered = view.exchanges.map((recorded) => {
      const exchange = exchangeView(recorded.user, say);
      exchange.setRun(recorded.runId);
      exchange.setText(recorded.assistant);
      if (recorded.interrupted) exchange.markInterrupted();
      messages.append(exchange.element);
      return exchange;
    });
    const live = [view.activeRunId, ...view.queuedRunIds].filter(Boolean);
    status.textContent = live.length ? `${live.length} message(s) being answered` : "";
    for (const runId of live) {
      const snapshot = await getJson(`${flex}/runs/${encodeURIComponent(runId)}`).catch(() => null);
      const exchange = exchangeView(snapshot ? snapshot.run.envelope.objective : "", say);
      exchange.setRun(runId);
      messages.append(exchange.element);
      follow(exchange, runId);
    }
    // Each answered message's tool calls and drafts, from its run's frames.
    for (const exchange of answered) {
      try {
        await followRun(exchange.runId, 0, (frame) => exchange.apply(frame, { replay: true }), abort.signal);
      } catch (error) {
        if (error.name === "AbortError") return;
      }
    }
  };
  load();
  return { close: () => abort.abort() };
}
