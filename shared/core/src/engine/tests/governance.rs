//! Table tests of runtime policies (trigger × action, nested approval
//! chains, disabled policies), approvals, pauses, clarifications and
//! timers, on the two-node plan `node_1` (plan.brief) → `node_2`
//! (write.draft). No I/O: every step is a pure function call, and every
//! frame is checked against its published schema.

use serde_json::{Value, json};

use super::*;
use crate::contracts::assignment::{Answerer, Assignment};
use crate::records::governance::{Hold, human_sla_timer_id, policy_timer_id};
use crate::wire::frames::test_support::assert_frames_match_schemas;

fn envelope_with(policies: Value) -> TaskEnvelope {
    TaskEnvelope::parse_value(&json!({
        "objective": "o",
        "inputs": {"notes": {"text": "n"}},
        "policies": {"runtime": policies},
        "outputContract": {"schema": {"type": "object", "required": ["draft"], "properties": {"draft": {"type": "object"}}}}
    }))
    .unwrap()
}

/// The run right after its planning step.
fn planned_with(policies: Value, context: &EngineContext<'_>) -> Decision {
    let started = start_run(identity(), envelope_with(policies), NOW, 3).state;
    step(started, Observed::Plan, context)
}

fn brief(text: &str) -> Value {
    json!({"brief": {"text": text}})
}

/// `policy_triggered` payloads of a decision.
fn firings(decision: &Decision) -> Vec<Value> {
    decision
        .events
        .iter()
        .filter(|event| event.event_type == crate::wire::event::EventType::PolicyTriggered)
        .filter_map(|event| event.payload_value())
        .collect()
}

fn policy(id: &str, trigger: Value, action: Value) -> Value {
    json!({"id": id, "trigger": trigger, "action": action})
}

struct Row {
    name: &'static str,
    policies: Value,
    /// After planning, optionally node_1 answers this.
    node_1_answers: Option<Value>,
    status: RunStatus,
    /// The event types of the last step.
    events: Vec<&'static str>,
    outbox: Vec<&'static str>,
}

