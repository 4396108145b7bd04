//! The `agent_create_plan` meta-tool in a chat, in its three modes, on the
//! step engine: `auto_execute` runs a child run (its frames carry
//! `parentRunId`; its summary is the call's result); `draft_only` shows a
//! plan and keeps it until the person's next message approves it;
//! `agent_review` runs only what a reviewer approves. The model is a test
//! double: scripted chat turns, schema-shaped node answers, scripted
//! reviewer verdicts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use baton_core::basics::ids::RunKey;
use baton_runtime::ports::OutboxStore;
use baton_runtime::ports::RunLog;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::catalog::registry::{Registry, RegistryDocument};
use baton_core::contracts::facet::{Facet, FacetDirection};
use baton_core::records::conversation::{SessionAnswer, SessionTurn, ToolCallRequest, ToolSession};
use baton_core::state::context::ModelRequest;
use baton_core::state::run::{RunStatus, TokenUsage};
use baton_core::wire::event::{EventFrame, EventType};
use baton_runtime::error::LlmError;
use baton_runtime::memory::{InMemoryRunStore, InMemoryStepQueue};
use baton_runtime::ports::{LlmProvider, ModelAnswer, ModelDelta, StepQueue};
use baton_runtime::services::{ChatRequest, Services};
use baton_runtime::workers::LocalRunner;
use baton_test_support::{TestServices, assert_frames_match_schemas, repository_path};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

/// Test double for the model endpoint.
#[derive(Default)]
struct PlanningModel {
    /// The chat agent's turns, in order.
    chat_turns: Mutex<VecDeque<SessionAnswer>>,
    /// The reviewer's verdicts, in order.
    verdicts: Mutex<VecDeque<Value>>,
    /// Each chat turn's request and session.
    seen: Mutex<Vec<(ModelRequest, ToolSession)>>,
    node_calls: Mutex<usize>,
    /// When set, every node's facets carry this `text`.
    node_text: Mutex<Option<String>>,
}

