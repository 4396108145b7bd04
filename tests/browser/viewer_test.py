"""Browser tests of the run viewer: headless Chromium (Debian's package)
driven by Playwright for Python, against a running `baton serve` whose model
is the scripted test double (set up by `functions/baton/tests/viewer_browser.rs`,
which runs this file and fails when it fails).

Environment: BATON_VIEWER_URL (the server's root), BATON_VIEWER_TOKEN,
BATON_VIEWER_ANONYMOUS_URL (a server started without BATON_API_TOKENS),
BATON_CHROMIUM (the browser binary), BATON_BROWSER_ARTIFACTS (screenshots go
there), BATON_REPOSITORY (envelopes are read from it), BATON_MODEL_URL (the
model double's root: a scenario scripts its next answers at `/_script`).
"""

import json
import os
import re
import sys
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = os.environ["BATON_VIEWER_URL"].rstrip("/")
TOKEN = os.environ["BATON_VIEWER_TOKEN"]
ANONYMOUS_ROOT = os.environ["BATON_VIEWER_ANONYMOUS_URL"].rstrip("/")
ARTIFACTS = Path(os.environ["BATON_BROWSER_ARTIFACTS"])
REPOSITORY = Path(os.environ["BATON_REPOSITORY"])
MODEL = os.environ["BATON_MODEL_URL"].rstrip("/")
TIMEOUT_MS = 30_000


def envelope(relative):
    return json.loads((REPOSITORY / relative).read_text())


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def start_run(page, document):
    before = page.url
    page.fill("#envelope", json.dumps(document))
    page.click("#start-run")
    page.wait_for_function("(before) => location.href !== before && location.hash.startsWith('#run/')",
                           arg=before, timeout=TIMEOUT_MS)
    return page.url.split("#run/")[1]


def run_badge(page):
    return page.locator("#view h2 .badge")