#[test]
fn policy_trigger_action_table() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let on_start = json!({"kind": "onStart"});
    let node_1_done = json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_1"},
                              "condition": {"==": [{"var": "brief.text"}, "weak"]}});
    let node_1_invalid =
        json!({"kind": "onValidationFail", "selector": {"capabilityId": "plan.brief"}});
    let planned_events = vec!["plan_requested", "plan_generated"];
    let with = |tail: &[&'static str]| {
        let mut events = planned_events.clone();
        events.extend_from_slice(tail);
        events
    };
    let rows = vec![
        Row {
            name: "no policy: the first node is dispatched",
            policies: json!([]),
            node_1_answers: None,
            status: RunStatus::Running,
            events: with(&[]),
            outbox: vec!["run:node_1:1"],
        },
        Row {
            name: "onStart pause: nothing is dispatched",
            policies: json!([policy(
                "p",
                on_start.clone(),
                json!({"type": "pause", "reason": "check"})
            )]),
            node_1_answers: None,
            status: RunStatus::Paused,
            events: with(&["policy_triggered"]),
            outbox: vec![],
        },
        Row {
            name: "onStart emit: a log frame, and the run goes on",
            policies: json!([policy(
                "p",
                on_start.clone(),
                json!({"type": "emit", "event": "kickoff", "payload": {"team": "a"}})
            )]),
            node_1_answers: None,
            status: RunStatus::Running,
            events: with(&["policy_triggered", "log"]),
            outbox: vec!["run:node_1:1"],
        },
        Row {
            name: "onStart fail: the run ends",
            policies: json!([policy(
                "p",
                on_start.clone(),
                json!({"type": "fail", "message": "not today"})
            )]),
            node_1_answers: None,
            status: RunStatus::Failed,
            events: with(&["policy_triggered", "metrics", "error"]),
            outbox: vec![],
        },
        Row {
            name: "onStart hitl: an approval request holds the run",
            policies: json!([policy(
                "p",
                on_start.clone(),
                json!({"type": "hitl", "rationale": "go?"})
            )]),
            node_1_answers: None,
            status: RunStatus::AwaitingHitl,
            events: with(&["policy_triggered", "hitl_request"]),
            outbox: vec![],
        },
        Row {
            name: "a disabled policy never fires",
            policies: json!([{"id": "p", "enabled": false, "trigger": on_start.clone(), "action": {"type": "fail"}}]),
            node_1_answers: None,
            status: RunStatus::Running,
            events: with(&[]),
            outbox: vec!["run:node_1:1"],
        },
        Row {
            name: "onNodeComplete whose condition holds: hitl on the node's output",
            policies: json!([policy("p", node_1_done.clone(), json!({"type": "hitl"}))]),
            node_1_answers: Some(brief("weak")),
            status: RunStatus::AwaitingHitl,
            events: vec!["node_complete", "policy_triggered", "hitl_request"],
            outbox: vec![],
        },
        Row {
            name: "onNodeComplete whose condition fails: nothing fires",
            policies: json!([policy("p", node_1_done.clone(), json!({"type": "hitl"}))]),
            node_1_answers: Some(brief("strong")),
            status: RunStatus::Running,
            events: vec!["node_complete"],
            outbox: vec!["run:node_2:1"],
        },
        Row {
            name: "onNodeComplete whose condition reads a name the output lacks: a warning, nothing fires",
            policies: json!([policy(
                "p",
                json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_1"},
                       "condition": {"==": [{"var": "headline.text"}, "weak"]}}),
                json!({"type": "hitl"})
            )]),
            node_1_answers: Some(brief("weak")),
            status: RunStatus::Running,
            events: vec!["node_complete", "warning"],
            outbox: vec!["run:node_2:1"],
        },
        Row {
            name: "onNodeComplete replan: a new version re-runs the node (next attempt number)",
            policies: json!([policy(
                "p",
                node_1_done.clone(),
                json!({"type": "replan", "rationale": "too weak"})
            )]),
            node_1_answers: Some(brief("weak")),
            status: RunStatus::Running,
            events: vec![
                "node_complete",
                "policy_triggered",
                "plan_requested",
                "plan_updated",
            ],
            outbox: vec!["run:node_1:2"],
        },
        Row {
            name: "onNodeComplete pause after the node: its successor waits",
            policies: json!([policy("p", node_1_done.clone(), json!({"type": "pause"}))]),
            node_1_answers: Some(brief("weak")),
            status: RunStatus::Paused,
            events: vec!["node_complete", "policy_triggered"],
            outbox: vec![],
        },
        Row {
            name: "onValidationFail fail: no re-prompt, the run ends",
            policies: json!([policy("p", node_1_invalid.clone(), json!({"type": "fail"}))]),
            node_1_answers: Some(json!({"brief": 7})),
            status: RunStatus::Failed,
            events: vec!["validation_error", "policy_triggered", "metrics", "error"],
            outbox: vec![],
        },
        Row {
            name: "onValidationFail emit: the re-prompt goes on",
            policies: json!([policy(
                "p",
                node_1_invalid.clone(),
                json!({"type": "emit", "event": "bad_answer"})
            )]),
            node_1_answers: Some(json!({"brief": 7})),
            status: RunStatus::Running,
            events: vec!["validation_error", "policy_triggered", "log"],
            outbox: vec!["run:node_1:2"],
        },
        Row {
            name: "onValidationFail hitl: the retry waits for approval",
            policies: json!([policy("p", node_1_invalid.clone(), json!({"type": "hitl"}))]),
            node_1_answers: Some(json!({"brief": 7})),
            status: RunStatus::AwaitingHitl,
            events: vec!["validation_error", "policy_triggered", "hitl_request"],
            outbox: vec![],
        },
        Row {
            name: "onMetricBelow over a run metric: fires once the node completes",
            policies: json!([policy(
                "p",
                json!({"kind": "onMetricBelow", "metric": "nodesCompleted", "threshold": 2}),
                json!({"type": "emit", "event": "progress"})
            )]),
            node_1_answers: Some(brief("ok")),
            status: RunStatus::Running,
            events: vec!["node_complete", "policy_triggered", "log"],
            outbox: vec!["run:node_2:1"],
        },
        Row {
            name: "onMetricBelow not below: nothing fires",
            policies: json!([policy(
                "p",
                json!({"kind": "onMetricBelow", "metric": "nodesCompleted", "threshold": 1}),
                json!({"type": "fail"})
            )]),
            node_1_answers: Some(brief("ok")),
            status: RunStatus::Running,
            events: vec!["node_complete"],
            outbox: vec!["run:node_2:1"],
        },
    ];
    for row in rows {
        let planned = planned_with(row.policies.clone(), &context);
        let decision = match &row.node_1_answers {
            None => planned,
            Some(content) => {
                assert_eq!(outbox(&planned), ["run:node_1:1"], "{}", row.name);
                step(
                    planned.state,
                    answer("node_1", 1, content.clone()),
                    &context,
                )
            }
        };
        assert_eq!(decision.state.status(), row.status, "{}", row.name);
        assert_eq!(event_types(&decision), row.events, "{}", row.name);
        assert_eq!(outbox(&decision), row.outbox, "{}", row.name);
        for firing in firings(&decision) {
            assert_eq!(firing["policyId"], "p", "{}", row.name);
            assert!(firing["actionDetails"]["type"].is_string(), "{}", row.name);
        }
    }
}

