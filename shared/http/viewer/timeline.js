// A run's timeline: its planning, nodes, model turns, tool calls and waits
// for people as a waterfall, read from the frames' timestamps (no trace
// backend needed). Each bar starts where its first frame was written and
// ends at its last; something still going runs to the newest frame.

import { make, millis } from "./dom.js";

const at = (frame) => Date.parse(frame.timestamp);

/** The spans of `frames` (one run's, in order): `{lane, label, kind, start, end, open}`. */
export function spansOf(frames, runId) {
  const own = frames.filter((frame) => !frame.runId || frame.runId === runId);
  if (!own.length) return [];
  const spans = [];
  const open = new Map();
  const begin = (key, span) => { open.set(key, span); spans.push(span); };
  const finish = (key, frame, extra = {}) => {
    const span = open.get(key);
    if (!span) return;
    span.end = at(frame);
    span.open = false;
    Object.assign(span, extra);
    open.delete(key);
  };
  for (const frame of own) {
    const payload = frame.payload || {};
    const node = frame.nodeId;
    switch (frame.type) {
      case "start":
        begin("run", { lane: "run", label: "run", kind: "run", start: at(frame), end: at(frame), open: true });
        break;
      case "plan_requested":
        if (!open.has("plan")) begin("plan", { lane: "planning", label: `plan (${payload.planner || "planner"})`, kind: "plan", start: at(frame), end: at(frame), open: true });
        break;
      case "plan_generated":
      case "plan_updated":
      case "plan_rejected":
        if (frame.type !== "plan_rejected" || !payload.willRetry) finish("plan", frame);
        break;
      case "node_start": {
        const waiting = payload.executorType === "human";
        begin(`node:${node}`, {
          lane: node, label: `${node}${payload.attempt > 1 ? ` (attempt ${payload.attempt})` : ""}`,
          kind: waiting ? "wait" : "node", start: at(frame), end: at(frame), open: true,
        });
        break;
      }
      case "node_complete":
      case "node_error":
        finish(`node:${node}`, frame, { failed: frame.type === "node_error" });
        finish(`turn:${node}`, frame);
        break;
      case "agent_state":
        if (payload.state === "thinking") {
          finish(`turn:${node}`, frame);
          begin(`turn:${node}`, { lane: node, label: `model turn ${payload.turn ?? ""}`.trim(), kind: "model", start: at(frame), end: at(frame), open: true });
        } else {
          finish(`turn:${node}`, frame);
        }
        break;
      case "message":
        finish(`turn:${node}`, frame);
        break;
      case "tool_call":
        finish(`turn:${node}`, frame);
        begin(`tool:${node}:${payload.callId}`, { lane: node, label: `tool ${payload.toolName}`, kind: "tool", start: at(frame), end: at(frame), open: true });
        break;
      case "tool_result":
        finish(`tool:${node}:${payload.callId}`, frame, { failed: payload.error != null });
        break;
      case "hitl_request":
        begin("hitl", { lane: "people", label: "approval", kind: "wait", start: at(frame), end: at(frame), open: true });
        break;
      case "hitl_resolved":
        finish("hitl", frame);
        break;
      case "complete":
      case "error":
        for (const key of [...open.keys()]) finish(key, frame);
        break;
      default:
        break;
    }
  }
  // What is still going runs to the newest frame.
  const last = at(own[own.length - 1]);
  for (const span of open.values()) span.end = last;
  return spans;
}

/** The timeline of `frames` as a panel: one row per span, bars on a shared scale. */
export function timelineView(frames, runId, { correlationId, traceId } = {}) {
  const spans = spansOf(frames, runId);
  const panel = make("section", { class: "panel timeline" }, make("h3", {}, "Timeline"));
  // The run's ids, each copyable: the trace id finds the run's spans in a
  // trace backend (README, "Traces"), the correlation id its log lines.
  for (const [label, value, className] of [
    ["Trace id", traceId, "trace-id"],
    ["Correlation id", correlationId, "correlation-id"],
  ]) {
    if (!value) continue;
    const copy = make("button", { type: "button", class: "copy-id", "data-copies": className }, "Copy");
    copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(value));
    panel.append(make("p", { class: "hint" }, `${label} `, make("code", { class: className }, value), " ", copy));
  }
  if (!spans.length) {
    panel.append(make("p", { class: "hint" }, "no frames yet"));
    return panel;
  }
  const start = Math.min(...spans.map((span) => span.start));
  const end = Math.max(...spans.map((span) => span.end));
  const total = Math.max(end - start, 1);
  const rows = make("ol", { class: "timeline-rows" });
  for (const span of spans) {
    const left = ((span.start - start) / total) * 100;
    const width = Math.max(((span.end - span.start) / total) * 100, 0.4);
    const bar = make("span", {
      class: `bar ${span.kind}${span.failed ? " failed" : ""}${span.open ? " open" : ""}`,
      title: `${span.label}: ${millis(span.end - span.start)}`,
    });
    // Through the CSSOM: the page's CSP allows no inline style attribute.
    bar.style.left = `${left.toFixed(3)}%`;
    bar.style.width = `${width.toFixed(3)}%`;
    rows.append(make("li", { "data-kind": span.kind, "data-lane": span.lane },
      make("span", { class: "timeline-label" }, span.lane === span.label ? span.label : `${span.lane} · ${span.label}`),
      make("span", { class: "timeline-track" }, bar),
      make("span", { class: "timeline-duration" }, span.open ? `${millis(span.end - span.start)}…` : millis(span.end - span.start))));
  }
  panel.append(make("p", { class: "hint" }, `${spans.length} spans over ${millis(total)}`), rows);
  return panel;
}