#[async_trait]
impl LlmProvider for PlanningModel {
    fn model_name(&self) -> String {
        "planning-double".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<ModelAnswer, LlmError> {
        let content = if request.schema_name == "plan_review" {
            self.verdicts.lock().unwrap().pop_front().unwrap()
        } else {
            *self.node_calls.lock().unwrap() += 1;
            let mut answer = scripted_llm::generate_instance(&request.output_schema, "answer");
            // Each facet's `text`, when a length is asked for.
            if let Some(text) = self.node_text.lock().unwrap().clone()
                && let Some(facets) = answer.as_object_mut()
            {
                for facet in facets.values_mut() {
                    if let Some(field) = facet.get_mut("text") {
                        *field = json!(text);
                    }
                }
            }
            answer
        };
        Ok(ModelAnswer {
            content: content.to_string(),
            usage: TokenUsage {
                prompt_tokens: 5,
                completion_tokens: 5,
                cached_prompt_tokens: 0,
                cache_write_prompt_tokens: 0,
            },
            model: "planning-double".into(),
        })
    }

    async fn converse(
        &self,
        request: &ModelRequest,
        session: &ToolSession,
        _deltas: UnboundedSender<ModelDelta>,
    ) -> Result<SessionAnswer, LlmError> {
        self.seen
            .lock()
            .unwrap()
            .push((request.clone(), session.clone()));
        Ok(self
            .chat_turns
            .lock()
            .unwrap()
            .pop_front()
            .expect("a scripted chat turn"))
    }
}

fn plan_call(arguments: Value) -> SessionAnswer {
    SessionAnswer {
        content: String::new(),
        tool_calls: vec![ToolCallRequest {
            id: "call_plan".into(),
            name: "agent_create_plan".into(),
            arguments: arguments.to_string(),
        }],
        usage: TokenUsage::default(),
        model: "planning-double".into(),
    }
}

fn text(content: &str) -> SessionAnswer {
    SessionAnswer {
        content: content.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::default(),
        model: "planning-double".into(),
    }
}

/// Two steps of work needing no input: an outline, then a summary of it.
fn registry() -> Arc<Registry> {
    let mut registry = Registry::default();
    for (name, direction) in [
        ("outline", FacetDirection::Bidirectional),
        ("summary", FacetDirection::Output),
    ] {
        registry
            .add_facet(
                Facet {
                    name: name.into(),
                    title: name.into(),
                    description: format!("the {name}"),
                    schema: json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}),
                    semantics: String::new(),
                    direction,
                    required_by_default: true,
                    drives_revisions: false,
                    merge: Default::default(),
                    widget: None,
                    metadata: serde_json::Map::new(),
                },
                "test",
            )
            .unwrap();
    }
    let tool =
        std::fs::read_to_string(repository_path("registry/tools/agent_create_plan.json")).unwrap();
    let mut tool: serde_json::Value = serde_json::from_str(&tool).unwrap();
    // The file's `$schema` is for editors; the registry loader drops it too.
    tool.as_object_mut().unwrap().remove("$schema");
    registry
        .add_tool(
            serde_json::from_value(tool).unwrap(),
            "agent_create_plan.json",
        )
        .unwrap();
    for (id, inputs, output) in [
        ("outline.write", json!([]), "outline"),
        ("summary.write", json!(["outline"]), "summary"),
    ] {
        registry
            .add_capability(
                serde_json::from_value(json!({
                    "capabilityId": id, "agentType": "ai", "version": "1", "displayName": id,
                    "summary": id, "inputContract": inputs, "outputContract": [output]
                }))
                .unwrap(),
                "test",
            )
            .unwrap();
    }
    registry
        .add_context(
            baton_core::catalog::contexts::ContextGuidance {
                name: "audit".into(),
                aliases: Vec::new(),
                intent: "Check the work".into(),
                required_behaviors: vec!["Cite the outline".into()],
                profile: None,
                required_plan_steps: Vec::new(),
            },
            "audit.json",
        )
        .unwrap();
    registry
        .add_context(
            baton_core::catalog::contexts::ContextGuidance {
                name: "outline_first".into(),
                aliases: Vec::new(),
                intent: "Outline, then summarise".into(),
                required_behaviors: Vec::new(),
                profile: None,
                required_plan_steps: serde_json::from_value(json!([
                    {"name": "an outline", "capabilities": ["outline.write"]},
                    {"name": "a summary", "capabilities": ["summary.write"]}
                ]))
                .unwrap(),
            },
            "outline_first.json",
        )
        .unwrap();
    registry
        .add_chat_document(&RegistryDocument {
            source_name: "chat.json".into(),
            text: json!({
                "instructions": "You plan work.",
                "tools": ["agent_create_plan"],
                "clarifyingQuestion": "What shall I do?"
            })
            .to_string(),
        })
        .unwrap();
    Arc::new(registry)
}

struct Chat {
    services: Services,
    store: Arc<InMemoryRunStore>,
    queue: Arc<InMemoryStepQueue>,
    model: Arc<PlanningModel>,
}

fn chat(model: PlanningModel) -> Chat {
    let model = Arc::new(model);
    let store = Arc::new(InMemoryRunStore::new());
    let queue = Arc::new(InMemoryStepQueue::new());
    let services = TestServices::with_model(model.clone())
        .registry(registry())
        .store(store.clone())
        .queue(queue.clone())
        .build()
        .services;
    Chat {
        services,
        store,
        queue,
        model,
    }
}

impl Chat {
    /// Sends a message and runs everything to the end: (run id, output).
    async fn say(&self, message: &str, thread: Option<&str>) -> (String, Value) {
        self.send(ChatRequest {
            message: message.into(),
            thread_id: thread.map(str::to_string),
            ..ChatRequest::default()
        })
        .await
    }