def watch_a_run_complete_and_open_a_node(page):
    document = envelope("registry/examples/seed-10.1-sample-envelope.json")
    # A catalog model on the double's endpoint: the plan chooses it for every node.
    document.setdefault("constraints", {})["preferredModels"] = ["gpt-4.1-nano"]
    # A budget far above what the run needs: the header shows spend against it.
    document["constraints"]["maxCostUsd"] = 5
    run_id = start_run(page, document)
    # The sample asks a person to approve the final output (policies.hitlRequiredFor:
    # final_publish): the viewer shows the request; approving it completes the run.
    expect(run_badge(page)).to_have_text("awaiting_hitl", timeout=TIMEOUT_MS)
    approval = page.locator(".approval")
    expect(approval.locator(".operator-prompt")).to_contain_text("final_publish")
    # What is being approved, from the stored request: the node's contract
    # and the output itself.
    expect(approval.locator(".contract-summary")).to_be_visible()
    expect(approval.locator(".pending-output pre")).not_to_be_empty()
    shot(page, "01a-final-output-awaits-approval")
    approval.locator("button.approve").click()
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    # The strategist, the writer fanned out into the sample's two variants
    # (policies.variantCount), and the join.
    nodes = page.locator("svg.plan g.node")
    expect(nodes).to_have_count(4)
    for index in range(4):
        expect(nodes.nth(index)).to_have_attribute("data-status", "completed")
    expect(page.locator(".run-cost")).to_contain_text("$")
    expect(page.locator(".run-budget")).to_contain_text("of $5")
    shot(page, "01-run-completed")
    page.locator('svg.plan g.node[data-node-id="node_2_v1"]').click()
    details = page.locator(".node-details")
    expect(details).to_contain_text("ContentGenerator.copyVariants")
    expect(details.locator(".output")).to_contain_text("copyVariants")
    expect(details.locator(".cost")).to_contain_text("$0.0")
    expect(details.locator(".catalog-model")).to_have_text("gpt-4.1-nano · openai")
    expect(details.locator(".model")).to_have_text("gpt-4.1-nano")
    expect(page.locator('svg.plan g.node[data-node-id="node_2_v1"] .node-model')).to_have_text("gpt-4.1-nano")
    expect(details.locator(".input-bundle")).to_contain_text("writerBrief")
    shot(page, "02-node-details")
    # A plan drawn from its plan_generated frame (before a snapshot has the
    # plan: a race the stream can win) names each chosen model by name only.
    drawn = page.evaluate("""async () => {
        const { drawPlan } = await import('./viewer/graph.js');
        const plan = {nodes: [{nodeId: "node_1", capabilityId: "c.x", label: "Writer", model: "gpt-4.1-nano"}], edges: []};
        const svg = drawPlan(plan, {supplied: [], goals: [], statuses: {}, selected: null, onSelect: () => {}});
        return svg.querySelector('.node-model').textContent;
    }""")
    assert drawn == "gpt-4.1-nano", drawn
    # The timeline: the run, its planning and its four nodes as bars.
    page.locator(".timeline-details summary").click()
    timeline = page.locator(".timeline")
    expect(timeline.locator('li[data-kind="node"]')).to_have_count(4)
    expect(timeline.locator('li[data-kind="plan"]')).to_have_count(1)
    expect(timeline.locator('li[data-kind="run"] .bar')).to_be_visible()
    expect(timeline.locator(".correlation-id")).not_to_be_empty()
    # The run's trace id, as its frames carry it, with a copy button.
    expect(timeline.locator(".trace-id")).to_have_text(re.compile(r"^[0-9a-f]{32}$"))
    expect(timeline.locator('button[data-copies="trace-id"]')).to_be_visible()
    shot(page, "02b-timeline")
    # An agent's turns, tool calls and a wait for a person, from frames.
    spans = page.evaluate("""async () => {
        const { spansOf } = await import('./viewer/timeline.js');
        const t = (s) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`;
        const frames = [
          {type: 'start', runId: 'r', timestamp: t(0)},
          {type: 'node_start', runId: 'r', nodeId: 'n', timestamp: t(1), payload: {executorType: 'agent', attempt: 1}},
          {type: 'agent_state', runId: 'r', nodeId: 'n', timestamp: t(1), payload: {state: 'thinking', turn: 0}},
          {type: 'tool_call', runId: 'r', nodeId: 'n', timestamp: t(3), payload: {toolName: 'lookup', callId: 'c1'}},
          {type: 'tool_result', runId: 'r', nodeId: 'n', timestamp: t(4), payload: {toolName: 'lookup', callId: 'c1', result: {}}},
          {type: 'agent_state', runId: 'r', nodeId: 'n', timestamp: t(4), payload: {state: 'thinking', turn: 1}},
          {type: 'message', runId: 'r', nodeId: 'n', timestamp: t(6)},
          {type: 'other-run-frame', runId: 'child', timestamp: t(7)},
          {type: 'hitl_request', runId: 'r', timestamp: t(7)},
          {type: 'hitl_resolved', runId: 'r', timestamp: t(9)},
          {type: 'complete', runId: 'r', timestamp: t(10)},
        ];
        return spansOf(frames, 'r').map((s) => [s.kind, s.label, (s.end - s.start) / 1000]);
    }""")
    assert spans == [["run", "run", 10], ["node", "n", 9], ["model", "model turn 0", 2], ["tool", "tool lookup", 1],
                     ["model", "model turn 1", 2], ["wait", "approval", 2]], spans
    # The runs list shows the run, newest first.
    page.click("#refresh-runs")
    expect(page.locator("#runs li").first).to_have_attribute("data-run-id", run_id)
    print(f"ok: run {run_id} waited for approval of its final output, completed in the viewer; node_2_v1 shows its output and cost")


def fill_a_task_form_and_complete_the_run(page):
    run_id = start_run(page, envelope("functions/baton/tests/fixtures/human-review.json"))
    expect(run_badge(page)).to_have_text("awaiting_human", timeout=TIMEOUT_MS)
    expect(page.locator('svg.plan g.node[data-node-id="node_3"]')).to_have_attribute("data-status", "awaiting_human")
    page.click("#refresh-tasks")
    task = page.locator(f'#tasks li[data-task-id="{run_id}:node_3"]')
    task.click()
    form = page.locator("form.task-form")
    expect(form).to_be_visible()
    prefix = "$.output.positioning"
    page.fill(f'[data-path="{prefix}.positioning_summary"]', "Reliable industrial data, integrated in days.")
    page.click(f'button[data-path="{prefix}.factors[+]"]')
    page.fill(f'[data-path="{prefix}.factors[0].name"]', "reliability")
    page.fill(f'[data-path="{prefix}.factors[0].target_score"]', "42")
    # An enum is a select.
    page.select_option(f'select[data-path="{prefix}.factors[0].trend_alignment"]', label="positive")
    page.fill(f'[data-path="{prefix}.messaging_stack.core_message"]', "The partner that keeps plants running.")
    page.click(f'button[data-path="{prefix}.messaging_stack.message_pillars[+]"]')
    for field in ("pillar", "proof_point", "message"):
        page.fill(f'[data-path="{prefix}.messaging_stack.message_pillars[0].{field}"]', f"a {field}")
    page.click("button.submit-task")
    # The server's 422 lands next to the field it names.
    score_field = page.locator(f'.field:has([data-path="{prefix}.factors[0].target_score"])')
    expect(score_field.locator(".field-error")).to_contain_text("factors[0].target_score", timeout=TIMEOUT_MS)
    expect(score_field.locator(".field-error")).to_contain_text("10")
    expect(page.locator(".form-error")).to_contain_text("422")
    shot(page, "03-task-form-422")
    page.fill(f'[data-path="{prefix}.factors[0].target_score"]', "8.5")
    page.click("button.submit-task")
    page.wait_for_url(f"**/#run/{run_id}", timeout=TIMEOUT_MS)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator(".run-output")).to_contain_text("The partner that keeps plants running.")
    shot(page, "04-task-submitted-run-completed")
    print(f"ok: run {run_id} parked, its task form refused 42 next to the field, then completed")


