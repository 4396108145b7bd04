#!/usr/bin/env python3
"""A small Lambda Runtime API emulator: hands one event to the function that
polls it, records the function's answer, then holds every further poll open.

    python3 infra/runtime_api.py PORT EVENT_FILE ANSWER_FILE

Start the function with AWS_LAMBDA_RUNTIME_API=127.0.0.1:PORT. When the
function answers, ANSWER_FILE holds {"kind": "response"|"error"|"init_error",
"body": <the JSON it sent>}. A streamed response (chunked, as
lambda_runtime sends for `InvokeMode: RESPONSE_STREAM`) is appended to
ANSWER_FILE.stream chunk by chunk as it arrives, and recorded as
{"kind": "stream", "body": <the bytes as text>} when it ends. Only the
standard library: no download.
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

    def read_chunked(self):
        """The chunked body, each chunk appended to ANSWER_FILE.stream as it comes."""
        raw = b""
        with open(ANSWER_FILE + ".stream", "ab") as partial:
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    # Trailers (e.g. Lambda-Runtime-Function-Error-Type) until a blank line.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return raw
                chunk = self.rfile.read(size)
                self.rfile.readline()
                raw += chunk
                partial.write(chunk)
                partial.flush()

    def do_POST(self):
        streamed = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        if streamed:
            raw = self.read_chunked()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
        if self.path == f"/2018-06-01/runtime/invocation/{REQUEST_ID}/response":
            record("stream" if streamed else "response", raw)
        elif self.path == f"/2018-06-01/runtime/invocation/{REQUEST_ID}/error":
            record("error", raw)
        elif self.path == "/2018-06-01/runtime/init/error":
            record("init_error", raw)
        else:
            return self.reply(404)
        self.reply(202, b"{}", {"Content-Type": "application/json"})


ThreadingHTTPServer(("127.0.0.1", PORT), RuntimeApi).serve_forever()