    /// Sends `request` and runs everything to the end: (run id, output).
    async fn send(&self, request: ChatRequest) -> (String, Value) {
        let submitted = self.services.runs.submit_chat("t", &request).await.unwrap();
        let runner = LocalRunner {
            steps: self.services.steps.clone(),
            runs: self.services.runs.clone(),
            queue: self.queue.clone(),
        };
        let status = runner
            .run_until_settled("t", &submitted.run_id)
            .await
            .unwrap();
        assert_eq!(status, RunStatus::Completed);
        let state = self
            .store
            .load_run(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .unwrap()
            .state;
        (submitted.run_id, state.output.unwrap())
    }

    async fn frames(&self, run_id: &str) -> Vec<EventFrame> {
        let frames = self
            .services
            .runs
            .read_all_events_after("t", run_id, 0)
            .await
            .unwrap();
        assert_frames_match_schemas(&frames);
        frames
    }

    /// The `tool_result` of the plan call in `run_id`.
    async fn plan_result(&self, run_id: &str) -> Value {
        self.frames(run_id)
            .await
            .iter()
            .find(|frame| frame.event_type == EventType::ToolResult)
            .and_then(|frame| frame.payload_value())
            .expect("a tool result")["result"]
            .clone()
    }
}

fn payload(frames: &[EventFrame], event_type: EventType) -> Option<Value> {
    frames
        .iter()
        .find(|frame| frame.event_type == event_type)
        .and_then(|frame| frame.payload_value())
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_execute_runs_a_child_run_whose_summary_the_agent_reads() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(
            json!({"objective": "Summarise the outline", "requested_outputs": ["summary"],
                         "priority_entities": ["chapter-1"]}),
        ),
        text("Done: the summary is ready."),
    ]);
    let chat = chat(model);
    let (run_id, output) = chat.say("Please summarise.", None).await;
    assert_eq!(output["message"], "Done: the summary is ready.");

    let result = chat.plan_result(&run_id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert!(result["outputs"]["summary"]["text"].is_string(), "{result}");
    let child_run_id = result["runId"].as_str().unwrap().to_string();
    let frames = chat.frames(&run_id).await;
    let executing = frames
        .iter()
        .filter(|frame| frame.event_type == EventType::AgentState)
        .filter_map(|frame| frame.payload_value())
        .find(|payload| payload["state"] == "executing_plan")
        .expect("agent_state executing_plan");
    assert_eq!(executing["childRunId"], child_run_id.as_str());

    let child = chat.frames(&child_run_id).await;
    assert!(!child.is_empty());
    assert!(
        child
            .iter()
            .all(|frame| frame.parent_run_id.as_deref() == Some(run_id.as_str())),
        "every child frame names its parent"
    );
    assert_eq!(child.last().unwrap().event_type, EventType::Complete);
    let child_state = chat
        .store
        .load_run(RunKey::new("t", &child_run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert!(
        child_state
            .envelope
            .special_instructions
            .iter()
            .any(|instruction| instruction.contains("chapter-1"))
    );
    assert_eq!(
        *chat.model.node_calls.lock().unwrap(),
        2,
        "outline and summary, once each"
    );

    // Following the parent relays the child's frames in place, marked as
    // forwarded (their own ids; no SSE id, so Last-Event-ID stays the parent's).
    use futures_util::StreamExt;
    let followed: Vec<EventFrame> = chat
        .services
        .runs
        .follow("t", &run_id, 0, std::time::Duration::from_millis(5))
        .collect()
        .await;
    let position = |wanted: &dyn Fn(&EventFrame) -> bool| followed.iter().position(wanted).unwrap();
    let executing = position(&|frame| {
        frame.event_type == EventType::AgentState
            && frame.payload.as_ref().unwrap()["state"] == "executing_plan"
    });
    let child_start = position(&|frame| frame.run_id == child_run_id);
    let child_end =
        position(&|frame| frame.run_id == child_run_id && frame.event_type == EventType::Complete);
    let parent_result = position(&|frame| frame.event_type == EventType::ToolResult);
    assert!(
        executing < child_start && child_end < parent_result,
        "relayed in place"
    );
    let relayed: Vec<&EventFrame> = followed
        .iter()
        .filter(|frame| frame.run_id == child_run_id)
        .collect();
    assert_eq!(relayed.len(), child.len(), "every child frame, once");
    assert!(
        relayed
            .iter()
            .all(|frame| frame.forwarded && !frame.to_sse().contains("id: "))
    );
    assert_eq!(
        followed.last().unwrap().run_id,
        run_id,
        "the parent's stream ends it"
    );
    // The second turn read the child's summary as the call's result.
    let seen = chat.model.seen.lock().unwrap().clone();
    let SessionTurn::Tool { content, .. } = &seen[1].1.turns[1] else {
        panic!("the call's result follows the call");
    };
    assert!(content.contains(&child_run_id));
}

/// A child's outputs too large for a step message (over 64 KiB as JSON)
/// travel by reference: the `ChildRunEnded` message names the child run,
/// and the worker reads the outputs from it, so the agent reads them whole.
#[tokio::test(flavor = "multi_thread")]
async fn a_child_s_large_outputs_reach_the_agent_by_reference() {
    let model = PlanningModel::default();
    let long_text = "a line of the summary\n".repeat(5_000);
    *model.node_text.lock().unwrap() = Some(long_text.clone());
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Summarise the outline", "requested_outputs": ["summary"]})),
        text("Done."),
    ]);
    let chat = chat(model);
    let (run_id, _) = chat.say("Please summarise at length.", None).await;
    let result = chat.plan_result(&run_id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(
        result["outputs"]["summary"]["text"].as_str().map(str::len),
        Some(long_text.len()),
        "the agent reads the child's whole output"
    );
    assert!(
        result.get("outputsByReference").is_none(),
        "{}",
        result["status"]
    );
    // The message itself carried no outputs: the core leaves them out.
    let summary = baton_core::state::run::summary_for_message(json!({
        "runId": "run_child", "status": "completed",
        "outputs": {"summary": {"text": long_text}}
    }));
    assert_eq!(summary["outputsByReference"], true);
    assert!(summary.get("outputs").is_none());
    assert_eq!(
        baton_core::state::run::summary_outputs_by_reference(&summary),
        Some("run_child")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_waits_for_the_persons_approval_in_the_next_message() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(
            json!({"objective": "Summarise the outline", "requested_outputs": ["summary"],
                         "execution_mode": "draft_only"}),
        ),
        text("Here is the plan: outline, then summary. Shall I run it?"),
        plan_call(
            json!({"objective": "Summarise the outline", "requested_outputs": ["summary"],
                         "execution_mode": "auto_execute"}),
        ),
        text("It ran."),
    ]);
    let chat = chat(model);
    let (first_run, first) = chat.say("Plan a summary, but ask me first.", None).await;
    let thread = first["threadId"].as_str().unwrap().to_string();
    let frames = chat.frames(&first_run).await;
    let drafted = payload(&frames, EventType::PlanReadyForReview).expect("plan_ready_for_review");
    let capabilities: Vec<&str> = drafted["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["capabilityId"].as_str().unwrap())
        .collect();
    assert_eq!(capabilities, ["outline.write", "summary.write"]);
    let result = chat.plan_result(&first_run).await;
    assert_eq!(result["status"], "pending_review");
    assert_eq!(*chat.model.node_calls.lock().unwrap(), 0, "nothing ran");

    let (second_run, second) = chat.say("Yes, go ahead.", Some(&thread)).await;
    assert_eq!(second["message"], "It ran.");
    let seen = chat.model.seen.lock().unwrap().clone();
    let draft_id = drafted["draftId"].as_str().unwrap();
    assert!(
        seen[2].0.system_instruction.contains(draft_id),
        "the agent is told a draft awaits approval"
    );
    let result = chat.plan_result(&second_run).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(*chat.model.node_calls.lock().unwrap(), 2);
    // Run, the draft is no longer on offer.
    let state = chat
        .store
        .load_run(RunKey::new("t", &second_run))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert!(state.chat.unwrap().pending_drafts.is_empty());
}

/// The legacy flag of the tool's schema: `auto_execute: false` without an
/// `execution_mode` asks for a draft, as `draft_only` does.
#[tokio::test(flavor = "multi_thread")]
async fn the_legacy_auto_execute_false_flag_asks_for_a_draft() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(
            json!({"objective": "Summarise the outline", "requested_outputs": ["summary"],
                   "auto_execute": false}),
        ),
        text("Here is the plan. Shall I run it?"),
    ]);
    let chat = chat(model);
    let (run_id, _) = chat.say("Plan a summary.", None).await;
    let frames = chat.frames(&run_id).await;
    assert!(
        payload(&frames, EventType::PlanReadyForReview).is_some(),
        "the plan is shown for review"
    );
    let result = chat.plan_result(&run_id).await;
    assert_eq!(result["status"], "pending_review", "{result}");
    assert_eq!(*chat.model.node_calls.lock().unwrap(), 0, "nothing ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_review_runs_only_what_the_reviewer_approves() {
    let model = PlanningModel::default();
    let review = json!({"objective": "Summarise the outline", "requested_outputs": ["summary"],
                        "execution_mode": "agent_review"});
    model.chat_turns.lock().unwrap().extend([
        plan_call(review.clone()),
        text("The reviewer wants changes."),
        plan_call(review),
        text("Approved and done."),
    ]);
    model.verdicts.lock().unwrap().extend([
        json!({"verdict": "needs_changes", "notes": "Add a review step."}),
        json!({"verdict": "approved", "notes": "Fine."}),
    ]);
    let chat = chat(model);
    let (first_run, _) = chat.say("Summarise, reviewed.", None).await;
    let frames = chat.frames(&first_run).await;
    let verdict = payload(&frames, EventType::PlanReview).expect("plan_review");
    assert_eq!(verdict["verdict"], "needs_changes");
    let result = chat.plan_result(&first_run).await;
    assert_eq!(result["status"], "needs_changes");
    assert_eq!(result["notes"], "Add a review step.");
    assert_eq!(
        *chat.model.node_calls.lock().unwrap(),
        0,
        "a critiqued plan does not run"
    );

    let (second_run, second) = chat.say("Try again.", None).await;
    assert_eq!(second["message"], "Approved and done.");
    let frames = chat.frames(&second_run).await;
    assert_eq!(
        payload(&frames, EventType::PlanReview).unwrap()["verdict"],
        "approved"
    );
    let result = chat.plan_result(&second_run).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert_eq!(*chat.model.node_calls.lock().unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_naming_no_known_output_is_answered_with_the_facets_there_are() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Write a poem", "requested_outputs": ["poem"]})),
        text("I cannot make poems here."),
    ]);
    let chat = chat(model);
    let (run_id, _) = chat.say("A poem, please.", None).await;
    let frames = chat.frames(&run_id).await;
    let refused = payload(&frames, EventType::ToolResult).unwrap();
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("`poem` is not a facet") && error.contains("`summary`"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_with_only_an_objective_or_free_text_outputs_resolves_them_to_facets() {
    // `{objective}` alone, as the tool's published schema allows: the output
    // facet the objective names best is planned, and the result says so.
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Write a summary"})),
        text("Done."),
    ]);
    let session = chat(model);
    let (run_id, _) = session.say("A summary, please.", None).await;
    let result = session.plan_result(&run_id).await;
    assert_eq!(result["status"], "completed", "{result}");
    assert!(result["outputs"]["summary"]["text"].is_string(), "{result}");
    assert_eq!(
        result["resolvedOutputs"],
        json!([{"requested": "Write a summary", "facet": "summary", "by": "objective"}])
    );

    // Free text in `requested_outputs`: the facet sharing its words.
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(
            json!({"objective": "Plan it", "requested_outputs": ["a short summary"],
                         "execution_mode": "draft_only"}),
        ),
        text("Here is the plan."),
    ]);
    let session = chat(model);
    let (run_id, _) = session.say("Plan a short summary.", None).await;
    let result = session.plan_result(&run_id).await;
    assert_eq!(result["status"], "pending_review", "{result}");
    assert_eq!(
        result["resolvedOutputs"],
        json!([{"requested": "a short summary", "facet": "summary", "by": "words"}])
    );
    assert_eq!(result["plan"]["goalFacets"], json!(["summary"]));

    // Named exactly: nothing to tell.
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(
            json!({"objective": "Plan it", "requested_outputs": ["summary"],
                         "execution_mode": "draft_only"}),
        ),
        text("Here is the plan."),
    ]);
    let session = chat(model);
    let (run_id, _) = session.say("Plan a summary.", None).await;
    assert!(
        session
            .plan_result(&run_id)
            .await
            .get("resolvedOutputs")
            .is_none()
    );

    // An objective naming no facet is a tool error the model can fix.
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Compose a sonnet"})),
        text("I cannot."),
    ]);
    let session = chat(model);
    let (run_id, _) = session.say("A sonnet.", None).await;
    let frames = session.frames(&run_id).await;
    let refused = payload(&frames, EventType::ToolResult).unwrap();
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("requested_outputs") && error.contains("`summary`"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_messages_inputs_entity_and_context_reach_the_plans_its_agent_creates() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Summarise the outline", "requested_outputs": ["summary"]})),
        text("Done."),
    ]);
    let session = chat(model);
    let mut inputs = serde_json::Map::new();
    inputs.insert("outline".into(), json!({"text": "Chapter one, then two."}));
    let (run_id, _) = session
        .send(ChatRequest {
            message: "Summarise my outline.".into(),
            inputs,
            entity_id: Some("project-42".into()),
            context_type: Some("audit".into()),
            ..ChatRequest::default()
        })
        .await;
    let seen = session.model.seen.lock().unwrap().clone();
    let system = &seen[0].0.system_instruction;
    assert!(
        system.contains("`project-42`") && system.contains("outline"),
        "the agent is told the entity and the inputs: {system}"
    );
    let result = session.plan_result(&run_id).await;
    assert_eq!(result["status"], "completed", "{result}");
    let child_run_id = result["runId"].as_str().unwrap();
    let child = session
        .store
        .load_run(RunKey::new("t", child_run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    assert_eq!(
        child.envelope.inputs["outline"]["text"], "Chapter one, then two.",
        "the person's outline is the child's input"
    );
    let planned: Vec<&str> = child
        .plan
        .as_ref()
        .unwrap()
        .nodes
        .iter()
        .map(|node| node.capability_id.as_str())
        .collect();
    assert_eq!(
        planned,
        ["summary.write"],
        "no outline is written: it was given"
    );
    assert_eq!(
        child.envelope.metadata.as_ref().unwrap()["entityId"],
        "project-42"
    );
    assert_eq!(
        child.envelope.metadata.as_ref().unwrap()["contextType"],
        "audit",
        "the child plan's metadata names the conversation's context type"
    );
    // The context type's guidance reaches the child plan's nodes.
    assert!(
        child
            .envelope
            .special_instructions
            .iter()
            .any(|instruction| instruction.contains("Intent: Check the work")
                && instruction.contains("Cite the outline")),
        "{:?}",
        child.envelope.special_instructions
    );
    assert_eq!(*session.model.node_calls.lock().unwrap(), 1);

    // Usage is attributed: each node's `metrics` names what its calls were
    // for, the mode that started its run, the session (the thread) and the
    // context type; the child's, the parent's thread and context.
    let parent = session
        .store
        .load_run(RunKey::new("t", &run_id))
        .await
        .unwrap()
        .unwrap()
        .state;
    // (node metrics: what the calls were for; the run's last: the rest)
    let attribution_of = |frames: &[EventFrame], of_node: bool| -> Value {
        frames
            .iter()
            .filter(|frame| {
                frame.event_type == EventType::Metrics && frame.node_id.is_some() == of_node
            })
            .filter_map(|frame| frame.payload_value())
            .map(|payload| {
                if of_node {
                    json!({"operationType": payload["operationType"]})
                } else {
                    payload["attribution"].clone()
                }
            })
            .last()
            .expect("a metrics frame")
    };
    let child_frames = session.frames(child_run_id).await;
    assert_eq!(
        attribution_of(&child_frames, true),
        json!({"operationType": "execution"})
    );
    assert_eq!(
        attribution_of(&child_frames, false),
        json!({"executionMode": "auto_execute", "sessionId": parent.thread_id,
               "contextType": "audit"})
    );
    let chat_frames = session.frames(&run_id).await;
    assert_eq!(
        attribution_of(&chat_frames, true),
        json!({"operationType": "execution"})
    );
    assert_eq!(
        attribution_of(&chat_frames, false),
        json!({"sessionId": parent.thread_id, "contextType": "audit"})
    );
    let listed = baton_core::state::listing::RunListing::of(&child);
    assert_eq!(
        serde_json::to_value(listed.usage.unwrap().attribution).unwrap(),
        json!({"executionMode": "auto_execute", "sessionId": parent.thread_id, "contextType": "audit"})
    );

    // An input breaking its facet's schema is refused, naming its path.
    let mut bad = serde_json::Map::new();
    bad.insert("outline".into(), json!({"text": 7}));
    let error = session
        .services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                message: "Summarise.".into(),
                inputs: bad,
                ..ChatRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("$.inputs.outline.text"),
        "{error}"
    );
    let error = session
        .services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                message: "Summarise.".into(),
                entity_id: Some("  ".into()),
                ..ChatRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("$.entityId"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_parent_ends_the_child_run_it_waits_for_at_once() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Summarise the outline", "requested_outputs": ["summary"]})),
        text("never reached"),
    ]);
    let chat = chat(model);
    let submitted = chat
        .services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                message: "Please summarise.".into(),
                ..ChatRequest::default()
            },
        )
        .await
        .unwrap();
    // Step by step until the parent's agent waits for the child it started.
    let child_run_id = loop {
        let parent = chat
            .store
            .load_run(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .unwrap()
            .state;
        if let Some(child) = parent.awaited_child_runs().into_iter().next() {
            break child;
        }
        let received = chat
            .queue
            .receive(1, std::time::Duration::from_secs(1))
            .await
            .unwrap()
            .pop()
            .expect("a step until the child starts");
        baton_runtime::workers::process_received_step(
            &chat.services.steps,
            chat.queue.as_ref(),
            received,
        )
        .await
        .unwrap();
    };
    let status_of = |run_id: String| {
        let store = chat.store.clone();
        async move {
            store
                .load_run(RunKey::new("t", &run_id))
                .await
                .unwrap()
                .unwrap()
                .state
                .status()
        }
    };
    assert!(!status_of(child_run_id.clone()).await.is_terminal());

    let status = chat
        .services
        .runs
        .cancel("t", &submitted.run_id, "the person left")
        .await
        .unwrap();
    assert_eq!(status, Some(RunStatus::Cancelled));
    assert_eq!(
        status_of(child_run_id.clone()).await,
        RunStatus::Cancelled,
        "the child ended with its parent, before any further step"
    );
    let child_frames = chat.frames(&child_run_id).await;
    let last = child_frames.last().unwrap();
    assert!(
        last.message
            .as_deref()
            .is_some_and(|message| message.contains(&submitted.run_id)),
        "the child's end names its parent: {last:?}"
    );

    // What was still queued for either run changes nothing now.
    let runner = LocalRunner {
        steps: chat.services.steps.clone(),
        runs: chat.services.runs.clone(),
        queue: chat.queue.clone(),
    };
    runner.drain().await.unwrap();
    assert_eq!(
        status_of(submitted.run_id.clone()).await,
        RunStatus::Cancelled
    );
    assert_eq!(status_of(child_run_id).await, RunStatus::Cancelled);
    assert_eq!(
        chat.model.seen.lock().unwrap().len(),
        1,
        "the parent's agent was not asked again"
    );
}

