//! The humans-in-the-loop scenarios, driven through the HTTP API of a real
//! `baton serve` process, whatever store it runs on: a human task (listed,
//! a 422 that changes nothing, two concurrent answers of which one wins),
//! a decline, an approval approved and one rejected, a clarifying question,
//! a `replan` policy, and a pause resumed without a new plan version.
//!
//! The scripted model server stands in for the model; everything else is
//! the real binary and its store.

use std::time::Duration;

use scripted_llm::{Behavior, ScriptedLlmServer};
use serde_json::{Value, json};

use super::{TOKEN, example, repository};

/// The registry the scenarios serve: the repository's, with one capability
/// allowed to ask clarifying questions (registry data, not code).
pub fn registry_with_a_clarifying_capability(folder: &std::path::Path) -> std::path::PathBuf {
    let target = folder.join("registry");
    copy_directory(&repository().join("registry"), &target);
    let path = target.join("capabilities/StrategyManager.writerBrief.json");
    let mut capability: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    capability["allowsClarify"] = json!(true);
    std::fs::write(&path, capability.to_string()).unwrap();
    target
}

fn copy_directory(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_directory(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub struct People<'a> {
    pub base: &'a str,
    pub model: &'a ScriptedLlmServer,
    pub client: reqwest::Client,
}

impl People<'_> {
    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn submit(&self, envelope: &Value) -> String {
        let (status, body) = self.post("/runs", envelope).await;
        assert_eq!(status, 202, "{body}");
        body["runId"].as_str().unwrap().to_string()
    }

    /// Polls the run until its status is one of `statuses` (the worker runs
    /// in the serve process); returns the snapshot.
    async fn settled(&self, run_id: &str, statuses: &[&str]) -> Value {
        for _ in 0..600 {
            let snapshot = self.get(&format!("/runs/{run_id}")).await;
            let status = snapshot["run"]["status"].as_str().unwrap_or_default();
            if statuses.contains(&status) {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run {run_id} never reached {statuses:?}");
    }

    /// Every frame of the run so far.
    async fn frames(&self, run_id: &str) -> Vec<Value> {
        let response = self
            .client
            .get(format!("{}/runs/{run_id}/events", self.base))
            .bearer_auth(TOKEN)
            .header("Accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        super::read_sse(response).await
    }
}

/// The frame types, without the narration (`phase`, `handoff`, a node's
/// `metrics`; checked in the engine's narration test).
fn types(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .filter(|frame| {
            !(matches!(frame["type"].as_str(), Some("phase" | "handoff"))
                || (frame["type"] == "metrics" && frame.get("nodeId").is_some()))
        })
        .map(|frame| frame["type"].as_str().unwrap())
        .collect()
}

fn with_policies(mut envelope: Value, policies: Value) -> Value {
    envelope["policies"]["runtime"] = policies;
    envelope
}

fn human_review() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(
            repository().join("functions/baton/tests/fixtures/human-review.json"),
        )
        .unwrap(),
    )
    .unwrap()
}

/// Every scenario, one after the other, on one serve process.
pub async fn every_scenario(people: &People<'_>) {
    a_human_task_is_answered_once(people).await;
    a_declined_task_fails_the_run(people).await;
    approvals_approved_and_rejected(people).await;
    a_clarifying_question_round_trip(people).await;
    a_replan_policy_updates_the_plan(people).await;
    a_pause_resumes_without_a_new_plan_version(people).await;
}

async fn a_human_task_is_answered_once(people: &People<'_>) {
    let run_id = people.submit(&human_review()).await;
    let snapshot = people.settled(&run_id, &["awaiting_human"]).await;
    let version = snapshot["run"]["version"].clone();
    let listed = people.get("/tasks?status=pending").await;
    let task = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["runId"] == run_id)
        .expect("the run's task is listed")
        .clone();
    assert!(task["dueAt"].is_string(), "{task}");
    let capability = task["capabilityId"].as_str().unwrap();
    let of_capability = people
        .get(&format!("/tasks?status=pending&capabilityId={capability}"))
        .await;
    assert!(
        of_capability["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|listed| listed["taskId"] == task["taskId"]),
        "{of_capability}"
    );
    let of_another = people.get("/tasks?capabilityId=nobody.atAll").await;
    assert_eq!(of_another["tasks"], json!([]));
    assert!(
        task["instructionTemplates"]["title"].is_string()
            && task["assignmentDefaults"]["maxNotifications"] == 1,
        "the registration's task surface travels with the task: {task}"
    );
    let (status, body) = people
        .post(
            "/run.resume",
            &json!({"taskId": task["taskId"], "expectedPlanVersion": task["planVersion"], "output": {"positioning": 7}}),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"]["details"]["errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|error| error["path"] == "$.output.positioning"),
        "{body}"
    );
    let unchanged = people.get(&format!("/runs/{run_id}")).await;
    assert_eq!(unchanged["run"]["version"], version, "nothing changed");

    let output = scripted_llm::generate_instance(&task["outputSchema"], "answer");
    let answer = json!({"taskId": task["taskId"], "expectedPlanVersion": task["planVersion"], "output": output});
    let (first, second) = tokio::join!(
        people.post("/run.resume", &answer),
        people.post("/run.resume", &answer)
    );
    let mut statuses = vec![first.0, second.0];
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [200, 409],
        "exactly one wins: {first:?} {second:?}"
    );
    people.settled(&run_id, &["completed"]).await;
    let parked_on = people.frames(&run_id).await;
    let parked_start = parked_on
        .iter()
        .find(|frame| frame["type"] == "node_start" && frame["payload"]["executorType"] == "human")
        .unwrap();
    assert_eq!(
        parked_start["payload"]["dueAt"], task["dueAt"],
        "node_start carries the SLA"
    );
    let left = people.get("/tasks").await;
    assert!(
        left["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|listed| listed["runId"] != run_id),
        "an answered task is no longer listed: {left}"
    );
    let frames = people.frames(&run_id).await;
    let node_id = task["nodeId"].as_str().unwrap();
    let completions = frames
        .iter()
        .filter(|frame| frame["type"] == "node_complete" && frame["nodeId"] == node_id)
        .count();
    assert_eq!(completions, 1, "one transition, no duplicate frame");
    let resumed = frames
        .iter()
        .filter(|frame| frame["type"] == "plan_generated")
        .filter(|frame| frame["payload"]["metadata"]["resumed"] == true)
        .count();
    assert_eq!(resumed, 1, "{:?}", types(&frames));
    assert_eq!(types(&frames).last(), Some(&"complete"));
}

