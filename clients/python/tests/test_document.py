"""The client cannot drift from the server: its operation table matches
`docs/openapi.json` (every operation, verb, path and answer model), and its
models are what the pinned generator makes of the document today."""

import json
import pathlib
import subprocess

from baton_client import models
from baton_client.operations import NOT_CALLED, OPERATIONS

ROOT = pathlib.Path(__file__).resolve().parents[3]
DOCUMENT = json.loads((ROOT / "docs/openapi.json").read_text())


def test_every_operation_of_the_document_is_in_the_client_as_the_document_says():
    documented = {}
    for path, operations in DOCUMENT["paths"].items():
        for method, operation in operations.items():
            documented[operation["operationId"]] = (method, path, operation)
    assert set(OPERATIONS) | NOT_CALLED == set(documented), set(documented) ^ (set(OPERATIONS) | NOT_CALLED)
    for operation_id, operation in OPERATIONS.items():
        method, path, spec = documented[operation_id]
        assert (operation.method, operation.path) == (method, path), operation_id
        answers = [content for status, answer in spec["responses"].items() if status.startswith("2")
                   for content in answer.get("content", {}).values()]
        references = {answer.get("schema", {}).get("$ref", "").split("/")[-1] for answer in answers}
        if operation.answer is not None:
            assert references == {operation.answer.__name__}, (operation_id, references)


def test_each_operation_has_a_method_of_its_name_on_both_clients():
    from baton_client import AsyncBatonClient, BatonClient
    for operation_id in OPERATIONS:
        name = "".join("_" + c.lower() if c.isupper() else c for c in operation_id)
        assert hasattr(BatonClient, name), name
        assert hasattr(AsyncBatonClient, name), name


def test_the_models_are_what_the_generator_makes_of_the_document(tmp_path):
    generated = tmp_path / "models.py"
    subprocess.run(["bash", str(ROOT / "clients/python/generate_models.sh"), str(generated)],
                   check=True)
    checked_in = pathlib.Path(models.__file__).read_text()
    assert generated.read_text() == checked_in, (
        "baton_client/models.py is stale: run clients/python/generate_models.sh")