def ask_for_a_new_visual_in_the_directors_form(page):
    """The reference workflow: a designer and a director (people) after a
    strategist and a copywriter (the model double). The director's form
    carries feedback asking for a new visual: only the designer is asked
    again, the feedback on the task; the director then approves."""
    run_id = start_run(page, envelope("functions/baton/tests/fixtures/reviewed-post.json"))
    expect(run_badge(page)).to_have_text("awaiting_human", timeout=TIMEOUT_MS)

    def open_task(node_id):
        page.click("#refresh-tasks")
        page.locator(f'#tasks li[data-task-id="{run_id}:{node_id}"]').click()
        expect(page.locator("form.task-form")).to_be_visible(timeout=TIMEOUT_MS)

    def submit_and_wait(status):
        page.click("button.submit-task")
        page.wait_for_url(f"**/#run/{run_id}", timeout=TIMEOUT_MS)
        expect(run_badge(page)).to_have_text(status, timeout=TIMEOUT_MS)

    def design(visual):
        open_task("node_3")
        page.click('button[data-path="$.output.post_visual[+]"]')
        page.fill('[data-path="$.output.post_visual[0]"]', visual)
        page.click('button[data-path="$.output.handoff_summary[+]"]')
        page.fill('[data-path="$.output.handoff_summary[0]"]', "Designer: a banner.")
        submit_and_wait("awaiting_human")

    def review(visual, feedback):
        open_task("node_4")
        # The registry names widgets for the director's facets: the copy is a
        # text area with a character count, each feedback item a card titled
        # by the facet it names; the visuals (no widget) get the generic form.
        copy = page.locator('textarea[data-path="$.output.post.copy"]')
        expect(copy).to_be_visible()
        copy.fill("Thank you, Acme Corp: 32% more efficient with us.")
        expect(page.locator('[data-widget="longText"] .char-count')).to_have_text("49 characters")
        expect(page.locator('[data-widget="cards"][data-path="$.output.feedback"]')).to_be_visible()
        expect(page.locator('input[data-path="$.output.post.visuals"]')).to_have_count(0)
        page.click('button[data-path="$.output.post.visuals[+]"]')
        page.fill('[data-path="$.output.post.visuals[0]"]', visual)
        if feedback:
            page.click('button[data-path="$.output.feedback[+]"]')
            page.fill('[data-path="$.output.feedback[0].author"]', "Director")
            page.fill('[data-path="$.output.feedback[0].facet"]', "post_visual")
            page.fill('[data-path="$.output.feedback[0].message"]', feedback)
            page.select_option('select[data-path="$.output.feedback[0].severity"]', label="major")
            expect(page.locator(".widget-card .card-title")).to_have_text("post_visual")
            shot(page, "04b-director-feedback-form")

    design("https://assets.example/banner.png")
    review("https://assets.example/banner.png", "Copy approved; the visual needs the customer's logo.")
    submit_and_wait("awaiting_human")
    # Only the designer is asked again, with the director's feedback on the task.
    open_task("node_3")
    expect(page.locator(".task-feedback")).to_contain_text("the visual needs the customer's logo")
    expect(page.locator(".task-feedback")).to_contain_text("Director")
    shot(page, "04c-designer-sees-feedback")
    page.click('button[data-path="$.output.post_visual[+]"]')
    page.fill('[data-path="$.output.post_visual[0]"]', "https://assets.example/banner-with-logo.png")
    page.click('button[data-path="$.output.handoff_summary[+]"]')
    page.fill('[data-path="$.output.handoff_summary[0]"]', "Designer: the logo is on the banner.")
    submit_and_wait("awaiting_human")
    review("https://assets.example/banner-with-logo.png", None)
    submit_and_wait("completed")
    expect(page.locator(".run-output")).to_contain_text("banner-with-logo.png")
    print(f"ok: run {run_id}: the director's feedback in the form re-ran only the designer, who saw it")