#[test]
fn a_condition_that_cannot_be_read_is_a_warning_naming_the_policy_never_a_silent_false() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let reads_a_missing_name = json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_1"},
                                      "condition": {"==": [{"var": "headline.text"}, "weak"]}});
    let with_a_default = json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_1"},
                                "condition": {"==": [{"var": ["headline.text", "none"]}, "weak"]}});
    let planned = planned_with(
        json!([
            policy("guard", reads_a_missing_name, json!({"type": "fail"})),
            policy("lenient", with_a_default, json!({"type": "fail"}))
        ]),
        &context,
    );
    let decision = step(planned.state, answer("node_1", 1, brief("weak")), &context);
    assert_eq!(
        decision.state.status(),
        RunStatus::Running,
        "neither policy fired"
    );
    let warnings: Vec<Value> = decision
        .events
        .iter()
        .filter(|event| event.event_type == crate::wire::event::EventType::Warning)
        .map(|event| {
            let mut payload = event.payload_value().unwrap();
            payload["message"] = json!(event.message.clone());
            payload
        })
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "only the policy without a default: {warnings:?}"
    );
    assert_eq!(warnings[0]["code"], "policy_condition_unreadable");
    assert_eq!(
        warnings[0]["field"],
        "$.policies.runtime[0].trigger.condition"
    );
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(message.contains("`guard`"), "{message}");
    assert!(message.contains("`headline.text`"), "{message}");
    assert!(
        message.contains("`brief`"),
        "it says what the node has: {message}"
    );
}

#[test]
fn a_replan_keeps_what_the_new_version_still_uses_and_fires_once_per_node() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let on_node_2 = json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_2"}});
    let planned = planned_with(
        json!([policy("again", on_node_2, json!({"type": "replan"}))]),
        &context,
    );
    let after_1 = step(planned.state, answer("node_1", 1, brief("b")), &context);
    let replanned = step(
        after_1.state,
        answer("node_2", 1, json!({"draft": {"text": "d1"}})),
        &context,
    );
    let updated = replanned
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::PlanUpdated)
        .and_then(|event| event.payload_value())
        .unwrap();
    assert_eq!(updated["previousVersion"], 1);
    assert_eq!(updated["version"], 2);
    assert_eq!(
        updated["reusedNodes"],
        json!(["node_1"]),
        "node_1 is not re-run"
    );
    assert_eq!(updated["trigger"]["kind"], "onNodeComplete");
    assert_eq!(outbox(&replanned), ["run:node_2:2"]);
    assert_eq!(replanned.state.plan_version(), 2);
    // The re-run completes; the policy fired for node_2 already: the run ends.
    let done = step(
        replanned.state,
        answer("node_2", 2, json!({"draft": {"text": "d2"}})),
        &context,
    );
    assert_eq!(done.state.status(), RunStatus::Completed);
    assert_eq!(done.state.output, Some(json!({"draft": {"text": "d2"}})));
}