/// A parent that ends any other way than a cancel (here its step fails
/// for good: `give_up`, as at a message's last receive) cancels the child
/// runs it waits for through its ending commit's outbox (a `cancel_run`
/// step per child), so no child goes on spending; and a cancel retried on
/// the ended parent still reaches its children.
#[tokio::test(flavor = "multi_thread")]
async fn a_parent_that_fails_cancels_its_children_through_its_outbox() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Summarise the outline", "requested_outputs": ["summary"]})),
        text("never reached"),
    ]);
    let chat = chat(model);
    let submitted = chat
        .services
        .runs
        .submit_chat(
            "t",
            &ChatRequest {
                message: "Please summarise.".into(),
                ..ChatRequest::default()
            },
        )
        .await
        .unwrap();
    let mut last_parent_step = None;
    let child_run_id = loop {
        let parent = chat
            .store
            .load_run(RunKey::new("t", &submitted.run_id))
            .await
            .unwrap()
            .unwrap()
            .state;
        if let Some(child) = parent.awaited_child_runs().into_iter().next() {
            break child;
        }
        let received = chat
            .queue
            .receive(1, std::time::Duration::from_secs(1))
            .await
            .unwrap()
            .pop()
            .expect("a step until the child starts");
        if received.message.run_id == submitted.run_id {
            last_parent_step = Some(received.message.clone());
        }
        baton_runtime::workers::process_received_step(
            &chat.services.steps,
            chat.queue.as_ref(),
            received,
        )
        .await
        .unwrap();
    };
    let status_of = |run_id: String| {
        let store = chat.store.clone();
        async move {
            store
                .load_run(RunKey::new("t", &run_id))
                .await
                .unwrap()
                .unwrap()
                .state
                .status()
        }
    };
    // The parent's step fails for good (its last receive): the run ends.
    let ended = chat
        .services
        .steps
        .give_up(
            &last_parent_step.unwrap(),
            &baton_runtime::RuntimeError::DeadLettered { receives: 10 },
            10,
        )
        .await
        .unwrap();
    assert!(ended);
    assert_eq!(status_of(submitted.run_id.clone()).await, RunStatus::Failed);
    // Its ending commit put the child's cancel in the outbox: one more step.
    let pending = chat
        .store
        .pending_outbox(RunKey::new("t", &child_run_id))
        .await
        .unwrap();
    assert!(
        pending
            .iter()
            .any(|message| message.command.kind_name() == "cancel_run"),
        "the child's cancel is in the parent's commit: {pending:?}"
    );
    let runner = LocalRunner {
        steps: chat.services.steps.clone(),
        runs: chat.services.runs.clone(),
        queue: chat.queue.clone(),
    };
    runner.drain().await.unwrap();
    assert_eq!(
        status_of(child_run_id.clone()).await,
        RunStatus::Cancelled,
        "the child ended with its parent"
    );
    let child_frames = chat.frames(&child_run_id).await;
    let last = child_frames.last().unwrap();
    assert!(
        last.message.as_deref().is_some_and(
            |message| message.contains(&submitted.run_id) && message.contains("failed")
        ),
        "the child's end names its parent and how it ended: {last:?}"
    );
    // A cancel of the ended parent answers its status and changes nothing.
    assert_eq!(
        chat.services
            .runs
            .cancel("t", &submitted.run_id, "again")
            .await
            .unwrap(),
        Some(RunStatus::Failed)
    );
}

