"""Baton's MCP server driven by the official `mcp` Python SDK (a client no
one here wrote), over stdio (`baton mcp`, spawned by the SDK) and over
Streamable HTTP (`/mcp` of a running `baton serve`, with its bearer token).
Run by `functions/baton/tests/mcp_server.rs`, which starts the model double
and the server and fails when this fails.

Environment: BATON_BINARY, BATON_REPOSITORY, BATON_MCP_URL, BATON_MCP_TOKEN,
BATON_MCP_READER_TOKEN (a token holding `runs:read` only),
BATON_ENVELOPE (an envelope file), BATON_MODEL_BASE_URL (the model double's
OpenAI-compatible base URL, for the stdio server).
"""

import asyncio
import json
import os

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

ENVELOPE = json.loads(open(os.environ["BATON_ENVELOPE"]).read())
TOOLS = ["answer_task", "get_run", "list_capabilities", "list_tasks", "memory_put",
         "memory_search", "plan", "send_chat_message", "start_run"]


async def exercise(session, transport):
    await session.initialize()
    listed = await session.list_tools()
    names = sorted(tool.name for tool in listed.tools)
    assert names == TOOLS, names
    start = next(tool for tool in listed.tools if tool.name == "start_run")
    assert "envelope" in start.input_schema["properties"], start.input_schema
    assert "objective" in json.dumps(start.input_schema), "the envelope's own schema"

    progress = []

    async def on_progress(value, total, message):
        progress.append(message)

    result = await session.call_tool("start_run", {"envelope": ENVELOPE}, progress_callback=on_progress)
    assert not result.is_error, result
    answer = result.structured_content
    assert answer["status"] == "completed", answer
    assert answer["output"]["copyVariants"], answer
    assert any(line.startswith("plan_generated") for line in progress), progress
    assert progress[-1].startswith("complete"), progress

    snapshot = await session.call_tool("get_run", {"runId": answer["runId"]})
    assert snapshot.structured_content["run"]["status"] == "completed", snapshot

    planned = await session.call_tool("plan", {"envelope": ENVELOPE})
    assert planned.structured_content["rejected"] is False, planned
    assert planned.structured_content["plan"]["nodes"], planned

    capabilities = await session.call_tool("list_capabilities", {})
    assert capabilities.structured_content["capabilities"], capabilities

    # Memory across runs: an item kept, then found by a query sharing its words.
    namespace = ["client", f"mcp-{transport}", "tone"]
    kept = await session.call_tool("memory_put", {"namespace": namespace, "key": "voice",
                                                   "value": "Warm and plain, never shouting"})
    assert not kept.is_error, kept
    await session.call_tool("memory_put", {"namespace": namespace, "key": "palette",
                                           "value": "Navy and white"})
    found = await session.call_tool("memory_search", {"namespaces": [namespace],
                                                      "query": "a warm tone of voice"})
    assert found.structured_content["found"][0]["item"]["key"] == "voice", found
    wrong = await session.call_tool("memory_put", {"namespace": [], "key": "k", "value": 1})
    assert wrong.is_error and wrong.structured_content["details"]["path"] == "$.namespace", wrong

    # A bad argument is a tool error naming its JSON path.
    broken = dict(ENVELOPE)
    broken["objective"] = 42
    refused = await session.call_tool("start_run", {"envelope": broken})
    assert refused.is_error, refused
    assert refused.structured_content["details"]["path"] == "$.objective", refused.structured_content
    print(f"ok: {transport}: {len(names)} tools listed; a run started with {len(progress)} progress "
          f"notifications, completed with its output; plan, get_run, list_capabilities, memory_put "
          f"and memory_search answered; "
          f"a bad envelope refused at $.objective")


async def a_parked_run(session):
    """A run that waits for a person answers with its task; the task is
    listed, and an answer breaking the node's contract is refused."""
    parked = json.loads(open(os.path.join(os.environ["BATON_REPOSITORY"],
                                          "functions/baton/tests/fixtures/human-review.json")).read())
    result = await session.call_tool("start_run", {"envelope": parked})
    answer = result.structured_content
    assert answer["status"] == "awaiting_human", answer
    task = answer["tasks"][0]
    listed = await session.call_tool("list_tasks", {})
    assert any(item["taskId"] == task["taskId"] for item in listed.structured_content["tasks"]), listed
    wrong = await session.call_tool("answer_task", {"runId": task["runId"], "nodeId": task["nodeId"],
                                                    "expectedPlanVersion": task["planVersion"],
                                                    "output": {"positioning": "not an object"}})
    assert wrong.is_error, wrong
    assert "output_contract_violated" in wrong.structured_content["error"], wrong.structured_content
    print(f"ok: streamable HTTP: a parked run answered with its task {task['taskId']}; "
          "an answer breaking the contract refused")


async def over_stdio():
    environment = dict(os.environ)
    environment["BATON_LLM_BASE_URL"] = os.environ["BATON_MODEL_BASE_URL"]
    environment["BATON_LLM_MODEL"] = "gpt-4o-mini"
    server = StdioServerParameters(command=os.environ["BATON_BINARY"], args=["mcp", "--store", "memory"],
                                   env=environment, cwd=os.environ["BATON_REPOSITORY"])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, "stdio")


async def over_http():
    headers = {"Authorization": f"Bearer {os.environ['BATON_MCP_TOKEN']}"}
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(os.environ["BATON_MCP_URL"], http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session, "streamable HTTP")
                await a_parked_run(session)
    # A token holding `runs:read` only: it reads, and starting a run is
    # refused naming the scope it needs.
    reader = {"Authorization": f"Bearer {os.environ['BATON_MCP_READER_TOKEN']}"}
    async with create_mcp_http_client(headers=reader) as http:
        async with streamable_http_client(os.environ["BATON_MCP_URL"], http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                capabilities = await session.call_tool("list_capabilities", {})
                assert not capabilities.is_error, capabilities
                refused = await session.call_tool("start_run", {"envelope": ENVELOPE})
                assert refused.is_error, refused
                details = refused.structured_content["details"]
                assert details == {"code": "missing_scope", "scope": "runs:write"}, details
                assert "runs:write" in refused.content[0].text, refused.content
    print("ok: a tool needing a scope the token lacks is refused, naming the scope")
    # Without the token: refused before any tool runs.
    async with create_mcp_http_client() as http:
        try:
            async with streamable_http_client(os.environ["BATON_MCP_URL"], http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
            raise AssertionError("a session without a token was served")
        except AssertionError:
            raise
        except BaseException:  # the SDK raises on the 401
            print("ok: streamable HTTP without a token is refused")


asyncio.run(over_stdio())
asyncio.run(over_http())
