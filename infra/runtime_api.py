#!/usr/bin/env python3
"""A small Lambda Runtime API emulator: hands one event to the function that
polls it, records the function's answer, then holds every further poll open.

    python3 infra/runtime_api.py PORT EVENT_FILE ANSWER_FILE

Start the function with AWS_LAMBDA_RUNTIME_API=127.0.0.1:PORT. When the
function answers, ANSWER_FILE holds {"kind": "response"|"error"|"init_error",
"body": <the JSON it sent>}. Only the standard library: no download.
"""
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, EVENT_FILE, ANSWER_FILE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with open(EVENT_FILE, "rb") as handle:
    EVENT = handle.read()
REQUEST_ID = str(uuid.uuid4())
handed_out = threading.Event()
answered = threading.Event()


def record(kind, raw):
    try:
        body = json.loads(raw or b"null")
    except ValueError:
        body = raw.decode("utf-8", "replace")
    with open(ANSWER_FILE + ".tmp", "w") as handle:
        json.dump({"kind": kind, "body": body}, handle)
    # Rename so a reader never sees half a file.
    import os
    os.replace(ANSWER_FILE + ".tmp", ANSWER_FILE)
    answered.set()


class RuntimeApi(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/2018-06-01/runtime/invocation/next":
            return self.reply(404)
        if handed_out.is_set():
            # One event per run of the emulator: hold the poll open.
            while True:
                time.sleep(3600)
        handed_out.set()
        deadline_ms = int(time.time() * 1000) + 60_000
        self.reply(200, EVENT, {
            "Content-Type": "application/json",
            "Lambda-Runtime-Aws-Request-Id": REQUEST_ID,
            "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
            "Lambda-Runtime-Invoked-Function-Arn": "arn:aws:lambda:us-east-1:123456789012:function:check-deploy",
            "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
        })

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path == f"/2018-06-01/runtime/invocation/{REQUEST_ID}/response":
            record("response", raw)
        elif self.path == f"/2018-06-01/runtime/invocation/{REQUEST_ID}/error":
            record("error", raw)
        elif self.path == "/2018-06-01/runtime/init/error":
            record("init_error", raw)
        else:
            return self.reply(404)
        self.reply(202, b"{}", {"Content-Type": "application/json"})


ThreadingHTTPServer(("127.0.0.1", PORT), RuntimeApi).serve_forever()
