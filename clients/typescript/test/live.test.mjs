// The client against a live `baton serve` (started by
// functions/baton/tests/typed_clients.rs, with the LLM endpoint's test
// double): runs streamed to their end, typed errors with the JSON path, a
// parked run answered, and an event stream resumed with Last-Event-ID after
// a proxy cuts the connection mid-run.
// Environment: BATON_URL, BATON_TOKEN, BATON_ENVELOPE, BATON_PARKED_ENVELOPE.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import net from "node:net";

import { BatonApiError, BatonClient } from "../dist/index.js";

const url = process.env.BATON_URL;
const skip = url ? false : "BATON_URL names no live server";
const envelope = (name = "BATON_ENVELOPE") => JSON.parse(readFileSync(process.env[name], "utf8"));
const client = (base = url, options = {}) => new BatonClient(base, { token: process.env.BATON_TOKEN, ...options });

async function collect(frames) {
  const all = [];
  for await (const frame of frames) all.push(frame);
  return all;
}

function assertWholeStream(frames) {
  const ids = frames.filter((frame) => frame.id !== null).map((frame) => frame.id);
  assert.deepEqual(ids, ids.map((_, index) => ids[0] + index), "no frame twice, none lost");
  assert.equal(frames.at(-1).event, "complete");
}

/** A TCP proxy in front of the server (a stand-in for a network that
 * drops): its first connection is cut after `cutAfter` bytes of the answer;
 * it records every connection's request head. */
