//! Conformance of large payloads: what one store accepts every store
//! accepts, whatever its item limits (DynamoDB's 400 KB per item). Each
//! case commits a state and frames as a run would and reads them back
//! whole: a 1 MiB node output (in the state, its `node_complete` and the
//! run's `complete`), a 1 MiB answer from a person, a 500-turn
//! conversation, a 50-judge panel. Texts are pseudo-random (they do not
//! deflate away), so a store that splits what it cannot hold in one item
//! is made to.

use std::sync::Arc;

use baton_core::basics::ids::RunKey;
use baton_core::state::run::{NodeRecord, NodeStatus, RunState, RunStatus};
use baton_core::wire::event::{EventDraft, EventType};
use serde_json::{Value, json};

use super::{check, commit, log, new_run};
use baton_runtime::error::StoreError;
use baton_runtime::ports::{CreateOutcome, RunStore};

const MIB: usize = 1024 * 1024;

/// `bytes` of text that do not compress much (an xorshift over a seed,
/// as letters and digits): what a store must hold without deflating it away.
pub fn incompressible_text(bytes: usize, seed: u64) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..bytes)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
        })
        .collect()
}

fn frame(event_type: EventType, node_id: &str, message: String) -> EventDraft {
    let mut frame = log(&message);
    frame.event_type = event_type;
    frame.node_id = Some(node_id.to_string());
    frame
}

fn completed(output: Value) -> Arc<NodeRecord> {
    let mut record = NodeRecord::pending();
    record.set_status_for_fixtures(NodeStatus::Completed);
    record.current_attempt = 1;
    record.output = Some(Arc::new(output));
    Arc::new(record)
}

/// One commit of a case: node records to set and frames to append.
type Step = (Vec<(String, Value)>, Vec<EventDraft>);

/// Commits each step's nodes into the state of a new run and its frames
/// after the run's start, then reads the state and the frames back and
/// compares them with what was written.
async fn round_trip(
    store: &dyn RunStore,
    tenant: &str,
    run_id: &str,
    steps: Vec<Step>,
    ends: bool,
    case: &str,
) -> Result<(), String> {
    let failed = |error: StoreError| format!("{case}: store error: {error}");
    let (state, events, _outbox) = new_run(tenant, run_id);
    check(
        store
            .create_run(&state, events, vec![], None)
            .await
            .map_err(failed)?
            == CreateOutcome::Created,
        &format!("{case}: the run is created"),
    )?;
    let mut next: RunState = state;
    let mut version = 1;
    let mut expected_frames: Vec<(EventType, Option<String>)> = Vec::new();
    let last = steps.len().saturating_sub(1);
    for (index, (nodes, frames)) in steps.into_iter().enumerate() {
        let previous_status = next.status();
        for (node_id, output) in nodes {
            next.nodes.insert(node_id, completed(output));
        }
        if ends && index == last {
            next.set_status_for_fixtures(RunStatus::Completed);
        }
        expected_frames.extend(
            frames
                .iter()
                .map(|frame| (frame.event_type, frame.message.clone())),
        );
        version = store
            .commit_step(
                RunKey::new(tenant, run_id),
                commit(version, previous_status, next.clone(), frames, vec![], None),
            )
            .await
            .map_err(failed)?;
    }
    let loaded = store
        .load_run(RunKey::new(tenant, run_id))
        .await
        .map_err(failed)?
        .ok_or(format!("{case}: the run loads"))?;
    check(
        loaded.version == version && loaded.state == next,
        &format!("{case}: the state reads back whole"),
    )?;
    let read = store
        .read_events(RunKey::new(tenant, run_id), 1, 1_000)
        .await
        .map_err(failed)?;
    let read: Vec<(EventType, Option<String>)> = read
        .into_iter()
        .map(|frame| (frame.event_type, frame.draft.message))
        .collect();
    check(
        read == expected_frames,
        &format!(
            "{case}: the frames read back whole ({} of {} frames)",
            read.len(),
            expected_frames.len()
        ),
    )?;
    // A later read from the middle returns the frames after it, whole.
    if expected_frames.len() > 1 {
        let tail = store
            .read_events(RunKey::new(tenant, run_id), 2, 1_000)
            .await
            .map_err(failed)?;
        check(
            tail.len() == expected_frames.len() - 1
                && tail.first().map(|frame| frame.message.clone())
                    == Some(expected_frames[1].1.clone()),
            &format!("{case}: a read after a large frame starts at the next one"),
        )?;
    }
    Ok(())
}

pub(super) async fn large_payload_conformance(
    store: &dyn RunStore,
    tenant: &str,
    unique: &str,
) -> Result<(), String> {
    // A node answers with 1 MiB: in its record, its node_complete, and the
    // run's complete (the run's output).
    let answer = incompressible_text(MIB, 1);
    round_trip(
        store,
        tenant,
        &format!("run-{unique}-large-output"),
        vec![(
            vec![("node_1".into(), json!({"text": answer}))],
            vec![
                frame(EventType::NodeComplete, "node_1", answer.clone()),
                frame(EventType::Complete, "node_1", answer),
            ],
        )],
        true,
        "a 1 MiB node output",
    )
    .await?;
    // A person answers a task with 1 MiB.
    let answer = incompressible_text(MIB, 2);
    round_trip(
        store,
        tenant,
        &format!("run-{unique}-large-answer"),
        vec![(
            vec![("node_review".into(), json!({"answer": answer}))],
            vec![frame(EventType::HitlResolved, "node_review", answer)],
        )],
        false,
        "a 1 MiB answer from a person",
    )
    .await?;
    // An agent's 500-turn conversation, committed ten turns at a time as
    // its steps commit them: the whole conversation in the state, each
    // turn a frame.
    let mut conversation: Vec<Value> = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    for batch in 0..50_u64 {
        let mut frames = Vec::new();
        for turn in batch * 10..batch * 10 + 10 {
            let content = incompressible_text(1_500, 100 + turn);
            frames.push(frame(EventType::Message, "node_agent", content.clone()));
            conversation.push(json!({"role": if turn % 2 == 0 { "user" } else { "assistant" }, "content": content}));
        }
        steps.push((
            vec![(
                "node_agent".into(),
                json!({"messages": conversation.clone()}),
            )],
            frames,
        ));
    }
    round_trip(
        store,
        tenant,
        &format!("run-{unique}-conversation"),
        steps,
        false,
        "a 500-turn conversation",
    )
    .await?;
    // A 50-judge panel: each judge's scores and rationale in the state.
    let judges: Vec<(String, Value)> = (0..50_u64)
        .map(|judge| {
            (
                format!("node_panel#judge_{judge:02}"),
                json!({"score": judge % 10, "rationale": incompressible_text(20_000, 5_000 + judge)}),
            )
        })
        .collect();
    round_trip(
        store,
        tenant,
        &format!("run-{unique}-panel"),
        vec![(
            judges,
            vec![frame(
                EventType::NodeComplete,
                "node_panel",
                incompressible_text(50_000, 9),
            )],
        )],
        false,
        "a 50-judge panel",
    )
    .await
}
