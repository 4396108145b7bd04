"""The client against a live `baton serve` (started by
`functions/baton/tests/typed_clients.rs`, with the LLM endpoint's test
double): runs streamed to their end, typed errors with the JSON path, a
parked run answered, and event streams resumed with `Last-Event-ID` after a
proxy cuts the connection mid-run.

Environment: BATON_URL (the server's root), BATON_TOKEN, BATON_ENVELOPE,
BATON_PARKED_ENVELOPE (envelope files)."""

import asyncio
import json
import os
import socket
import threading

import pytest

from baton_client import AsyncBatonClient, BatonApiError, BatonClient, status_text

URL = os.environ.get("BATON_URL")
pytestmark = pytest.mark.skipif(not URL, reason="BATON_URL names no live server")


def envelope(variable="BATON_ENVELOPE"):
    return json.loads(open(os.environ[variable]).read())


class CuttingProxy:
    """A TCP proxy in front of the server (a stand-in for a network that
    drops): the first connection, when it is an event stream, is cut after `cut_after`
    bytes of its answer; it records every request's head."""

    def __init__(self, upstream: str, cut_after: int):
        host, port = upstream.split("//")[1].split(":")
        self.upstream = (host, int(port))
        self.cut_after = cut_after
        self.heads: list[str] = []
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            client, _ = self.listener.accept()
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        server = socket.create_connection(self.upstream)
        head = client.recv(65536)
        self.heads.append(head.decode(errors="replace"))
        cut = b"/events" in head.split(b"\r\n")[0] and self.cuts == 0
        if cut:
            self.cuts += 1
        server.sendall(head)
        threading.Thread(target=self._pipe, args=(client, server, None), daemon=True).start()
        self._pipe(server, client, self.cut_after if cut else None)

    @staticmethod
    def _pipe(source, target, limit):
        sent = 0
        try:
            while True:
                data = source.recv(4096)
                if not data:
                    break
                if limit is not None and sent + len(data) >= limit:
                    target.sendall(data[: limit - sent])
                    break
                target.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for end in (source, target):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            end.close()


def assert_whole_stream(frames):
    ids = [frame.id for frame in frames if frame.id is not None]
    assert ids == list(range(ids[0], ids[0] + len(ids))), f"no frame twice, none lost: {ids}"
    assert frames[-1].event == "complete", [frame.event for frame in frames]


def test_a_run_streams_to_its_validated_output():
    with BatonClient(URL, os.environ["BATON_TOKEN"], user="ada") as client:
        accepted = client.submit_run(envelope())
        frames = list(client.stream_run_events(accepted.run_id))
        assert_whole_stream(frames)
        snapshot = client.get_run(accepted.run_id)
        assert status_text(snapshot.run.status) == "completed"
        assert snapshot.output["copyVariants"], snapshot.output
        listed = client.list_runs(status="completed")
        assert any(run.run_id == accepted.run_id for run in listed.runs)
        assert client.list_capabilities().capabilities


def test_a_refusal_is_a_typed_error_naming_the_json_path():
    broken = envelope()
    broken["objective"] = 42
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        with pytest.raises(BatonApiError) as refused:
            client.submit_run(broken)
        assert refused.value.status in (400, 422)
        assert refused.value.path == "$.objective", refused.value.details
        assert not refused.value.retryable
        with pytest.raises(BatonApiError) as missing:
            client.get_run("run-of-nobody")
        assert missing.value.status == 404 and missing.value.code == "run_not_found"
    with BatonClient(URL, "not-a-token") as client:
        with pytest.raises(BatonApiError) as unauthorized:
            client.list_runs()
        assert unauthorized.value.status == 401


def test_a_parked_run_is_answered_through_the_typed_models():
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        accepted = client.submit_run(envelope("BATON_PARKED_ENVELOPE"))
        frames = list(client.stream_run_events(accepted.run_id))
        assert status_text(client.get_run(accepted.run_id).run.status) == "awaiting_human", \
            [frame.event for frame in frames]
        task = next(task for task in client.list_tasks().tasks if task.run_id == accepted.run_id)
        with pytest.raises(BatonApiError) as refused:
            client.resume_run({"taskId": task.task_id, "expectedPlanVersion": task.plan_version,
                               "output": {"positioning": 7}})
        assert refused.value.status == 422
        assert any(error["path"] == "$.output.positioning"
                   for error in refused.value.details["errors"]), refused.value.details
        cancelled = client.cancel_run(accepted.run_id)
        assert status_text(cancelled.status) == "cancelled"


def test_a_stream_cut_mid_run_resumes_with_last_event_id():
    proxy = CuttingProxy(URL, cut_after=2500)
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as direct:
        accepted = direct.submit_run(envelope())
    # Through the proxy: the event stream is its first request.
    with BatonClient(proxy.url, os.environ["BATON_TOKEN"], reconnect_delay=0.1) as client:
        frames = list(client.stream_run_events(accepted.run_id))
    assert proxy.cuts == 1
    streams = [head for head in proxy.heads if "/events" in head.split("\r\n")[0]]
    assert len(streams) >= 2, proxy.heads
    assert "last-event-id:" in streams[1].lower(), streams[1]
    assert_whole_stream(frames)


