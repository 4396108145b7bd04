// Schedules: the tenant's list (state, expression, time zone, next fire, the
// last run it started), pause, resume and delete on each, and a form that
// keeps a new one from the envelope in "Start a run". Errors name the JSON
// path the API names (`$.expression`, `$.envelope.objective`).

import { ApiError, flex, getJson, postJson, token } from "./api.js";
import { make } from "./dom.js";

const $ = (selector) => document.querySelector(selector);

const errorText = (error) =>
  error instanceof ApiError && error.details && error.details.path
    ? `${error.message}`
    : error.message || String(error);

async function act(method, url) {
  // DELETE answers 204 without a body.
  const headers = token() ? { authorization: `Bearer ${token()}` } : {};
  const response = await fetch(url, { method, headers });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new ApiError(response.status, body && body.error);
  }
}

/** Lists the tenant's schedules into `#schedules`. */
export async function loadSchedules() {
  const list = $("#schedules");
  try {
    const { schedules } = await getJson(`${flex}/schedules`);
    list.replaceChildren(...schedules.map(scheduleItem));
    if (!schedules.length) list.append(make("li", { class: "hint" }, "no schedules"));
  } catch (error) {
    list.replaceChildren(make("li", { class: "error" }, errorText(error)));
  }
}

function scheduleItem(schedule) {
  const url = `${flex}/schedules/${encodeURIComponent(schedule.scheduleId)}`;
  const button = (label, run) => {
    const element = make("button", { type: "button", "data-action": label }, label);
    element.addEventListener("click", async (event) => {
      event.stopPropagation();
      try {
        await run();
        await loadSchedules();
      } catch (error) {
        item.append(make("span", { class: "error" }, ` ${errorText(error)}`));
      }
    });
    return element;
  };
  const lastRun = schedule.lastRunId
    ? make("a", { href: `#run/${schedule.lastRunId}`, class: "last-run" }, "last run")
    : null;
  const item = make("li", { "data-schedule-id": schedule.scheduleId, "data-state": schedule.state },
    make("span", { class: `badge ${schedule.state}` }, schedule.state), " ",
    make("code", {}, schedule.expression), " ",
    make("span", { class: "hint" }, schedule.timezone),
    make("span", { class: "objective" },
      schedule.description || (schedule.envelope && schedule.envelope.objective) || schedule.scheduleId),
    make("span", { class: "hint next-fire" },
      schedule.nextFireAt ? `next ${schedule.nextFireAt}` : "no next fire"),
    make("span", { class: "hint" }, ` · ${schedule.fires} run(s) `),
    lastRun,
    schedule.state === "active"
      ? button("pause", () => postJson(`${url}/pause`))
      : button("resume", () => postJson(`${url}/resume`)),
    button("delete", () => act("DELETE", url)));
  return item;
}

/** Keeps a schedule of the envelope in `#envelope`. */
export async function createSchedule() {
  const shown = $("#schedule-error");
  shown.textContent = "";
  let envelope;
  try {
    envelope = JSON.parse($("#envelope").value);
  } catch (error) {
    shown.textContent = `the envelope is not JSON: ${error.message}`;
    return;
  }
  try {
    await postJson(`${flex}/schedules`, {
      expression: $("#schedule-expression").value.trim(),
      timezone: $("#schedule-timezone").value.trim() || "UTC",
      missedFires: $("#schedule-missed").value,
      envelope,
    });
    await loadSchedules();
  } catch (error) {
    const path = error.details && error.details.path ? ` (${error.details.path})` : "";
    shown.textContent = `${errorText(error)}${path}`;
  }
}