/// A context type's `requiredPlanSteps` are enforced, not only described:
/// a plan lacking one (or having them out of order) is refused with the
/// correction the agent reads, nothing runs, and the agent's next call
/// with a plan that has them runs. A context naming an unknown capability
/// is refused when the registry loads, naming its path.
#[tokio::test(flavor = "multi_thread")]
async fn a_context_s_required_plan_steps_are_enforced_in_order() {
    let model = PlanningModel::default();
    model.chat_turns.lock().unwrap().extend([
        plan_call(json!({"objective": "Outline the book", "requested_outputs": ["outline"]})),
        plan_call(json!({"objective": "Outline and summarise the book", "requested_outputs": ["summary"]})),
        text("Outlined and summarised."),
    ]);
    let chat = chat(model);
    let (run_id, output) = chat
        .send(ChatRequest {
            message: "Start my book project.".into(),
            context_type: Some("outline_first".into()),
            ..ChatRequest::default()
        })
        .await;
    assert_eq!(output["message"], "Outlined and summarised.");
    let results: Vec<Value> = chat
        .frames(&run_id)
        .await
        .iter()
        .filter(|frame| frame.event_type == EventType::ToolResult)
        .filter_map(|frame| frame.payload_value())
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    let refused = results[0]["error"]
        .as_str()
        .expect("the first plan is refused");
    assert!(
        refused.contains("in this order: an outline (outline.write) → a summary (summary.write)")
            && refused.contains("lacks (or has out of order): a summary"),
        "{refused}"
    );
    assert_eq!(
        results[1]["result"]["status"], "completed",
        "{:?}",
        results[1]
    );
    assert_eq!(
        *chat.model.node_calls.lock().unwrap(),
        2,
        "only the second plan ran: outline and summary, once each"
    );

    // Out of order is as good as missing.
    let guidance = registry()
        .context_guidance("outline_first")
        .unwrap()
        .clone();
    assert!(
        guidance
            .required_steps_missing(["summary.write", "outline.write"])
            .unwrap()
            .ends_with(
                "has out of order): a summary. Ask for outputs that need them and call again."
            )
    );
    assert_eq!(
        guidance.required_steps_missing(["outline.write", "summary.write"]),
        None
    );

    let mut unknown = guidance.clone();
    unknown.name = "other".into();
    unknown.required_plan_steps[1].capabilities = vec!["summary.missing".into()];
    let mut fresh = (*registry()).clone();
    let error = fresh
        .add_context(unknown, "other.json")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("$.requiredPlanSteps[1].capabilities[0]")
            && error.contains("`summary.missing` is not a registered capability"),
        "{error}"
    );
}
