"""Runs the moto server (emulated DynamoDB + SQS) with DynamoDB requests serialized.

moto's server handles requests on threads and applies TransactWriteItems item by item with no
isolation from concurrent requests, so two concurrent conditional transactions can both pass
their conditions. Real DynamoDB isolates transactions (the loser gets TransactionCanceled).
This launcher serializes DynamoDB requests behind one lock, which gives Baton's tests and local
runs DynamoDB's semantics; SQS requests (long polls included) stay concurrent.

moto also deep-copies every table a transaction names, once per item, to roll back a cancelled
transaction: each commit then costs in proportion to everything stored, and a thousand runs
exhaust the machine. Under the lock above nothing else touches the tables during a transaction,
so this launcher snapshots only the items the transaction names and puts them back if it is
cancelled, which is the same rollback at the cost of the items written.

And moto answers every Query by sorting every item of the table first (`Table.all_items`), then
keeping the partition asked for: a query costs in proportion to the table, so a thousand runs
slow down quadratically. Query sorts what it keeps anyway, so this launcher hands it only the
candidates: the partition's items for a table query, the items whose index hash attributes
match for an index query (a pass over the table, without the sort).

    python3 infra/moto_isolated.py PORT
"""

import copy
import sys
import threading
import time

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
import moto.sqs.models as sqs_models
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


class _CopyWithoutTables:
    """moto's `copy` module as its DynamoDB backend sees it, with tables copied by reference."""

    def __getattr__(self, name):
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value, memo=None):
        if isinstance(value, Table):
            return value
        return copy.deepcopy(value, memo)


_moto_transact_write_items = DynamoDBBackend.transact_write_items


def _item_key(table, operation):
    attributes = operation.get("Item") if "Item" in operation else operation.get("Key")
    if not isinstance(attributes, dict):
        return None
    try:
        hash_value, range_value = DynamoDBBackend.get_keys_value(None, table, attributes)
    except Exception:
        return None
    return hash_value, range_value


def _restore(table, hash_value, range_value, snapshot):
    if range_value is not None:
        if snapshot is None:
            table.items.get(hash_value, {}).pop(range_value, None)
        else:
            table.items[hash_value][range_value] = snapshot
    elif snapshot is None:
        table.items.pop(hash_value, None)
    else:
        table.items[hash_value] = snapshot


def transact_write_items_with_item_snapshots(self, transact_items):
    snapshots = []
    for entry in transact_items if isinstance(transact_items, list) else []:
        if not isinstance(entry, dict) or not entry:
            continue
        _, operation = next(iter(entry.items()))
        table = self.tables.get(operation.get("TableName")) if isinstance(operation, dict) else None
        key = _item_key(table, operation) if table is not None else None
        if key is None:
            continue
        current = table.get_item(*key)
        snapshots.append((table, key[0], key[1], copy.deepcopy(current)))
    try:
        return _moto_transact_write_items(self, transact_items)
    except BaseException:
        for table, hash_value, range_value, snapshot in reversed(snapshots):
            _restore(table, hash_value, range_value, snapshot)
        raise


_moto_query = Table.query


def _equal(attribute, value):
    return attribute is not None and attribute == value


def _query_candidates(table, hash_key, index_name, hash_key_conditions):
    if index_name is None:
        partition = table.items.get(hash_key) if hash_key is not None else None
        if partition is None:
            return []
        return list(partition.values()) if table.range_key_attr else [partition]
    conditions = list(hash_key_conditions or [])
    candidates = []
    for hash_set in table.items.values():
        for item in hash_set.values() if table.range_key_attr else [hash_set]:
            if all(_equal(item.attrs.get(name), value) for name, value in conditions):
                candidates.append(item)
    return candidates


def query_over_candidates(self, hash_key, *args, **kwargs):
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    conditions = kwargs.get("hash_key_conditions")
    readable = conditions and all(value is not None for _, value in conditions)
    if index_name is not None and not readable:
        return _moto_query(self, hash_key, *args, **kwargs)
    candidates = _query_candidates(self, hash_key, index_name, conditions)
    self.all_items = lambda: candidates
    try:
        return _moto_query(self, hash_key, *args, **kwargs)
    finally:
        del self.all_items


_moto_unix_time_millis = sqs_models.unix_time_millis


def unix_time_millis(dt=None):
    return time.time() * 1000.0 if dt is None else _moto_unix_time_millis(dt)


sqs_models.unix_time_millis = unix_time_millis
dynamodb_models.copy = _CopyWithoutTables()
Table.query = query_over_candidates
DynamoDBBackend.transact_write_items = transact_write_items_with_item_snapshots


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4566
    application = SerializeDynamoDB(DomainDispatcherApplication(create_backend_app))
    run_simple("127.0.0.1", port, application, threaded=True, use_reloader=False)


if __name__ == "__main__":
    main()