def reject_an_approval_and_fail_the_run(page):
    document = envelope("registry/examples/seed-10.1-sample-envelope.json")
    document.setdefault("policies", {})["runtime"] = [{
        "id": "gate",
        "trigger": {"kind": "onNodeComplete"},
        "action": {"type": "hitl", "rationale": "Hand the brief to the writer?"},
    }]
    run_id = start_run(page, document)
    expect(run_badge(page)).to_have_text("awaiting_hitl", timeout=TIMEOUT_MS)
    approval = page.locator(".approval")
    expect(approval.locator(".operator-prompt")).to_contain_text("Hand the brief to the writer?")
    shot(page, "05-approval-requested")
    approval.locator("input.note").fill("not this week")
    approval.locator("button.reject").click()
    expect(run_badge(page)).to_have_text("failed", timeout=TIMEOUT_MS)
    expect(page.locator(".run-failure")).to_be_visible()
    shot(page, "06-approval-rejected-run-failed")
    print(f"ok: run {run_id} asked for approval; rejected, it failed")


def show_and_verify_a_judge_transcript(page):
    request = {
        "request": {
            "id": "browser-panel", "content": "Baton runs plans one durable step at a time.",
            "criteria": ["Accuracy", "Clarity"],
            "selectedAgents": [{"id": name, "capabilities": {"systemPrompt": f"You are judge {name}."},
                                "paymentConfig": {"enabled": False}} for name in ("a", "b", "c")],
        },
        "config": {"maxDiscussionRounds": 2, "roundTimeout": 30000, "consensusAlgorithm": "simple_average",
                   "enableDiscussion": True, "convergenceThreshold": 0.5, "outlierDetection": True},
    }
    response = page.request.post(f"{ROOT}/api/v1/judge/evaluations", data=request,
                                 headers={"authorization": f"Bearer {TOKEN}", "accept": "application/json"})
    assert response.ok, response.text()
    run_id = response.headers["location"].rsplit("/", 1)[1]
    page.goto(f"{ROOT}/#run/{run_id}")
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    # The view redraws as its stream ends: open the node after that, so the
    # Verify button clicked is the one on the page.
    expect(page.locator(".stream-state")).to_have_text("ended", timeout=TIMEOUT_MS)
    page.locator("svg.plan g.node").first.click()
    transcript = page.locator(".transcript")
    expect(transcript.locator(".round")).not_to_have_count(0)
    expect(transcript.locator(".message").first).to_contain_text("hash")
    # Published to the (stand-in) consensus node: the topic and every
    # message link to the explorer, and the receipts leave the chain intact.
    topic_link = transcript.locator("a.ledger-topic")
    expect(topic_link).to_have_count(1)
    topic_href = topic_link.get_attribute("href")
    assert re.fullmatch(r"https://hashscan\.io/testnet/topic/0\.0\.\d+", topic_href), topic_href
    messages = transcript.locator(".message").count()
    expect(transcript.locator("a.ledger-tx")).to_have_count(messages)
    tx_href = transcript.locator("a.ledger-tx").first.get_attribute("href")
    assert re.fullmatch(r"https://hashscan\.io/testnet/transaction/0\.0\.1002%40\d+\.\d{9}", tx_href), tx_href
    transcript.locator("button.verify").click()
    expect(transcript.locator(".verdict")).to_have_class("verdict verified", timeout=TIMEOUT_MS)
    shot(page, "07-judge-transcript-verified")
    # The same check refuses a transcript changed by one character.
    broken = page.evaluate("""async () => {
        const { verifyTranscript } = await import('./viewer/transcript.js');
        const snapshot = await (await fetch('/api/v1/flex/runs/%s', {headers: {authorization: 'Bearer %s'}})).json();
        const output = Object.values(snapshot.nodes)[0].output;
        const evaluation = Object.values(output).find((value) => value && value.transcript);
        evaluation.transcript.rounds[0].messages[0].content += '!';
        return verifyTranscript(evaluation.transcript);
    }""" % (run_id, TOKEN))
    assert broken and broken.startswith("round 0 message 0"), broken
    print(f"ok: evaluation {run_id} transcript rendered and verified, {messages} messages linked on {topic_href}; a changed message is caught: {broken[:60]}…")


def script_model(page, behaviors):
    """The model double's next answers, in order (then schema-shaped JSON or, for
    prose, "A scripted reply.")."""
    response = page.request.post(f"{MODEL}/_script", data=behaviors)
    assert response.ok, response.text()


def plan_call(mode):
    return {"behavior": "tool_calls", "calls": [{"name": "agent_create_plan", "arguments": {
        "objective": "Write LinkedIn post variants for the launch",
        "requested_outputs": ["copyVariants"], "execution_mode": mode}}]}


