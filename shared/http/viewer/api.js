// The HTTP API, and only it: every call carries the bearer token entered once
// (none until one is entered: a server without tokens asks for none). A 401
// announces `baton:unauthorized` so the page can ask for a token then.
//
// The API's origin is this page's own. `?api=https://…` (the page hosted
// elsewhere, e.g. an S3 bucket beside the function URL) is honoured only for
// an origin the operator listed in the page's `baton-api-origins` meta tag
// (BATON_VIEWER_API_ORIGINS on the server): a link naming any other origin
// gets the page's own API, and the token goes nowhere else. A token is kept
// per API origin, so one entered for one API is never sent to another.

/** `scheme://host[:port]` of a URL, or null. */
function originOf(text) {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : null;
  } catch {
    return null;
  }
}

const allowedApiOrigins = new Set(
  (document.querySelector('meta[name="baton-api-origins"]')?.content || "")
    .split(/\s+/).map(originOf).filter(Boolean));
allowedApiOrigins.add(location.origin);

const requestedApi = new URLSearchParams(location.search).get("api");
const requestedOrigin = requestedApi ? originOf(requestedApi) : null;
const origin = requestedOrigin && allowedApiOrigins.has(requestedOrigin) ? requestedOrigin : location.origin;

/** The `?api=` this page refused (not an allowed origin), or null. */
export const refusedApi = requestedApi && origin !== requestedOrigin ? requestedApi : null;

const TOKEN_KEY = `baton.viewer.token ${origin}`;

export const flex = `${origin}/api/v1/flex`;
export const judge = `${origin}/api/v1/judge`;
export const v1 = `${origin}/api/v1`;

export function token() { return localStorage.getItem(TOKEN_KEY) || ""; }
export function setToken(value) { localStorage.setItem(TOKEN_KEY, value.trim()); }

/** The request headers: the bearer token only when one was entered. */
function authorization(extra) {
  const headers = { ...extra };
  if (token()) headers.authorization = `Bearer ${token()}`;
  return headers;
}

/** Tells the page the server wants a (valid) token. */
function checkAuthorized(status) {
  if (status === 401) window.dispatchEvent(new CustomEvent("baton:unauthorized"));
}

/** An API error: the HTTP status and the body's `error` object. */
export class ApiError extends Error {
  constructor(status, error) {
    super(error && error.message ? error.message : `HTTP ${status}`);
    this.status = status;
    this.code = error && error.code;
    this.details = (error && error.details) || {};
  }
}

async function call(method, url, body) {
  const headers = authorization({});
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) {
    checkAuthorized(response.status);
    throw new ApiError(response.status, json && json.error);
  }
  return json;
}

export const getJson = (url) => call("GET", url);
export const postJson = (url, body) => call("POST", url, body);

/** Reads an SSE response to its end, giving `onFrame` each frame's JSON. */
async function readFrames(response, onFrame) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split("\n").filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, "")).join("\n");
      if (data) onFrame(JSON.parse(data));
    }
  }
}

async function refused(response) {
  checkAuthorized(response.status);
  const body = await response.json().catch(() => null);
  return new ApiError(response.status, body && body.error);
}

/**
 * Follows a run's SSE stream (replay, then live) from after `lastId`;
 * `onFrame` gets each frame. Resolves when the stream ends (the run ended
 * or parked); `signal` aborts it. EventSource cannot send a bearer token,
 * so the stream is read with fetch.
 */
export async function followRun(runId, lastId, onFrame, signal) {
  const headers = authorization({ accept: "text/event-stream" });
  if (lastId) headers["last-event-id"] = String(lastId);
  const response = await fetch(`${flex}/runs/${encodeURIComponent(runId)}/events`, { headers, signal });
  if (!response.ok) throw await refused(response);
  await readFrames(response, onFrame);
}

/**
 * Sends one chat message (`POST /api/v1/chat`). Resolves, once the server
 * accepted it, to `{threadId, runId, frames(onFrame)}`: `frames` reads the
 * answer's stream to its end. A refusal (409 `thread_busy`, 422) throws.
 */
export async function sendChat(body, signal) {
  const headers = authorization({ accept: "text/event-stream", "content-type": "application/json" });
  const response = await fetch(`${v1}/chat`, { method: "POST", headers, body: JSON.stringify(body), signal });
  if (!response.ok) throw await refused(response);
  const location = response.headers.get("location") || "";
  return {
    threadId: response.headers.get("x-baton-thread-id"),
    runId: location.split("/").pop() || null,
    frames: (onFrame) => readFrames(response, onFrame),
  };
}