async function cuttingProxy(cutAfter) {
  const upstream = new URL(url);
  const heads = [];
  let connections = 0;
  const server = net.createServer((socket) => {
    const cut = connections === 0;
    connections += 1;
    const target = net.connect(Number(upstream.port), upstream.hostname);
    let sent = 0;
    socket.once("data", (head) => heads.push(head.toString("latin1")));
    socket.pipe(target);
    target.on("data", (chunk) => {
      if (cut && sent + chunk.length >= cutAfter) {
        socket.write(chunk.subarray(0, cutAfter - sent));
        socket.destroy();
        target.destroy();
        return;
      }
      sent += chunk.length;
      socket.write(chunk);
    });
    target.on("end", () => socket.end());
    target.on("error", () => socket.destroy());
    socket.on("error", () => target.destroy());
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}`, heads, close: () => server.close() };
}

test("a run streams to its validated output", { skip }, async () => {
  const baton = client(url, { user: "ada" });
  const accepted = await baton.submitRun(envelope());
  assertWholeStream(await collect(baton.streamRunEvents(accepted.runId)));
  const snapshot = await baton.getRun(accepted.runId);
  assert.equal(snapshot.run.status, "completed");
  assert.ok(snapshot.output.copyVariants.length > 0);
  const listed = await baton.listRuns({ status: "completed" });
  assert.ok(listed.runs.some((run) => run.runId === accepted.runId));
});

test("a refusal is a typed error naming the JSON path", { skip }, async () => {
  const broken = { ...envelope(), objective: 42 };
  await assert.rejects(client().submitRun(broken), (error) => {
    assert.ok(error instanceof BatonApiError);
    assert.ok([400, 422].includes(error.status));
    assert.equal(error.path, "$.objective");
    assert.equal(error.retryable, false);
    return true;
  });
  await assert.rejects(client().getRun("run-of-nobody"), (error) => error.status === 404 && error.code === "run_not_found");
  await assert.rejects(new BatonClient(url, { token: "not-a-token" }).listRuns(), (error) => error.status === 401);
});

test("a parked run is answered and cancelled", { skip }, async () => {
  const baton = client();
  const accepted = await baton.submitRun(envelope("BATON_PARKED_ENVELOPE"));
  await collect(baton.streamRunEvents(accepted.runId));
  assert.equal((await baton.getRun(accepted.runId)).run.status, "awaiting_human");
  const task = (await baton.listTasks()).tasks.find((listed) => listed.runId === accepted.runId);
  await assert.rejects(
    baton.resumeRun({ taskId: task.taskId, expectedPlanVersion: task.planVersion, output: { positioning: 7 } }),
    (error) => error.status === 422 && error.details.errors.some((item) => item.path === "$.output.positioning"),
  );
  assert.equal((await baton.cancelRun(accepted.runId)).status, "cancelled");
});

test("a stream cut mid-run resumes with Last-Event-ID", { skip }, async () => {
  const accepted = await client().submitRun(envelope());
  const proxy = await cuttingProxy(2500);
  try {
    const frames = await collect(client(proxy.url, { reconnectDelayMs: 100 }).streamRunEvents(accepted.runId));
    const streams = proxy.heads.filter((head) => head.split("\r\n")[0].includes("/events"));
    assert.ok(streams.length >= 2, proxy.heads.join("\n---\n"));
    assert.match(streams[1], /last-event-id:/i);
    assertWholeStream(frames);
  } finally {
    proxy.close();
  }
});

test("the sandbox drafts an envelope that then runs", { skip }, async () => {
  const baton = client();
  const metadata = await baton.getSandboxMetadata();
  assert.ok(metadata.facets.some((facet) => facet.name === "positioning_context"));
  const said = [
    "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it.",
    "positioning_context.company_name: Acme Analytics\npositioning_context.company_url: https://acmeanalytics.io",
    "yes",
  ];
  const turn = await baton.draftEnvelope(said.map((content) => ({ role: "user", content })));
  assert.equal(turn.ready, true, turn.reply);
  const accepted = await baton.submitRun(turn.envelope);
  assert.ok(accepted.runId);
  await assert.rejects(baton.draftEnvelope([{ role: "someone", content: "hi" }]), (error) =>
    error instanceof BatonApiError && error.status === 422 && error.path === "$.messages[0].role");
});

test("a schedule is kept, paused, resumed and deleted", { skip }, async () => {
  const baton = client();
  const request = { expression: "rate(1 hour)", timezone: "UTC", envelope: envelope() };
  const schedule = await baton.createSchedule(request);
  assert.equal(schedule.state, "active");
  assert.ok(schedule.nextFireAt);
  const listed = await baton.listSchedules();
  assert.ok(listed.schedules.some((kept) => kept.scheduleId === schedule.scheduleId));
  assert.equal((await baton.pauseSchedule(schedule.scheduleId)).state, "paused");
  assert.equal((await baton.resumeSchedule(schedule.scheduleId)).state, "active");
  assert.equal(await baton.deleteSchedule(schedule.scheduleId), undefined);
  await assert.rejects(baton.getSchedule(schedule.scheduleId), (error) =>
    error instanceof BatonApiError && error.status === 404 && error.code === "schedule_not_found");
  await assert.rejects(baton.createSchedule({ ...request, expression: "every morning" }), (error) =>
    error instanceof BatonApiError && error.status === 422 && error.path === "$.expression");
});

test("a dataset evaluation runs on the server", { skip }, async () => {
  const baton = client();
  const dataset = [
    { id: "as-is", inputs: {} },
    { id: "needs-three", inputs: {}, expect: { assertions: [{ "!!": [{ var: "copyVariants.2" }] }] } },
  ];
  const started = await baton.createDatasetEvaluation({ name: "live", template: envelope(), dataset });
  assert.equal(started.status, "running");
  let record = started;
  for (let attempt = 0; attempt < 600 && record.status !== "completed"; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    record = await baton.getDatasetEvaluation(started.evaluationId);
  }
  assert.deepEqual([record.passed, record.total], [1, 2]);
  assert.deepEqual(record.results.map((result) => result.id), ["as-is", "needs-three"]);
  const listed = await baton.listDatasetEvaluations();
  assert.ok(listed.evaluations.some((kept) => kept.evaluationId === started.evaluationId));
  await assert.rejects(baton.createDatasetEvaluation({ dataset: [{ id: "x", envelope: { objective: 3 } }] }), (error) =>
    error instanceof BatonApiError && error.status === 422 && error.path === "$.dataset[0].envelope.objective");
});
