// A judge panel's transcript, grouped by round and phase, each message with
// its hash; "Verify" recomputes the chain in the browser exactly as
// `baton judge verify` does: hash = sha256(previousHash ‖ canonical JSON of
// the message without `hash`, `previousHash` and `hcsTxId`), canonical JSON as RFC 8785
// (keys sorted, no whitespace, ECMAScript number and string forms), the first
// message's previousHash the empty string.

import { make } from "./dom.js";

/** RFC 8785 canonical JSON of `value`. */
export function canonicalJson(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).filter((key) => value[key] !== undefined).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(",")}}`;
}

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

/** The first broken link as a sentence, or null when the chain holds. */
export async function verifyTranscript(transcript) {
  let previous = "";
  for (const round of transcript.rounds || []) {
    for (const [index, message] of (round.messages || []).entries()) {
      const { hash, previousHash, hcsTxId, ...content } = message;
      const expected = await sha256Hex(previous + canonicalJson(content));
      if ((previousHash || "") !== previous || hash !== expected) {
        return `round ${round.round} message ${index} (${message.id}): its hash is ${hash} but its content hashes to ${expected}`;
      }
      previous = hash;
    }
  }
  return null;
}

/** Finds a transcript (`{rounds: [...]}`) in a node's output. */
export function transcriptIn(output) {
  if (!output || typeof output !== "object") return null;
  if (output.transcript && Array.isArray(output.transcript.rounds)) return output.transcript;
  for (const value of Object.values(output)) {
    if (value && typeof value === "object" && value.transcript && Array.isArray(value.transcript.rounds)) return value.transcript;
  }
  return null;
}

/**
 * The ledger explorer a published transcript links to (its `explorerUrl`),
 * only when it is an https URL: a transcript's text never becomes a
 * `javascript:` link.
 */
export function ledgerExplorer(transcript) {
  const url = transcript.explorerUrl;
  if (typeof url !== "string") return null;
  try {
    return new URL(url).protocol === "https:" ? url.replace(/\/+$/, "") : null;
  } catch {
    return null;
  }
}

/**
 * The transcript view: rounds, then phases within them, then messages.
 * `verdicts` (topic → {className, text}) keeps a verdict across redraws.
 */
export function transcriptView(transcript, verdicts = new Map()) {
  const view = make("section", { class: "panel transcript" }, make("h3", {}, "Judge transcript"));
  const messages = (transcript.rounds || []).reduce((count, round) => count + (round.messages || []).length, 0);
  const explorer = ledgerExplorer(transcript);
  const publishedTo = explorer
    ? make("a", { class: "ledger-topic", href: `${explorer}/topic/${encodeURIComponent(transcript.topicId)}`, target: "_blank", rel: "noreferrer" }, `topic ${transcript.topicId}`)
    : transcript.topicId || "the run's event log";
  view.append(make("p", { class: "hint" }, `${transcript.rounds.length} round(s), ${messages} message(s), published to `, publishedTo));
  for (const round of transcript.rounds) {
    const roundView = make("div", { class: "round", "data-round": String(round.round) },
      make("h4", {}, `Round ${round.round}${round.variance != null ? ` · variance ${round.variance.toFixed(3)}` : ""}`));
    const phases = [];
    for (const message of round.messages || []) {
      if (!phases.includes(message.phase)) phases.push(message.phase);
    }
    for (const phase of phases) {
      roundView.append(make("h5", {}, phase));
      for (const message of round.messages.filter((candidate) => candidate.phase === phase)) {
        roundView.append(make("div", { class: "message", "data-message-id": message.id },
          make("strong", {}, `${message.role}${message.agentId ? ` ${message.agentId}` : ""}: `),
          message.content.length > 400 ? `${message.content.slice(0, 400)}…` : message.content,
          make("div", { class: "hash" }, `hash ${message.hash}`,
            explorer && message.hcsTxId
              ? make("a", { class: "ledger-tx", href: `${explorer}/transaction/${encodeURIComponent(message.hcsTxId)}`, target: "_blank", rel: "noreferrer", title: `transaction ${message.hcsTxId}` }, " · tx")
              : "")));
      }
    }
    view.append(roundView);
  }
  const key = transcript.topicId || "";
  const given = verdicts.get(key);
  const verdict = make("span", { class: given ? given.className : "verdict", role: "status", "data-topic": key });
  if (given) verdict.textContent = given.text;
  const button = make("button", { type: "button", class: "verify" }, "Verify");
  button.addEventListener("click", async () => {
    verdict.className = "verdict";
    verdict.textContent = "checking…";
    const broken = await verifyTranscript(transcript);
    const outcome = {
      className: `verdict ${broken ? "broken" : "verified"}`,
      text: broken ? `Broken: ${broken}` : `Verified: ${messages} messages, every hash holds`,
    };
    verdicts.set(key, outcome);
    // The page may have been redrawn while the hashes were checked: update
    // whichever verdict is on it now.
    const onPage = [...document.querySelectorAll(".transcript .verdict")].filter((shown) => shown.dataset.topic === key);
    for (const shown of [verdict, ...onPage]) {
      shown.className = outcome.className;
      shown.textContent = outcome.text;
    }
  });
  view.append(make("p", {}, button, " ", verdict));
  return view;
}
