"""The viewer's token goes to its own server and the operator's API origins,
nowhere else: headless Chromium (Debian's package) driven by Playwright for
Python against a tokened `baton serve` (set up by
`functions/baton/tests/viewer_origin_browser.rs`, which runs this file and
fails when it fails).

Two stand-in servers run here on other origins (other ports of 127.0.0.1),
recording every request they get and answering with permissive CORS
headers, so that only the viewer and the browser's CSP can keep a request
from them: ELSEWHERE, an origin nobody configured, and ALLOWED, the one
origin in the server's BATON_VIEWER_API_ORIGINS.

Environment: BATON_VIEWER_URL (the server's root), BATON_VIEWER_TOKEN,
BATON_ELSEWHERE_PORT, BATON_ALLOWED_PORT, BATON_CHROMIUM,
BATON_BROWSER_ARTIFACTS.
"""

import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = os.environ["BATON_VIEWER_URL"].rstrip("/")
TOKEN = os.environ["BATON_VIEWER_TOKEN"]
DIRECTOR_TOKEN = os.environ["BATON_DIRECTOR_TOKEN"]
REPOSITORY = Path(os.environ["BATON_REPOSITORY"])
ARTIFACTS = Path(os.environ["BATON_BROWSER_ARTIFACTS"])
TIMEOUT_MS = 30_000


class Recorder:
    """A stand-in API on another origin: every request it receives."""

    def __init__(self, port):
        self.requests = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                recorder.requests.append(
                    {"method": self.command, "path": self.path,
                     "authorization": self.headers.get("authorization")})
                body = json.dumps({"runs": [], "tasks": [], "threads": [], "schedules": [],
                                   "evaluations": [], "requests": []}).encode()
                self.send_response(200)
                self.send_header("access-control-allow-origin", "*")
                self.send_header("access-control-allow-headers", "authorization, content-type")
                self.send_header("access-control-allow-methods", "GET, POST, DELETE")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_OPTIONS = do_DELETE = answer

            def log_message(self, *arguments):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.origin = f"http://127.0.0.1:{port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def with_token(self):
        return [request for request in self.requests if request["authorization"]]


def api(method, path, token, body=None):
    request = urllib.request.Request(
        f"{ROOT}/api/v1/flex{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{method} {path}: {error.code} {error.read().decode()}") from error


def instance_of(schema, root=None):
    """A value meeting a plain JSON Schema: local `$ref`s, `allOf`, objects,
    arrays, strings, numbers, booleans and enums."""
    root = root if root is not None else schema
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return instance_of(target, root)
    if "allOf" in schema:
        merged = {}
        for part in schema["allOf"]:
            value = instance_of(part, root)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {name: instance_of(properties.get(name, {"type": "string"}), root)
                for name in schema.get("required", list(properties))}
    if kind == "array":
        return [instance_of(schema.get("items", {"type": "string"}), root)] * max(1, schema.get("minItems", 1))
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)
    if kind == "boolean":
        return True
    return "written by the director" + "." * max(0, schema.get("minLength", 0) - 23)


def answered_by_shows_in_the_viewer(page):
    """A task answered by a signed-in user names them in the node's details."""
    envelope = json.loads((REPOSITORY / "functions/baton/tests/fixtures/human-review.json").read_text())
    run_id = api("POST", "/runs", TOKEN, envelope)["runId"]
    task = None
    for _ in range(300):
        tasks = api("GET", "/tasks", DIRECTOR_TOKEN)["tasks"]
        task = next((item for item in tasks if item["runId"] == run_id), None)
        if task:
            break
        time.sleep(0.1)
    assert task, "the director sees the run's task"
    api("POST", "/run.resume", DIRECTOR_TOKEN, {
        "taskId": task["taskId"], "expectedPlanVersion": task["planVersion"],
        "output": instance_of(task["outputSchema"])})
    page.goto(f"{ROOT}/#run/{run_id}")
    node = page.locator(f'svg.plan g.node[data-node-id="{task["nodeId"]}"]')
    expect(node).to_have_attribute("data-status", "completed", timeout=TIMEOUT_MS)
    node.click()
    expect(page.locator(".node-details .answered-by")).to_have_text("dana@acme.example")
    shot(page, "31-node-answered-by")
    print("ok: the node a signed-in user answered names them")


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def main():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    elsewhere = Recorder(int(os.environ["BATON_ELSEWHERE_PORT"]))
    allowed = Recorder(int(os.environ["BATON_ALLOWED_PORT"]))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ["BATON_CHROMIUM"])
        page = browser.new_page()
        sent = []
        page.on("request", lambda request: sent.append(
            (request.url, request.headers.get("authorization"))))

        # A user enters the token once, on the viewer's own page.
        page.goto(ROOT + "/")
        expect(page.locator("#token-form")).to_be_visible(timeout=TIMEOUT_MS)
        page.fill("#token", TOKEN)
        page.click("#token-form button[type=submit]")
        expect(page.locator("#token-state")).to_have_text("token set")
        page.wait_for_load_state("networkidle")
        own = [url for url, authorization in sent
               if url.startswith(ROOT + "/api/") and authorization == f"Bearer {TOKEN}"]
        assert own, f"the token goes to the viewer's own API: {sent}"

        # Then follows a link naming another origin: the page ignores it,
        # says so, and keeps talking to its own server.
        sent.clear()
        page.goto(f"{ROOT}/?api={elsewhere.origin}")
        page.wait_for_load_state("networkidle")
        assert not elsewhere.requests, f"the other origin was sent {elsewhere.requests}"
        assert not [url for url, _ in sent if url.startswith(elsewhere.origin)], sent
        expect(page.locator("#api-refused")).to_be_visible()
        expect(page.locator("#api-refused")).to_contain_text(elsewhere.origin)
        assert [url for url, authorization in sent
                if url.startswith(ROOT + "/api/") and authorization], \
            f"the page still uses its own API with its token: {sent}"
        shot(page, "30-viewer-api-origin-refused")

        # Even a script on the page cannot reach it: the CSP's connect-src
        # names only the page's own origin and the configured one.
        outcome = page.evaluate(
            """(url) => fetch(url, {headers: {authorization: "Bearer stolen"}})
                 .then(() => "sent", () => "blocked")""",
            elsewhere.origin + "/collect")
        assert outcome == "blocked", outcome
        assert not elsewhere.requests, f"the other origin was sent {elsewhere.requests}"
        print("ok: ?api= naming another origin sends it nothing")

        # The origin the operator configured is used, without the token
        # entered for another API: tokens are kept per API origin.
        sent.clear()
        page.goto(f"{ROOT}/?api={allowed.origin}")
        page.wait_for_load_state("networkidle")
        expect(page.locator("#api-refused")).to_be_hidden()
        assert [request for request in allowed.requests
                if request["path"].startswith("/api/v1/flex/")], \
            f"the configured origin is the page's API: {allowed.requests}"
        assert not allowed.with_token(), \
            f"a token entered for one API went to another: {allowed.with_token()}"
        assert not [url for url, _ in sent if url.startswith(ROOT + "/api/")], \
            f"the page used the configured origin only: {sent}"
        print("ok: a configured API origin is used, with its own token only")
        page.goto(ROOT + "/")
        answered_by_shows_in_the_viewer(page)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