fn approve(state: RunState, decision: ApprovalDecision, context: &EngineContext<'_>) -> Decision {
    let request_id = state
        .governance
        .pending_request()
        .map(|request| request.request_id.clone())
        .unwrap();
    let decided = resolve_approval(
        state,
        ApprovalResolution {
            request_id: &request_id,
            decision,
            note: Some("checked"),
            by: &Answerer::default(),
        },
        NOW,
        context,
    )
    .unwrap()
    .unwrap();
    assert_frames_match_schemas(&decided.events);
    decided
}

#[test]
fn approval_chains_table() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let on_start = json!({"kind": "onStart"});
    struct Chain {
        name: &'static str,
        action: Value,
        decision: ApprovalDecision,
        status: RunStatus,
        events: Vec<&'static str>,
        outbox: Vec<&'static str>,
    }
    let rows = vec![
        Chain {
            name: "approve with no follow-up resumes",
            action: json!({"type": "hitl"}),
            decision: ApprovalDecision::Approve,
            status: RunStatus::Running,
            events: vec!["hitl_resolved", "plan_generated"],
            outbox: vec!["run:node_1:1"],
        },
        Chain {
            name: "reject with no follow-up fails the run",
            action: json!({"type": "hitl"}),
            decision: ApprovalDecision::Reject,
            status: RunStatus::Failed,
            events: vec!["hitl_resolved", "metrics", "error"],
            outbox: vec![],
        },
        Chain {
            name: "approveAction emit runs, then the run resumes",
            action: json!({"type": "hitl", "approveAction": {"type": "emit", "event": "approved"}}),
            decision: ApprovalDecision::Approve,
            status: RunStatus::Running,
            events: vec!["hitl_resolved", "policy_triggered", "log", "plan_generated"],
            outbox: vec!["run:node_1:1"],
        },
        Chain {
            name: "rejectAction pause: the run pauses instead of failing",
            action: json!({"type": "hitl", "rejectAction": {"type": "pause", "reason": "later"}}),
            decision: ApprovalDecision::Reject,
            status: RunStatus::Paused,
            events: vec!["hitl_resolved", "policy_triggered"],
            outbox: vec![],
        },
        Chain {
            name: "approveAction fail: approval can still end the run",
            action: json!({"type": "hitl", "approveAction": {"type": "fail", "message": "approved to stop"}}),
            decision: ApprovalDecision::Approve,
            status: RunStatus::Failed,
            events: vec!["hitl_resolved", "policy_triggered", "metrics", "error"],
            outbox: vec![],
        },
        Chain {
            name: "rejectAction hitl: a second approval request (nested chain)",
            action: json!({"type": "hitl", "rejectAction": {"type": "hitl", "rationale": "escalate",
                           "rejectAction": {"type": "fail"}}}),
            decision: ApprovalDecision::Reject,
            status: RunStatus::AwaitingHitl,
            events: vec!["hitl_resolved", "policy_triggered", "hitl_request"],
            outbox: vec![],
        },
    ];
    for row in rows {
        let held = planned_with(
            json!([policy("gate", on_start.clone(), row.action.clone())]),
            &context,
        );
        assert_eq!(held.state.status(), RunStatus::AwaitingHitl, "{}", row.name);
        let decided = approve(held.state, row.decision, &context);
        assert_eq!(decided.state.status(), row.status, "{}", row.name);
        assert_eq!(event_types(&decided), row.events, "{}", row.name);
        assert_eq!(outbox(&decided), row.outbox, "{}", row.name);
    }
    // The nested chain: the escalation's own rejectAction fails the run.
    let held = planned_with(
        json!([policy(
            "gate",
            on_start.clone(),
            json!({"type": "hitl",
            "rejectAction": {"type": "hitl", "rejectAction": {"type": "fail", "message": "no twice"}}})
        )]),
        &context,
    );
    let escalated = approve(held.state, ApprovalDecision::Reject, &context);
    assert_eq!(
        escalated
            .state
            .governance
            .pending_request()
            .unwrap()
            .request_id,
        "run:hitl:2"
    );
    let failed = approve(escalated.state, ApprovalDecision::Reject, &context);
    assert_eq!(failed.state.status(), RunStatus::Failed);
    assert_eq!(
        failed.state.failure.as_ref().unwrap().code,
        FailureCode::PolicyFailed
    );
}

