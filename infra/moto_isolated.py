"""Runs the moto server (emulated DynamoDB + SQS) with DynamoDB requests serialized.

moto's server handles requests on threads and applies TransactWriteItems item by item with no
isolation from concurrent requests, so two concurrent conditional transactions can both pass
their conditions. Real DynamoDB isolates transactions (the loser gets TransactionCanceled).
This launcher serializes DynamoDB requests behind one lock, which gives Baton's tests and local
runs DynamoDB's semantics; SQS requests (long polls included) stay concurrent.

    python3 infra/moto_isolated.py PORT
"""

import sys
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

dynamodb_lock = threading.Lock()


class SerializeDynamoDB:
    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("DynamoDB_"):
            return self.application(environ, start_response)
        with dynamodb_lock:
            # Materialize the body inside the lock: the request is fully handled here.
            return list(self.application(environ, start_response))


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4566
    application = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
    run_simple("127.0.0.1", port, application, threaded=True, use_reloader=False)


if __name__ == "__main__":
    main()
