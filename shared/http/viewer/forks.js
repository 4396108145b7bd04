// Forks in the run view: the fork tree around a run (its sources up to the
// first run, and every fork below that, from `GET /runs?forkedFrom=`), and
// "Fork from here" on a node: a new run that reuses what was completed up
// to that node, with the node's output corrected and inputs set anew when
// the person says so (`POST /runs/{id}/fork`; a 422 names the JSON path).

import { ApiError, flex, getJson, postJson } from "./api.js";
import { make } from "./dom.js";

/** Most runs the tree shows, and how deep it looks below the first run. */
const MOST_RUNS = 60, DEEPEST = 5, LONGEST_ANCESTRY = 20;

function errorText(error) {
  if (!(error instanceof ApiError)) return String(error);
  const path = error.details && error.details.path ? ` (${error.details.path})` : "";
  return `${error.status} ${error.code || ""}: ${error.message}${path}`;
}

const forksOf = (runId) => getJson(`${flex}/runs?${new URLSearchParams({ forkedFrom: runId, limit: "100" })}`)
  .then((page) => page.runs);

/**
 * The fork tree of the run `snapshot` shows, as a panel; null when the run
 * is neither a fork nor forked.
 */
export async function forkTree(snapshot) {
  const run = snapshot.run;
  // Up to the first run, through each run's source.
  const chain = [{ runId: run.runId, status: run.status, objective: run.envelope.objective, at: run.forkedFrom && run.forkedFrom.at }];
  let source = run.forkedFrom && run.forkedFrom.runId;
  while (source && chain.length < LONGEST_ANCESTRY) {
    const found = await getJson(`${flex}/runs/${encodeURIComponent(source)}`).catch(() => null);
    if (!found) {
      chain.unshift({ runId: source, status: "unknown", objective: "(not readable)" });
      break;
    }
    chain.unshift({ runId: source, status: found.run.status, objective: found.run.envelope.objective, at: found.run.forkedFrom && found.run.forkedFrom.at });
    source = found.run.forkedFrom && found.run.forkedFrom.runId;
  }
  // Every fork below the first run, breadth first, within the bounds.
  const children = new Map();
  let shown = 1, frontier = [chain[0].runId];
  for (let depth = 0; depth < DEEPEST && frontier.length && shown < MOST_RUNS; depth++) {
    const next = [];
    for (const runId of frontier) {
      if (shown >= MOST_RUNS) break;
      const forks = (await forksOf(runId).catch(() => [])).slice(0, MOST_RUNS - shown);
      shown += forks.length;
      children.set(runId, forks);
      next.push(...forks.map((fork) => fork.runId));
    }
    frontier = next;
  }
  if (chain.length === 1 && !(children.get(run.runId) || []).length) return null;
  const known = new Map(chain.map((entry) => [entry.runId, entry]));
  const item = (entry) => {
    const forks = children.get(entry.runId) || [];
    const current = entry.runId === run.runId;
    return make("li", { "data-run-id": entry.runId, class: current ? "current" : null },
      make("span", { class: `badge ${entry.status}`, "data-status": entry.status }, entry.status), " ",
      current ? make("code", {}, entry.runId) : make("a", { href: `#run/${entry.runId}` }, make("code", {}, entry.runId)),
      entry.at ? make("span", { class: "hint" }, ` · forked at ${entry.at}`) : null,
      make("span", { class: "objective hint" }, ` ${entry.objective}`),
      forks.length ? make("ul", {}, ...forks.map((fork) => item({ ...fork, ...(known.get(fork.runId) || {}) }))) : null);
  };
  return make("section", { class: "panel fork-tree" },
    make("h3", {}, "Fork tree"),
    make("ul", {}, item(chain[0])));
}

/**
 * The "Fork from here" form for `node` of the run `view` shows: it reuses
 * what was completed at the node's last `node_complete` (or, for a node not
 * completed, at the plan version), with the output and inputs as edited.
 * `onForked(runId)` opens the new run.
 */
export function forkForm(view, node, output, onForked) {
  const completion = [...view.frames].reverse()
    .find((frame) => frame.type === "node_complete" && frame.nodeId === node.nodeId && frame.runId === view.runId);
  const at = completion ? { eventId: completion.id } : { planVersion: view.snapshot.run.planVersion };
  const original = output ? JSON.stringify(output, null, 2) : "";
  const corrected = make("textarea", { class: "fork-output", rows: "8", spellcheck: "false" });
  corrected.value = original;
  const inputs = make("textarea", { class: "fork-inputs", rows: "3", spellcheck: "false", placeholder: '{"facetName": new value}' });
  const state = make("p", { class: "error fork-error", role: "alert" });
  const submit = make("button", { type: "submit", class: "fork-submit" }, "Fork");
  const form = make("form", { class: "panel fork-form", "data-node-id": node.nodeId },
    make("h4", {}, `Fork from ${node.label || node.nodeId}`),
    make("p", { class: "hint" }, completion
      ? `A new run reusing every node completed by this node's completion (event ${completion.id}); the nodes after it run again.`
      : `A new run at plan version ${at.planVersion}, reusing every node completed; this node runs again.`),
    output ? make("label", {}, "Its output (edit to correct it; checked against its contract)", corrected) : null,
    make("label", {}, "Inputs set anew (JSON, optional)", inputs),
    make("p", {}, submit), state);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    state.textContent = "";
    const body = { at };
    try {
      if (output && corrected.value.trim() !== original.trim()) body.nodeOutputs = { [node.nodeId]: JSON.parse(corrected.value) };
      if (inputs.value.trim()) body.inputs = JSON.parse(inputs.value);
    } catch (error) {
      state.textContent = `not JSON: ${error.message}`;
      return;
    }
    try {
      const created = await postJson(`${flex}/runs/${encodeURIComponent(view.runId)}/fork`, body);
      onForked(created.runId);
    } catch (error) {
      state.textContent = errorText(error);
    }
  });
  return form;
}