#[test]
fn an_approval_with_approvers_is_decided_by_a_member_only_and_names_who_decided() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let held = planned_with(
        json!([policy(
            "gate",
            json!({"kind": "onStart"}),
            json!({"type": "hitl", "approvers": {"users": ["user_a"], "roles": ["group_b"]}})
        )]),
        &context,
    )
    .state;
    let decide = |by: &Answerer| {
        resolve_approval(
            held.clone(),
            ApprovalResolution {
                request_id: "run:hitl:1",
                decision: ApprovalDecision::Approve,
                note: None,
                by,
            },
            NOW,
            &context,
        )
        .unwrap()
    };
    let outsider = Answerer {
        user: Some("user_c".into()),
        groups: vec!["group_c".into()],
        may_answer_any_task: false,
    };
    assert_eq!(
        decide(&outsider),
        Err(HumanInputRefused::NotAssignee {
            assigned_to: Assignment {
                users: vec!["user_a".into()],
                groups: vec!["group_b".into()],
            }
        })
    );
    let member = Answerer {
        user: Some("user_d".into()),
        groups: vec!["group_b".into()],
        may_answer_any_task: false,
    };
    let decided = decide(&member).unwrap();
    assert_eq!(decided.state.status(), RunStatus::Running);
    let resolved = decided
        .events
        .iter()
        .find(|event| event.event_type == crate::wire::event::EventType::HitlResolved)
        .and_then(|event| event.payload_value())
        .unwrap();
    assert_eq!(resolved["decidedBy"], "user_d");
    // An operator (an admin, the local CLI) may decide any approval.
    assert!(decide(&Answerer::operator(None)).is_ok());
}

#[test]
fn resolutions_that_cannot_apply_change_nothing_and_say_why() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let held = planned_with(
        json!([policy(
            "gate",
            json!({"kind": "onStart"}),
            json!({"type": "hitl"})
        )]),
        &context,
    )
    .state;
    let wrong = resolve_approval(
        held.clone(),
        ApprovalResolution {
            request_id: "run:hitl:9",
            decision: ApprovalDecision::Approve,
            note: None,
            by: &Answerer::default(),
        },
        NOW,
        &context,
    )
    .unwrap();
    assert_eq!(
        wrong,
        Err(HumanInputRefused::UnknownRequest {
            pending: "run:hitl:1".into()
        })
    );
    let resumed = approve(held.clone(), ApprovalDecision::Approve, &context);
    let twice = resolve_approval(
        resumed.state,
        ApprovalResolution {
            request_id: "run:hitl:1",
            decision: ApprovalDecision::Approve,
            note: None,
            by: &Answerer::default(),
        },
        NOW,
        &context,
    )
    .unwrap();
    assert_eq!(
        twice,
        Err(HumanInputRefused::NoPendingRequest {
            run_status: RunStatus::Running
        })
    );
    assert_eq!(
        resume_paused_run(held, 1, NOW, &context).unwrap(),
        Err(HumanInputRefused::NotPaused {
            run_status: RunStatus::AwaitingHitl
        })
    );
}