async fn a_declined_task_fails_the_run(people: &People<'_>) {
    let run_id = people.submit(&human_review()).await;
    people.settled(&run_id, &["awaiting_human"]).await;
    let listed = people.get("/tasks").await;
    let task_id = listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|task| task["runId"] == run_id)
        .unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, body) = people
        .post(
            &format!("/tasks/{task_id}/decline"),
            &json!({"reasonCode": "conflict_of_interest", "note": "I wrote the brief"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let snapshot = people.settled(&run_id, &["failed"]).await;
    assert_eq!(snapshot["run"]["failure"]["code"], "human_declined");
    let message = snapshot["run"]["failure"]["message"].as_str().unwrap();
    assert!(message.contains("conflict_of_interest") && message.contains("I wrote the brief"));
}

async fn approvals_approved_and_rejected(people: &People<'_>) {
    let gated = with_policies(
        example("seed-10.1-sample-envelope.json"),
        json!([{"id": "sign_off", "trigger": {"kind": "onNodeComplete", "selector": {"nodeId": "node_1"}},
                "action": {"type": "hitl", "rationale": "Sign off the writer brief"}}]),
    );
    for (decision, outcome) in [("approve", "completed"), ("reject", "failed")] {
        let run_id = people.submit(&gated).await;
        let held = people.settled(&run_id, &["awaiting_hitl"]).await;
        assert_eq!(held["run"]["pendingRequest"]["kind"], "approval", "{held}");
        let pending = people.get("/hitl/requests").await;
        let listed = pending["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|request| request["runId"] == run_id)
            .expect("the request is listed");
        assert_eq!(listed["pendingNodeId"], "node_1");
        let frames = people.frames(&run_id).await;
        let request = frames
            .iter()
            .find(|frame| frame["type"] == "hitl_request")
            .expect("a hitl_request frame");
        assert_eq!(request["payload"]["pendingNodeId"], "node_1");
        assert_eq!(
            request["payload"]["operatorPrompt"],
            "Sign off the writer brief"
        );
        assert!(request["payload"]["contractSummary"]["outputSchema"].is_object());
        let request_id = request["payload"]["requestId"].clone();
        let (status, body) = people
            .post(
                "/hitl/resolve",
                &json!({"runId": run_id, "requestId": request_id, "decision": decision, "note": "checked"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (again, _) = people
            .post(
                "/hitl/resolve",
                &json!({"runId": run_id, "requestId": request_id, "decision": decision}),
            )
            .await;
        assert_eq!(again, 409, "a request is resolved once");
        let snapshot = people.settled(&run_id, &[outcome]).await;
        let still = people.get("/hitl/requests").await;
        assert!(
            still["requests"]
                .as_array()
                .unwrap()
                .iter()
                .all(|request| request["runId"] != run_id),
            "a resolved request is no longer listed: {still}"
        );
        if outcome == "failed" {
            assert_eq!(snapshot["run"]["failure"]["code"], "hitl_rejected");
        }
        let frames = people.frames(&run_id).await;
        assert!(
            types(&frames).contains(&"hitl_resolved"),
            "{:?}",
            types(&frames)
        );
    }
}

async fn a_clarifying_question_round_trip(people: &People<'_>) {
    people.model.push_behaviors([Behavior::Content {
        content: json!({"clarify": {"question": "Which market first?"}}).to_string(),
    }]);
    let run_id = people
        .submit(&example("seed-10.1-sample-envelope.json"))
        .await;
    let snapshot = people.settled(&run_id, &["awaiting_hitl"]).await;
    let frames = people.frames(&run_id).await;
    let request = frames
        .iter()
        .find(|frame| frame["type"] == "hitl_request")
        .unwrap();
    assert_eq!(request["payload"]["kind"], "clarify");
    assert_eq!(request["payload"]["operatorPrompt"], "Which market first?");
    let plan_version = snapshot["run"]["planVersion"].clone();
    let (status, body) = people
        .post(
            "/run.resume",
            &json!({"runId": run_id, "expectedPlanVersion": plan_version, "answer": "The Nordics"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = people.settled(&run_id, &["completed"]).await;
    assert_eq!(
        done["run"]["planVersion"], plan_version,
        "no new plan version"
    );
    assert_eq!(
        done["run"]["hitlClarifications"][0]["answer"],
        "The Nordics"
    );
    let asked_again = people
        .model
        .requests()
        .iter()
        .any(|request| request.body.to_string().contains("The Nordics"));
    assert!(asked_again, "the node ran again with the answer");
}

async fn a_replan_policy_updates_the_plan(people: &People<'_>) {
    let envelope = with_policies(
        example("seed-10.1-sample-envelope.json"),
        json!([{"id": "redo", "trigger": {"kind": "onNodeComplete", "selector": {"nodeId": "node_2"}},
                "action": {"type": "replan", "rationale": "second opinion"}}]),
    );
    let run_id = people.submit(&envelope).await;
    let snapshot = people.settled(&run_id, &["completed", "failed"]).await;
    assert_eq!(snapshot["run"]["status"], "completed", "{snapshot}");
    assert_eq!(snapshot["run"]["planVersion"], 2);
    let frames = people.frames(&run_id).await;
    let updated = frames
        .iter()
        .find(|frame| frame["type"] == "plan_updated")
        .expect("plan_updated");
    assert_eq!(updated["payload"]["previousVersion"], 1);
    assert_eq!(updated["payload"]["version"], 2);
    assert_eq!(updated["payload"]["policyId"], "redo");
    assert_eq!(updated["payload"]["reusedNodes"], json!(["node_1"]));
    let triggered = frames
        .iter()
        .find(|frame| frame["type"] == "policy_triggered")
        .unwrap();
    assert_eq!(triggered["payload"]["actionDetails"]["type"], "replan");
    assert_eq!(types(&frames).last(), Some(&"complete"));
}

async fn a_pause_resumes_without_a_new_plan_version(people: &People<'_>) {
    let envelope = with_policies(
        example("seed-10.1-sample-envelope.json"),
        json!([{"id": "hold", "trigger": {"kind": "onStart"}, "action": {"type": "pause", "reason": "budget review"}}]),
    );
    let run_id = people.submit(&envelope).await;
    let paused = people.settled(&run_id, &["paused"]).await;
    assert_eq!(paused["run"]["planVersion"], 1);
    let (stale, _) = people
        .post(
            "/run.resume",
            &json!({"runId": run_id, "expectedPlanVersion": 9}),
        )
        .await;
    assert_eq!(stale, 409);
    let (status, body) = people
        .post(
            "/run.resume",
            &json!({"runId": run_id, "expectedPlanVersion": 1}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = people.settled(&run_id, &["completed"]).await;
    assert_eq!(done["run"]["planVersion"], 1, "no re-planning");
    let frames = people.frames(&run_id).await;
    assert!(!types(&frames).contains(&"plan_updated"));
    assert_eq!(
        frames
            .iter()
            .filter(|frame| frame["type"] == "plan_generated")
            .count(),
        2,
        "the plan, then its restatement on resume"
    );
}