def test_the_async_client_streams_and_resumes_too():
    async def scenario():
        proxy = CuttingProxy(URL, cut_after=2500)
        async with AsyncBatonClient(URL, os.environ["BATON_TOKEN"]) as direct:
            accepted = await direct.submit_run(envelope())
        async with AsyncBatonClient(proxy.url, os.environ["BATON_TOKEN"],
                                    reconnect_delay=0.1) as client:
            frames = [frame async for frame in client.stream_run_events(accepted.run_id)]
            snapshot = await client.get_run(accepted.run_id)
        assert proxy.cuts == 1
        assert_whole_stream(frames)
        assert status_text(snapshot.run.status) == "completed"

    asyncio.run(scenario())


DRAFT = [
    "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it.",
    "positioning_context.company_name: Acme Analytics\n"
    "positioning_context.company_url: https://acmeanalytics.io",
    "yes",
]


def test_the_sandbox_drafts_an_envelope_that_then_runs():
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        metadata = client.get_sandbox_metadata()
        assert any(facet.name == "positioning_context" for facet in metadata.facets)
        turn = client.draft_envelope([{"role": "user", "content": text} for text in DRAFT])
        assert turn.ready, turn.reply
        accepted = client.submit_run(turn.envelope)
        assert accepted.run_id
        with pytest.raises(BatonApiError) as refused:
            client.draft_envelope([{"role": "someone", "content": "hi"}])
        assert refused.value.status == 422 and refused.value.path == "$.messages[0].role"


def test_a_schedule_is_kept_paused_resumed_and_deleted():
    request = {"expression": "cron(0 8 ? * MON-FRI *)", "timezone": "Europe/Paris",
               "envelope": envelope(), "missedFires": "catch_up_once"}
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        schedule = client.create_schedule(request)
        assert schedule.expression == "cron(0 8 ? * MON-FRI *)"
        assert schedule.next_fire_at, schedule
        listed = client.list_schedules()
        assert any(kept.schedule_id == schedule.schedule_id for kept in listed.schedules)
        assert status_text(client.pause_schedule(schedule.schedule_id).state) == "paused"
        assert client.get_schedule(schedule.schedule_id).next_fire_at is None
        assert client.resume_schedule(schedule.schedule_id).next_fire_at
        assert client.delete_schedule(schedule.schedule_id) is None
        with pytest.raises(BatonApiError) as gone:
            client.get_schedule(schedule.schedule_id)
        assert gone.value.status == 404 and gone.value.code == "schedule_not_found"
        with pytest.raises(BatonApiError) as refused:
            client.create_schedule(dict(request, expression="every morning"))
        assert refused.value.status == 422 and refused.value.path == "$.expression"


def test_a_dataset_evaluation_runs_on_the_server():
    import time

    dataset = [{"id": "as-is", "inputs": {}},
               {"id": "needs-three", "inputs": {},
                "expect": {"assertions": [{"!!": [{"var": "copyVariants.2"}]}]}}]
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        started = client.create_dataset_evaluation(
            {"name": "live", "template": envelope(), "dataset": dataset})
        assert status_text(started.status) == "running"
        for _ in range(600):
            record = client.get_dataset_evaluation(started.evaluation_id)
            if status_text(record.status) == "completed":
                break
            time.sleep(0.1)
        assert (record.passed, record.total) == (1, 2), record
        assert [result.id for result in record.results] == ["as-is", "needs-three"]
        listed = client.list_dataset_evaluations()
        assert any(kept.evaluation_id == started.evaluation_id for kept in listed.evaluations)
        with pytest.raises(BatonApiError) as refused:
            client.create_dataset_evaluation({"dataset": [{"id": "x", "envelope": {"objective": 3}}]})
        assert refused.value.status == 422 and refused.value.path == "$.dataset[0].envelope.objective"


def test_a_thread_is_read_by_pages_from_its_newest_end():
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        thread_id = None
        for index in range(1, 4):
            request = {"message": f"message {index}"}
            if thread_id:
                request["threadId"] = thread_id
            frames = list(client.send_chat_message(request))
            assert frames[-1].event == "complete", [frame.event for frame in frames]
            if thread_id is None:
                thread_id = client.get_run(frames[0].data["runId"]).run.thread_id
        newest = client.get_thread(thread_id, limit=2)
        assert [exchange.user for exchange in newest.exchanges] == ["message 2", "message 3"]
        assert newest.older_cursor
        oldest = client.get_thread(thread_id, limit=2, before=newest.older_cursor)
        assert [exchange.user for exchange in oldest.exchanges] == ["message 1"]
        assert oldest.older_cursor is None


def test_memory_is_kept_searched_and_forgotten():
    namespace = ["client", "typed", "tone"]
    with BatonClient(URL, os.environ["BATON_TOKEN"]) as client:
        kept = client.put_memory_item(
            {"namespace": namespace, "key": "voice", "value": "Warm and plain, never shouting"})
        assert kept.key == "voice" and kept.text == "Warm and plain, never shouting"
        client.put_memory_item({"namespace": namespace, "key": "colours", "value": "Navy and white"})
        found = client.search_memory([namespace], "a warm tone of voice")
        assert found.found[0].item.key == "voice", found
        listed = client.list_memory_items(["client", "typed"])
        assert [item.key for item in listed.items] == ["colours", "voice"]
        client.delete_memory_item(namespace, "colours")
        with pytest.raises(BatonApiError) as gone:
            client.get_memory_item(namespace, "colours")
        assert gone.value.status == 404 and gone.value.code == "memory_item_not_found"
        assert client.forget_memory(prefix=["client", "typed"]).deleted == 1
        with pytest.raises(BatonApiError) as refused:
            client.put_memory_item({"namespace": [], "key": "k", "value": 1})
        assert refused.value.status == 422 and refused.value.path == "$.namespace"