#[test]
fn a_pause_resumes_without_a_new_plan_version() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let paused = planned_with(
        json!([policy(
            "hold",
            json!({"kind": "onStart"}),
            json!({"type": "pause"})
        )]),
        &context,
    )
    .state;
    assert!(matches!(paused.governance.hold, Some(Hold::Paused { .. })));
    assert_eq!(
        resume_paused_run(paused.clone(), 7, NOW, &context).unwrap(),
        Err(HumanInputRefused::StalePlanVersion { current: 1 })
    );
    let resumed = resume_paused_run(paused, 1, NOW, &context)
        .unwrap()
        .unwrap();
    assert_frames_match_schemas(&resumed.events);
    assert_eq!(event_types(&resumed), ["plan_generated"]);
    assert_eq!(
        story(&resumed)[0].payload.as_ref().unwrap()["metadata"]["resumed"],
        true
    );
    assert_eq!(resumed.state.plan_version(), 1);
    assert_eq!(resumed.state.status(), RunStatus::Running);
    assert_eq!(outbox(&resumed), ["run:node_1:1"]);
}

#[test]
fn hold_actions_behind_a_pending_request_wait_for_it() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let on_start = json!({"kind": "onStart"});
    let held = planned_with(
        json!([
            policy("first", on_start.clone(), json!({"type": "hitl"})),
            policy("second", on_start, json!({"type": "pause"}))
        ]),
        &context,
    );
    assert_eq!(firings(&held).len(), 2, "both fire");
    assert_eq!(held.state.governance.deferred.len(), 1);
    let approved = approve(held.state, ApprovalDecision::Approve, &context);
    assert_eq!(
        approved.state.status(),
        RunStatus::Paused,
        "the pause applies next"
    );
    assert!(outbox(&approved).is_empty());
    let resumed = resume_paused_run(approved.state, 1, NOW, &context)
        .unwrap()
        .unwrap();
    assert_eq!(outbox(&resumed), ["run:node_1:1"]);
}

#[test]
fn manual_policies_fire_on_request_only() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let running = planned_with(
        json!([policy(
            "stop",
            json!({"kind": "manual"}),
            json!({"type": "fail", "message": "operator stop"})
        )]),
        &context,
    )
    .state;
    assert_eq!(
        running.status(),
        RunStatus::Running,
        "manual never fires by itself"
    );
    assert!(matches!(
        trigger_manual_policy(running.clone(), "other", NOW, &context).unwrap(),
        Err(HumanInputRefused::NoManualPolicy { .. })
    ));
    let stopped = trigger_manual_policy(running, "stop", NOW, &context)
        .unwrap()
        .unwrap();
    assert_frames_match_schemas(&stopped.events);
    assert_eq!(
        event_types(&stopped),
        ["policy_triggered", "metrics", "error"]
    );
    assert_eq!(stopped.state.status(), RunStatus::Failed);
}

fn fire(state: &RunState, timer_id: &str, context: &EngineContext<'_>) -> StepAdvance {
    let later = NOW.plus(std::time::Duration::from_secs(3600));
    let command = StepCommand::FireTimer {
        timer_id: timer_id.into(),
    };
    begin_step(state, &command, later, context).unwrap()
}

fn decided(advance: StepAdvance) -> Decision {
    match advance {
        StepAdvance::Decided(decision) => {
            assert_frames_match_schemas(&decision.events);
            *decision
        }
        other => panic!("expected a decision, got {other:?}"),
    }
}

