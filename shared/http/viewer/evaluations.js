// Evaluations run by this server (`POST /api/v1/flex/evaluations`): the
// tenant's list (status, passed of total, when), one evaluation's summary
// and examples (each linking to its run; polled while it runs), and a form
// that runs a dataset (one example a JSON line: `{"id", "inputs" | "envelope",
// "expect"}`) over the envelope in "Start a run" as its template, with an
// optional judge panel. Errors name the JSON path the API names.

import { ApiError, flex, getJson, postJson } from "./api.js";
import { make } from "./dom.js";

const $ = (selector) => document.querySelector(selector);

const withPath = (error) => {
  const path = error instanceof ApiError && error.details && error.details.path ? ` (${error.details.path})` : "";
  return `${error.message || String(error)}${path}`;
};

/** Lists the tenant's evaluations into `#evaluations`. */
export async function loadEvaluations() {
  const list = $("#evaluations");
  try {
    const { evaluations } = await getJson(`${flex}/evaluations`);
    list.replaceChildren(...evaluations.map((evaluation) => {
      const item = make("li", { "data-evaluation-id": evaluation.evaluationId, "data-status": evaluation.status },
        make("span", { class: `badge ${evaluation.status}` }, evaluation.status), " ",
        make("span", { class: "objective" }, evaluation.name),
        make("span", { class: "hint" }, ` ${evaluation.passed}/${evaluation.total} passed · ${evaluation.createdAt}`));
      item.addEventListener("click", () => { location.hash = `#evaluation/${evaluation.evaluationId}`; });
      return item;
    }));
    if (!evaluations.length) list.append(make("li", { class: "hint" }, "no evaluations"));
  } catch (error) {
    // A server that runs none (the Lambda API) says so; the section says it too.
    list.replaceChildren(make("li", { class: "hint" }, withPath(error)));
  }
}

/** Runs the dataset in `#evaluation-dataset` over the envelope in `#envelope`. */
export async function startEvaluation() {
  const shown = $("#evaluation-error");
  shown.textContent = "";
  const request = { name: $("#evaluation-name").value.trim() || undefined, dataset: $("#evaluation-dataset").value };
  try {
    if ($("#envelope").value.trim()) request.template = JSON.parse($("#envelope").value);
    if ($("#evaluation-judges").value.trim()) request.judges = JSON.parse($("#evaluation-judges").value);
  } catch (error) {
    shown.textContent = `not JSON: ${error.message}`;
    return;
  }
  try {
    const started = await postJson(`${flex}/evaluations`, request);
    await loadEvaluations();
    location.hash = `#evaluation/${started.evaluationId}`;
  } catch (error) {
    shown.textContent = withPath(error);
  }
}

const score = (result) => (result.judge ? result.judge.score.toFixed(2) : "—");

function summaryLines(record) {
  const summary = record.summary;
  if (!summary) return [make("p", { class: "hint" }, `${record.finished} of ${record.total} examples finished`)];
  const judged = summary.judgeScore
    ? `judge score ${summary.judgeScore.mean.toFixed(2)} (95% CI ${summary.judgeScore.low.toFixed(2)} to ${summary.judgeScore.high.toFixed(2)})`
    : "not judged";
  return [make("p", { id: "evaluation-summary" },
    `${summary.passed}/${summary.total} passed · ${judged} · cost $${summary.costUsdTotal.toFixed(6)} · p50 ${summary.durationMsP50 ?? "—"} ms, p95 ${summary.durationMsP95 ?? "—"} ms`)];
}

function exampleRow(result) {
  const failed = result.checks.filter((check) => !check.passed).map((check) => `${check.check}: ${check.detail}`);
  return make("tr", { "data-example": result.id, class: result.passed ? "passed" : "failed" },
    make("td", {}, result.id),
    make("td", {}, result.passed ? "pass" : "FAIL"),
    make("td", {}, result.status || "not run"),
    make("td", {}, score(result)),
    make("td", {}, failed.join("; ")),
    make("td", {}, result.runId ? make("a", { href: `#run/${result.runId}` }, result.runId) : "—"));
}

/** Shows one evaluation in `view`, polling it while it runs; returns `close`. */
export function showEvaluation(view, evaluationId) {
  let closed = false;
  let timer = null;
  const render = (record) => {
    view.replaceChildren(
      make("h2", {}, record.name, " ", make("span", { class: `badge ${record.status}` }, record.status)),
      ...summaryLines(record),
      make("table", { id: "evaluation-examples" },
        make("tr", {}, ...["example", "result", "status", "judge", "failed checks", "run"].map((name) => make("th", {}, name))),
        ...record.results.map(exampleRow)));
  };
  const poll = async () => {
    try {
      const record = await getJson(`${flex}/evaluations/${encodeURIComponent(evaluationId)}`);
      if (closed) return;
      render(record);
      if (record.status === "running") timer = setTimeout(poll, 1000);
      else loadEvaluations();
    } catch (error) {
      if (!closed) view.replaceChildren(make("p", { class: "error" }, withPath(error)));
    }
  };
  view.replaceChildren(make("p", { class: "hint" }, "loading the evaluation…"));
  poll();
  return { close: () => { closed = true; clearTimeout(timer); } };
}