def chat_with_a_tool_call_and_approve_a_drafted_plan(page):
    page.click("#new-chat")
    expect(page.locator("#view h2")).to_contain_text("Chat")
    # The sample's facet values travel with the message: the plan consumes them.
    sample = envelope("registry/examples/seed-10.1-sample-envelope.json")
    page.locator(".composer details summary").click()
    page.fill(".chat-inputs", json.dumps(sample["inputs"]))
    script_model(page, [
        {"behavior": "tool_calls", "calls": [{"name": "registry_search", "arguments": {"query": "post variants"}}]},
        plan_call("draft_only"),
        {"behavior": "content", "content": "Here is the plan: a brief, then the variants. Shall I run it?"},
    ])
    page.fill("#chat-message", "Plan LinkedIn posts for the launch, but show me the plan first.")
    page.click(".composer button.send")
    first = page.locator(".exchange").nth(0)
    expect(first.locator(".answer-text")).to_have_text("Here is the plan: a brief, then the variants. Shall I run it?",
                                                       timeout=TIMEOUT_MS)
    # The tool calls, folded: the search's result, the plan call's draft.
    search = first.locator('details.tool-call[data-tool="registry_search"]')
    expect(search).to_have_attribute("data-outcome", "ok")
    search.locator("summary").click()
    expect(search.locator(".tool-result")).to_contain_text("copyVariants")
    draft = first.locator(".plan-draft")
    expect(draft.locator("svg.plan g.node")).not_to_have_count(0)
    page.wait_for_function("() => location.hash.startsWith('#thread/')", timeout=TIMEOUT_MS)
    thread_id = page.url.split("#thread/")[1]
    expect(page.locator(f'#threads li[data-thread-id="{thread_id}"]')).to_contain_text("Plan LinkedIn posts",
                                                                                      timeout=TIMEOUT_MS)
    shot(page, "08-chat-plan-drafted")
    # Approving sends the approval as the next message; the agent runs the
    # draft (a child run, one click away), then answers.
    script_model(page, [plan_call("auto_execute")])
    draft.locator("button.approve-draft").click()
    second = page.locator(".exchange").nth(1)
    expect(second.locator(".bubble.user")).to_contain_text("Approved: run the drafted plan")
    expect(second).to_have_attribute("data-state", "answered", timeout=TIMEOUT_MS)
    expect(second.locator('details.tool-call[data-tool="agent_create_plan"]')).to_have_attribute("data-outcome", "ok")
    expect(second.locator(".answer-text")).to_have_text("A scripted reply.")
    child_link = second.locator("a.child-run-link")
    expect(child_link).to_be_visible()
    shot(page, "09-chat-plan-approved-and-run")
    # The strategy chooser: a message refused while another is answering.
    script_model(page, [{"behavior": "slow_valid", "delay_ms": 4000}])
    page.fill("#chat-message", "And a shorter variant?")
    page.click(".composer button.send")
    third = page.locator(".exchange").nth(2)
    expect(third.locator(".agent-state")).to_contain_text("thinking", timeout=TIMEOUT_MS)
    page.select_option(".composer select.strategy", "reject")
    page.fill("#chat-message", "Never mind.")
    page.click(".composer button.send")
    refused = page.locator(".exchange").nth(3)
    expect(refused).to_have_attribute("data-state", "refused", timeout=TIMEOUT_MS)
    expect(refused.locator(".exchange-error")).to_contain_text("409")
    expect(refused.locator(".exchange-error")).to_contain_text("thread_busy")
    expect(third).to_have_attribute("data-state", "answered", timeout=TIMEOUT_MS)
    shot(page, "10-chat-busy-thread-refused")
    # Opened again, the thread shows what was said, with the tool calls and
    # the draft replayed from each message's run.
    page.reload()
    expect(page.locator(".exchange")).to_have_count(3, timeout=TIMEOUT_MS)
    expect(page.locator(".exchange").nth(0).locator(".plan-draft svg.plan")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator(".exchange").nth(1).locator(".child-run-link")).to_be_visible(timeout=TIMEOUT_MS)
    # The child plan's run graph is one click away.
    page.locator(".exchange").nth(1).locator(".child-run-link").click()
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator("svg.plan g.node")).not_to_have_count(0)
    for status in page.locator("svg.plan g.node").evaluate_all("(nodes) => nodes.map((n) => n.dataset.status)"):
        assert status == "completed", status
    shot(page, "11-chat-child-run")
    print(f"ok: thread {thread_id}: a tool call, a drafted plan approved and run as a child run, a busy thread refused")