#[test]
fn an_on_timeout_policy_is_a_durable_timer() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let planned = planned_with(
        json!([policy(
            "slow",
            json!({"kind": "onTimeout", "ms": 60000}),
            json!({"type": "fail", "message": "too slow"})
        )]),
        &context,
    );
    let timer = planned
        .outbox
        .iter()
        .find(|message| message.message_id == "run:timer:policy:slow")
        .expect("a delayed timer message");
    assert_eq!(
        timer.not_before,
        Some(NOW.plus(std::time::Duration::from_secs(60)))
    );
    let fired = decided(fire(&planned.state, &policy_timer_id("slow"), &context));
    assert_eq!(
        event_types(&fired),
        ["policy_triggered", "metrics", "error"]
    );
    assert_eq!(fired.state.status(), RunStatus::Failed);
    // A duplicate delivery of the timer finds nothing to do.
    assert_eq!(
        fire(&fired.state, &policy_timer_id("slow"), &context),
        StepAdvance::Stale
    );
}

/// The run parked on `node_2` made human, under `policies`.
fn parked_with(policies: Value, context: &EngineContext<'_>) -> RunState {
    let planned = planned_with(policies, context);
    let mut state = step(planned.state, answer("node_1", 1, brief("b")), context).state;
    if let Some(plan) = state.plan.as_mut() {
        let plan = Arc::make_mut(plan);
        if let Some(node) = plan.nodes.iter_mut().find(|node| node.node_id == "node_2") {
            node.executor = crate::planning::plan::NodeExecutor::Human;
        }
    }
    step(
        state,
        Observed::Begin {
            node: "node_2",
            attempt: 1,
        },
        context,
    )
    .state
}

#[test]
fn a_human_task_past_its_sla_fails_the_run_or_fires_on_timeout() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let sla = human_sla_timer_id("node_2", 1);
    let parked = parked_with(json!([]), &context);
    assert_eq!(
        parked.governance.timers[&sla].due_at,
        NOW.plus(DEFAULT_HUMAN_TASK_TIMEOUT)
    );
    let timed_out = decided(fire(&parked, &sla, &context));
    assert_eq!(event_types(&timed_out), ["node_error", "metrics", "error"]);
    assert_eq!(timed_out.state.status(), RunStatus::Failed);
    let failure = timed_out.state.failure.unwrap();
    assert_eq!(failure.code, FailureCode::HumanTaskTimedOut);
    assert!(failure.message.contains("SLA"), "{}", failure.message);

    let escalating = parked_with(
        json!([policy(
            "escalate",
            json!({"kind": "onTimeout", "ms": 86_400_000}),
            json!({"type": "hitl", "rationale": "nobody answered"})
        )]),
        &context,
    );
    let escalated = decided(fire(&escalating, &sla, &context));
    assert_eq!(
        event_types(&escalated),
        ["policy_triggered", "hitl_request"]
    );
    assert_eq!(escalated.state.status(), RunStatus::AwaitingHitl);
    assert_eq!(
        escalated.state.nodes["node_2"].status(),
        NodeStatus::AwaitingHuman,
        "the task still waits for its person"
    );
}

