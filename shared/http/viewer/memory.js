// Memory: the tenant's items across runs. List a namespace (and those under
// it), search the listed namespaces for a query, open the run that wrote an
// item, delete one. A namespace is typed as its parts separated by "/"
// (`client/example/tone`); empty lists everything. Errors name the JSON path
// or parameter the API names.

import { ApiError, flex, getJson, postJson, token } from "./api.js";
import { make } from "./dom.js";

const $ = (selector) => document.querySelector(selector);

const errorText = (error) => {
  if (!(error instanceof ApiError)) return error.message || String(error);
  const where = error.details && (error.details.path || error.details.parameter);
  return where ? `${where}: ${error.message}` : error.message;
};

/** The namespace typed in `#memory-prefix`, as its parts. */
const typedPrefix = () =>
  $("#memory-prefix").value.split("/").map((part) => part.trim()).filter(Boolean);

/** The namespaces of the items listed now (search reads these). */
let listedNamespaces = [];

/** Lists the items under the typed prefix into `#memory-items`. */
export async function loadMemory() {
  const list = $("#memory-items");
  $("#memory-error").textContent = "";
  try {
    const prefix = encodeURIComponent(JSON.stringify(typedPrefix()));
    const { items } = await getJson(`${flex}/memory/items?prefix=${prefix}&limit=200`);
    const seen = new Map();
    for (const item of items) seen.set(JSON.stringify(item.namespace), item.namespace);
    listedNamespaces = [...seen.values()].slice(0, 10);
    list.replaceChildren(...items.map(memoryItem));
    if (!items.length) list.append(make("li", { class: "hint" }, "no items"));
  } catch (error) {
    list.replaceChildren(make("li", { class: "error" }, errorText(error)));
  }
}

/** Ranks the listed namespaces' items for `#memory-query`. */
export async function searchMemory() {
  const list = $("#memory-items");
  const shown = $("#memory-error");
  shown.textContent = "";
  const query = $("#memory-query").value.trim();
  const namespaces = listedNamespaces.length ? listedNamespaces : [typedPrefix()];
  try {
    const { found } = await postJson(`${flex}/memory/search`, { namespaces, query, limit: 20 });
    list.replaceChildren(...found.map((ranked) => memoryItem(ranked.item, ranked)));
    if (!found.length) list.append(make("li", { class: "hint" }, "nothing found"));
  } catch (error) {
    shown.textContent = errorText(error);
  }
}

async function remove(item) {
  const parameters = new URLSearchParams({ namespace: JSON.stringify(item.namespace), key: item.key });
  const headers = token() ? { authorization: `Bearer ${token()}` } : {};
  const response = await fetch(`${flex}/memory/item?${parameters}`, { method: "DELETE", headers });
  if (!response.ok) {
    const body = await response.json().catch(() => null);
    throw new ApiError(response.status, body && body.error);
  }
}

function memoryItem(item, found) {
  const provenance = item.provenance || {};
  const writer = provenance.runId
    ? make("a", { href: `#run/${provenance.runId}`, class: "memory-run" },
      `run ${provenance.runId}${provenance.nodeId ? ` · ${provenance.nodeId}` : ""}`)
    : make("span", { class: "hint" }, provenance.person ? `by ${provenance.person}` : "by the API");
  const deleteButton = make("button", { type: "button", "data-action": "delete" }, "delete");
  const element = make("li", {
    "data-namespace": item.namespace.join("/"), "data-key": item.key,
  },
  make("code", {}, `${item.namespace.join("/")} · ${item.key}`), " ",
  found ? make("span", { class: "hint" }, `(${found.foundBy}) `) : null,
  make("span", { class: "memory-text" }, item.text), " ",
  writer,
  make("span", { class: "hint" }, ` · ${item.updatedAt}`), " ",
  deleteButton);
  deleteButton.addEventListener("click", async (event) => {
    event.stopPropagation();
    try {
      await remove(item);
      await loadMemory();
    } catch (error) {
      element.append(make("span", { class: "error" }, ` ${errorText(error)}`));
    }
  });
  return element;
}