def first_string_changed(value):
    """`value` with its first string leaf changed (a correction a contract accepts)."""
    if isinstance(value, str):
        return value + " (corrected)", True
    if isinstance(value, dict):
        for key, inner in value.items():
            changed, done = first_string_changed(inner)
            if done:
                return {**value, key: changed}, True
    if isinstance(value, list):
        for index, inner in enumerate(value):
            changed, done = first_string_changed(inner)
            if done:
                return value[:index] + [changed] + value[index + 1:], True
    return value, False


def fork_a_run_from_a_node_with_a_corrected_output(page):
    document = envelope("registry/examples/seed-10.1-sample-envelope.json")
    document["policies"].pop("hitlRequiredFor", None)
    source = start_run(page, document)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator(".stream-state")).to_have_text("ended", timeout=TIMEOUT_MS)
    expect(page.locator(".fork-tree")).to_have_count(0)
    page.locator('svg.plan g.node[data-node-id="node_1"]').click()
    page.locator(".node-details button.fork-from-here").click()
    form = page.locator("form.fork-form")
    expect(form).to_contain_text("event")
    # A correction that breaks the node's contract: a 422 naming the path.
    original = json.loads(form.locator("textarea.fork-output").input_value())
    form.locator("textarea.fork-output").fill("{}")
    form.locator("button.fork-submit").click()
    expect(form.locator(".fork-error")).to_contain_text("422", timeout=TIMEOUT_MS)
    expect(form.locator(".fork-error")).to_contain_text("$.nodeOutputs.node_1")
    shot(page, "12-fork-correction-refused")
    corrected, changed = first_string_changed(original)
    assert changed, original
    form.locator("textarea.fork-output").fill(json.dumps(corrected))
    form.locator("button.fork-submit").click()
    page.wait_for_function("(source) => location.hash.startsWith('#run/') && !location.hash.endsWith(source)",
                           arg=source, timeout=TIMEOUT_MS)
    fork = page.url.split("#run/")[1]
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator("svg.plan g.node")).not_to_have_count(0)
    # The tree: the source, and the fork below it, marked as the one shown.
    tree = page.locator(".fork-tree")
    expect(tree.locator(f'li[data-run-id="{source}"] > a')).to_be_visible(timeout=TIMEOUT_MS)
    expect(tree.locator(f'li[data-run-id="{source}"] li[data-run-id="{fork}"]')).to_have_class("current")
    expect(tree).to_contain_text("eventId")
    # The corrected output is the reused node's output in the fork.
    page.locator('svg.plan g.node[data-node-id="node_1"]').click()
    expect(page.locator(".node-details .output")).to_contain_text("(corrected)")
    shot(page, "13-fork-tree")
    # From the source, the tree leads to the fork.
    tree.locator(f'li[data-run-id="{source}"] > a').click()
    expect(page.locator(f'.fork-tree li[data-run-id="{fork}"] > a')).to_be_visible(timeout=TIMEOUT_MS)
    print(f"ok: run {source} forked from node_1 with a corrected output into {fork}; a broken correction got a 422 naming its path")


def keep_pause_resume_and_delete_a_schedule(page):
    page.goto(ROOT + "/")
    page.fill("#envelope", json.dumps(envelope("registry/examples/social-post-new-case.json")))
    # A wrong expression is refused, naming the field.
    page.fill("#schedule-expression", "every morning")
    page.click("#create-schedule")
    expect(page.locator("#schedule-error")).to_contain_text("$.expression", timeout=TIMEOUT_MS)
    page.fill("#schedule-expression", "cron(0 8 ? * MON-FRI *)")
    page.fill("#schedule-timezone", "Europe/Paris")
    page.select_option("#schedule-missed", "catch_up_once")
    page.click("#create-schedule")
    item = page.locator('#schedules li[data-state]').filter(has_text="cron(0 8 ? * MON-FRI *)")
    expect(item).to_have_count(1, timeout=TIMEOUT_MS)
    expect(page.locator("#schedule-error")).to_have_text("")
    expect(item).to_have_attribute("data-state", "active")
    expect(item.locator(".next-fire")).to_contain_text("next 20")
    expect(item).to_contain_text("Europe/Paris")
    shot(page, "14-schedule-kept")
    item.locator('button[data-action="pause"]').click()
    expect(item).to_have_attribute("data-state", "paused", timeout=TIMEOUT_MS)
    expect(item.locator(".next-fire")).to_have_text("no next fire")
    shot(page, "15-schedule-paused")
    item.locator('button[data-action="resume"]').click()
    expect(item).to_have_attribute("data-state", "active", timeout=TIMEOUT_MS)
    item.locator('button[data-action="delete"]').click()
    expect(item).to_have_count(0, timeout=TIMEOUT_MS)
    print("ok: a schedule kept, refused with its path, paused, resumed and deleted")


