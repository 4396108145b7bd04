// The developer sandbox (BATON_SANDBOX=on on the server): the envelope
// builder as a conversation. Each message is sent with the whole
// conversation so far (`POST /sandbox/drafts`; the server keeps nothing);
// the builder's reply, what is wrong (each with its JSON path), the drafted
// envelope and its plan (the same graph as a run's) show after each turn.
// Once the builder says it is ready, "Use this envelope" puts it in "Start
// a run". An example envelope of the registry (`GET /sandbox/metadata`) can
// be put there too. A server with the sandbox off says so.

import { flex, getJson, postJson } from "./api.js";
import { make, pretty } from "./dom.js";
import { drawPlan } from "./graph.js";

const withPath = (error) =>
  error.details && error.details.path ? `${error.message} (${error.details.path})` : error.message || String(error);

/** Opens the builder in `view`; `onUse(text)` takes a finished envelope. Returns `close`. */
export function showSandbox(view, { onUse }) {
  let closed = false;
  const messages = [];
  const log = make("ol", { id: "draft-log", class: "draft-log" });
  const input = make("textarea", {
    id: "draft-message", rows: "4", spellcheck: "false",
    placeholder: "what the run should produce; then inputs as `facet.field: value` lines; `yes` to take the draft",
  });
  const send = make("button", { id: "draft-send", type: "button" }, "Send");
  const stage = make("p", { id: "draft-stage", class: "hint", role: "status" });
  const problems = make("ul", { id: "draft-problems", class: "error" });
  const draft = make("div", { id: "draft-envelope" });
  const use = make("button", { id: "draft-use", type: "button", hidden: "" }, "Use this envelope");
  const examples = make("select", { id: "draft-examples" }, make("option", { value: "" }, "or start from an example…"));
  let envelope = null;
  view.replaceChildren(
    make("h2", {}, "Draft an envelope"),
    make("p", { class: "hint" }, "The builder reads the registry: it asks what you want, then the inputs a plan needs, checks the draft as a run would and shows its plan. Nothing is stored and no model is called."),
    examples, log, input, send, stage, problems, use, draft);

  const say = (role, text) => log.append(make("li", { class: `draft-${role}`, "data-role": role }, text));

  function render(turn) {
    say("builder", turn.reply);
    stage.textContent = `stage: ${turn.stage.replace(/_/g, " ")}`;
    stage.dataset.stage = turn.stage;
    problems.replaceChildren(...turn.problems.map((problem) =>
      make("li", { "data-path": problem.path }, `${problem.path}: ${problem.message}`)));
    envelope = turn.envelope;
    const parts = [];
    if (turn.plan && turn.plan.plan) {
      const plan = turn.plan.plan;
      parts.push(make("h3", {}, "Its plan"), drawPlan(plan, {
        supplied: plan.suppliedFacets || [], goals: plan.goalFacets || [], statuses: {}, selected: null,
        onSelect: () => {},
      }));
    }
    if (envelope) parts.push(make("h3", {}, turn.ready ? "The envelope (ready)" : "The draft so far"), pretty(envelope));
    draft.replaceChildren(...parts);
    use.hidden = !turn.ready;
  }

  async function turn() {
    send.disabled = true;
    try {
      const answer = await postJson(`${flex}/sandbox/drafts`, { messages });
      if (closed) return;
      messages.push({ role: "assistant", content: answer.reply });
      render(answer);
    } catch (error) {
      if (closed) return;
      stage.textContent = withPath(error);
      stage.dataset.stage = "refused";
      // The message the server could not take is not part of the conversation.
      if (messages.length && messages[messages.length - 1].role === "user") messages.pop();
    } finally {
      send.disabled = false;
    }
  }

  send.addEventListener("click", () => {
    const text = input.value.trim();
    if (!text) return;
    messages.push({ role: "user", content: text });
    say("you", text);
    input.value = "";
    turn();
  });
  use.addEventListener("click", () => { if (envelope) onUse(JSON.stringify(envelope, null, 2)); });
  getJson(`${flex}/sandbox/metadata`).then((metadata) => {
    if (closed) return;
    for (const example of metadata.examples) {
      examples.append(make("option", { value: example.name }, `${example.name}: ${example.objective}`));
    }
    examples.addEventListener("change", () => {
      const chosen = metadata.examples.find((example) => example.name === examples.value);
      if (chosen) onUse(JSON.stringify(chosen.envelope, null, 2));
    });
  }).catch((error) => {
    if (closed) return;
    if (error.code === "sandbox_off") {
      view.replaceChildren(make("h2", {}, "Draft an envelope"),
        make("p", { id: "sandbox-off", class: "hint" }, "The developer sandbox is off on this server (BATON_SANDBOX=on turns it on)."));
    } else {
      stage.textContent = withPath(error);
    }
  });
  turn();
  return { close: () => { closed = true; } };
}