#[test]
fn a_clarifying_question_holds_the_run_and_the_node_reruns_with_the_answer() {
    let registry = registry_where_may_clarify(Some("plan.brief"));
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let planned = planned_with(json!([]), &context);
    let asked = step(
        planned.state,
        answer(
            "node_1",
            1,
            json!({"clarify": {"question": "Which market?"}}),
        ),
        &context,
    );
    assert_eq!(asked.state.status(), RunStatus::AwaitingHitl);
    assert_eq!(event_types(&asked), ["hitl_request"]);
    let request = story(&asked)[0].payload_value().unwrap();
    assert_eq!(request["kind"], "clarify");
    assert_eq!(request["operatorPrompt"], "Which market?");
    assert_eq!(request["questionId"], "node_1:q1");
    assert!(outbox(&asked).is_empty());
    let version = asked.state.plan_version();
    assert_eq!(
        answer_clarification(
            asked.state.clone(),
            ClarificationAnswer {
                request_id: None,
                expected_plan_version: version,
                answer: "  ",
                answered_by: None,
            },
            NOW,
            &context,
        )
        .unwrap(),
        Err(HumanInputRefused::AnswerRequired)
    );
    let answered = answer_clarification(
        asked.state,
        ClarificationAnswer {
            request_id: None,
            expected_plan_version: version,
            answer: "the Nordics",
            answered_by: None,
        },
        NOW,
        &context,
    )
    .unwrap()
    .unwrap();
    assert_frames_match_schemas(&answered.events);
    assert_eq!(event_types(&answered), ["hitl_resolved", "plan_generated"]);
    assert_eq!(
        answered.state.plan_version(),
        version,
        "no new plan version"
    );
    assert_eq!(
        outbox(&answered),
        ["run:node_1:2"],
        "the same node runs again"
    );
    let entry = &answered.state.governance.clarifications[0];
    assert_eq!(entry.answer.as_deref(), Some("the Nordics"));
    assert!(entry.answered_at.is_some());
    // The re-run's request carries the answer, and the clarify way out.
    let rerun = begin_step(&answered.state, &node_command("node_1", 2), NOW, &context).unwrap();
    let StepAdvance::Perform(Effect::CallModel(call)) = rerun else {
        panic!("expected a model call")
    };
    let user: Value = serde_json::from_str(&call.request.user_message).unwrap();
    assert_eq!(user["hitlClarifications"][0]["answer"], "the Nordics");
    assert!(call.request.output_schema["anyOf"].is_array());
    // The clarified attempt does not count: two more answers may still fail.
    assert_eq!(answered.state.nodes["node_1"].attempt_base, 1);
}

/// The facets a frame's provenance names, input then output.
fn provenance_facets(frame: &EventDraft) -> (Vec<String>, Vec<String>) {
    let provenance = frame
        .facet_provenance
        .as_ref()
        .unwrap_or_else(|| panic!("{} carries no provenance", frame.event_type.as_str()));
    let facets = |entries: &[crate::contracts::compiler::FacetProvenance]| {
        entries.iter().map(|entry| entry.facet.clone()).collect()
    };
    (facets(&provenance.input), facets(&provenance.output))
}

fn frame_of<'d>(decision: &'d Decision, kind: &str) -> &'d EventDraft {
    decision
        .events
        .iter()
        .find(|event| event.event_type.as_str() == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:?}", event_types(decision)))
}

#[test]
fn planner_policy_and_person_frames_carry_facet_provenance() {
    let registry = registry();
    let validators = ValidatorCache::new();
    let context = engine(&registry, &validators);
    let planned = planned_with(
        json!([policy(
            "check-brief",
            json!({"kind": "onNodeComplete", "selector": {"nodeId": "node_1"}}),
            json!({"type": "hitl", "rationale": "look at the brief"})
        )]),
        &context,
    );
    // The plan: where the delivered property will come from.
    assert_eq!(
        provenance_facets(frame_of(&planned, "plan_generated")),
        (vec![], vec!["draft".to_string()])
    );
    // The policy and the person's request are about node_1: its contracts.
    let held = step(planned.state, answer("node_1", 1, brief("b")), &context);
    for kind in ["policy_triggered", "hitl_request"] {
        assert_eq!(
            provenance_facets(frame_of(&held, kind)),
            (vec!["notes".to_string()], vec!["brief".to_string()]),
            "{kind}"
        );
    }
    let resolved = approve(held.state, ApprovalDecision::Approve, &context);
    assert_eq!(
        provenance_facets(frame_of(&resolved, "hitl_resolved")),
        (vec!["notes".to_string()], vec!["brief".to_string()])
    );
    // A policy about the run as a whole: the delivered provenance.
    let on_start = planned_with(
        json!([policy(
            "hello",
            json!({"kind": "onStart"}),
            json!({"type": "hitl"})
        )]),
        &context,
    );
    assert_eq!(
        provenance_facets(frame_of(&on_start, "policy_triggered")),
        (vec![], vec!["draft".to_string()])
    );
}