def run_an_evaluation_and_open_an_example_run(page):
    page.goto(ROOT + "/")
    page.fill("#envelope", json.dumps(envelope("registry/examples/seed-10.0.1-stream-contract-variants.json")))
    # A wrong line is refused, naming its line and path.
    page.fill("#evaluation-dataset", '{"id": "x", "envelope": {"objective": 3}}')
    page.click("#start-evaluation")
    expect(page.locator("#evaluation-error")).to_contain_text("line 1: $.envelope.objective", timeout=TIMEOUT_MS)
    page.fill("#evaluation-name", "two variants or three")
    page.fill("#evaluation-dataset", "\n".join([
        json.dumps({"id": "as-is", "inputs": {},
                    "expect": {"assertions": [{"!!": [{"var": "copyVariants.1.callToAction"}]}]}}),
        json.dumps({"id": "needs-three", "inputs": {},
                    "expect": {"assertions": [{"!!": [{"var": "copyVariants.2"}]}]}}),
    ]))
    page.click("#start-evaluation")
    page.wait_for_function("() => location.hash.startsWith('#evaluation/')", timeout=TIMEOUT_MS)
    evaluation_id = page.url.split("#evaluation/")[1]
    expect(page.locator("#view h2 .badge")).to_have_text("completed", timeout=TIMEOUT_MS)
    expect(page.locator("#evaluation-summary")).to_contain_text("1/2 passed")
    expect(page.locator('#evaluation-examples tr[data-example="as-is"]')).to_contain_text("pass")
    failed = page.locator('#evaluation-examples tr[data-example="needs-three"]')
    expect(failed).to_contain_text("FAIL")
    expect(failed).to_contain_text("assertions[0]: does not hold")
    listed = page.locator(f'#evaluations li[data-evaluation-id="{evaluation_id}"]')
    expect(listed).to_have_attribute("data-status", "completed", timeout=TIMEOUT_MS)
    expect(listed).to_contain_text("1/2 passed")
    shot(page, "16-evaluation")
    page.locator('#evaluation-examples tr[data-example="as-is"] a').click()
    page.wait_for_function("() => location.hash.startsWith('#run/')", timeout=TIMEOUT_MS)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    shot(page, "17-evaluation-example-run")
    print(f"ok: evaluation {evaluation_id} ran in the viewer (a wrong line refused with its path): 1/2 passed, "
          "its example opened as a run")


DRAFT_OBJECTIVE = "Recommend a market positioning for Acme Analytics and the messaging stack that expresses it."
DRAFT_INPUTS = ("positioning_context.company_name: Acme Analytics\n"
                "positioning_context.company_url: https://acmeanalytics.io\n"
                "positioning_context.competing_factors: Data reliability, Ease of integration")


def draft_an_envelope_in_three_messages_and_run_it(page):
    page.goto(ROOT + "/")
    page.click("#open-sandbox")
    stage = page.locator("#draft-stage")
    expect(stage).to_have_attribute("data-stage", "needs_objective", timeout=TIMEOUT_MS)
    builder = page.locator('#draft-log li[data-role="builder"]')
    expect(builder.first).to_contain_text("What should the run produce")

    def say(text, wanted_stage):
        page.fill("#draft-message", text)
        page.click("#draft-send")
        expect(stage).to_have_attribute("data-stage", wanted_stage, timeout=TIMEOUT_MS)

    say(DRAFT_OBJECTIVE, "needs_inputs")
    expect(builder.last).to_contain_text("company_name (required)")
    say(DRAFT_INPUTS, "awaiting_confirmation")
    expect(page.locator("#draft-envelope svg.plan g.node")).to_have_count(2)
    expect(page.locator("#draft-use")).to_be_hidden()
    say("yes", "ready")
    expect(page.locator('#draft-log li[data-role="you"]')).to_have_count(3)
    expect(page.locator("#draft-problems li")).to_have_count(0)
    shot(page, "18-sandbox-envelope-ready")
    page.click("#draft-use")
    drafted = json.loads(page.input_value("#envelope"))
    assert drafted["inputs"]["positioning_context"]["competing_factors"] == [
        "Data reliability", "Ease of integration"], drafted
    assert drafted["outputContract"]["schema"]["required"] == ["messaging_stack", "positioning_recommendation"], drafted
    before = page.url
    page.click("#start-run")
    page.wait_for_function("(before) => location.href !== before && location.hash.startsWith('#run/')",
                           arg=before, timeout=TIMEOUT_MS)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    shot(page, "19-sandbox-envelope-run")
    print("ok: an envelope drafted in three messages in the sandbox (its plan drawn), then run to completion")


def use_a_server_without_tokens_without_being_asked_for_one(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(ANONYMOUS_ROOT + "/")
    document = envelope("registry/examples/seed-10.1-sample-envelope.json")
    # Not about the approval gate: without it the run ends by itself.
    document["policies"].pop("hitlRequiredFor", None)
    run_id = start_run(page, document)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    page.click("#refresh-runs")
    expect(page.locator(f'#runs li[data-run-id="{run_id}"]')).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#token-form")).to_be_hidden()
    shot(page, "00-anonymous-server-no-token-asked")
    # This server has the developer sandbox off: the page says so.
    page.click("#open-sandbox")
    expect(page.locator("#sandbox-off")).to_contain_text("BATON_SANDBOX=on", timeout=TIMEOUT_MS)
    page.close()
    print("ok: a server without tokens is used without a token form (its sandbox off, as the page says)")


def remember_a_runs_tone_then_search_open_and_delete_it(page):
    document = envelope("registry/examples/seed-10.1-sample-envelope.json")
    document.setdefault("constraints", {})["preferredModels"] = ["gpt-4.1-nano"]
    # The writer capability remembers the tone it worked with, once the run completes.
    document["memory"] = {"rememberTo": ["client", "viewer", "tone"]}
    run_id = start_run(page, document)
    expect(run_badge(page)).to_have_text("awaiting_hitl", timeout=TIMEOUT_MS)
    page.locator(".approval button.approve").click()
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    # The run remembers in a step after its completion: list until it shows.
    page.fill("#memory-prefix", "client/viewer")
    item = page.locator('#memory-items li[data-key="toneOfVoice"]')
    for _ in range(60):
        page.click("#list-memory")
        page.wait_for_timeout(250)
        if item.count() == 1:
            break
    expect(item).to_have_count(1)
    expect(item).to_have_attribute("data-namespace", "client/viewer/tone")
    expect(item.locator(".memory-text")).to_contain_text("confident")
    expect(item.locator("a.memory-run")).to_contain_text(run_id)
    shot(page, "22-memory-listed")
    # Search the listed namespaces: the tone is found by its words.
    page.fill("#memory-query", "supportive tone")
    page.click("#search-memory")
    expect(item.locator(".hint").first).to_contain_text("lexical", timeout=TIMEOUT_MS)
    expect(page.locator("#memory-error")).to_have_text("")
    shot(page, "23-memory-searched")
    # Open the run that wrote it.
    item.locator("a.memory-run").click()
    page.wait_for_function("(run) => location.hash === '#run/' + run", arg=run_id, timeout=TIMEOUT_MS)
    expect(run_badge(page)).to_have_text("completed", timeout=TIMEOUT_MS)
    # Delete it: the namespace is empty again.
    item.locator('button[data-action="delete"]').click()
    expect(item).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator("#memory-items")).to_contain_text("no items")
    shot(page, "24-memory-deleted")
    print(f"ok: run {run_id} remembered its tone; listed, searched, its run opened, deleted")


def main():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=os.environ["BATON_CHROMIUM"], headless=True,
                                             args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda message: print(f"[console] {message.type}: {message.text}", file=sys.stderr))
        page.on("pageerror", lambda error: print(f"[pageerror] {error}", file=sys.stderr))
        use_a_server_without_tokens_without_being_asked_for_one(browser)
        page.goto(ROOT + "/")
        # This server has tokens: the form shows once a request was refused.
        expect(page.locator("#token-form")).to_be_visible(timeout=TIMEOUT_MS)
        expect(page.locator("#token-state")).to_have_text("this server asks for a token")
        page.fill("#token", TOKEN)
        page.click("#token-form button")
        expect(page.locator("#token-state")).to_have_text("token set")
        for scenario in (watch_a_run_complete_and_open_a_node, fill_a_task_form_and_complete_the_run,
                         ask_for_a_new_visual_in_the_directors_form,
                         reject_an_approval_and_fail_the_run, show_and_verify_a_judge_transcript,
                         chat_with_a_tool_call_and_approve_a_drafted_plan,
                         fork_a_run_from_a_node_with_a_corrected_output,
                         keep_pause_resume_and_delete_a_schedule,
                         run_an_evaluation_and_open_an_example_run,
                         draft_an_envelope_in_three_messages_and_run_it,
                         remember_a_runs_tone_then_search_open_and_delete_it):
            try:
                scenario(page)
            except Exception:
                shot(page, f"failed-{scenario.__name__}")
                raise
        browser.close()


if __name__ == "__main__":
    main()
