//! Conformance of run entries (`baton_core::records::entries`): written by the
//! commit that carries them and by no other, read back by prefix in key
//! order, kept apart per run and tenant, large ones intact.

use baton_core::basics::ids::RunKey;
use baton_core::records::conversation::SessionTurn;
use baton_core::records::entries::{EntryBody, EntryKey, RunEntry, conversation_prefix};
use baton_judge::panel::JudgeCall;

use super::{check, commit, log};
use baton_runtime::error::StoreError;
use baton_runtime::ports::RunStore;

fn turn_entry(node_id: &str, attempt: u32, seq: u32, content: String) -> RunEntry {
    RunEntry::new(
        &EntryKey::ConversationTurn {
            node_id: node_id.into(),
            attempt,
            seq,
        },
        EntryBody::Turn(SessionTurn::Tool {
            call_id: format!("call_{seq}"),
            content,
        }),
    )
}

fn round_entry(attempt: u32) -> RunEntry {
    RunEntry::new(
        &EntryKey::PanelRound {
            node_id: "node_2".into(),
            attempt,
            round: 0,
        },
        EntryBody::PanelRound(
            ["j1", "j2"]
                .map(|judge_id| JudgeCall {
                    judge_id: judge_id.into(),
                    round: 0,
                    system_prompt: format!("You are {judge_id}."),
                    user_message: format!("Score attempt {attempt}."),
                    model_name: None,
                    model_provider: None,
                })
                .to_vec(),
        ),
    )
}

pub(super) async fn run_entries_conformance(
    store: &dyn RunStore,
    tenant: &str,
    run_id: &str,
) -> Result<(), String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let current = store
        .load_run(RunKey::new(tenant, run_id))
        .await
        .map_err(failed)?
        .ok_or("run still loads")?;
    check(
        store
            .read_entries(RunKey::new(tenant, run_id), "turn#")
            .await
            .map_err(failed)?
            .is_empty(),
        "a run without entries reads none",
    )?;

    // A commit that loses the version race writes no entry.
    let mut losing = commit(
        current.version + 5,
        current.state.status(),
        current.state.clone(),
        vec![log("loser")],
        vec![],
        None,
    );
    losing.entries = vec![turn_entry("node_1", 1, 0, "lost".into())];
    check(
        matches!(
            store.commit_step(RunKey::new(tenant, run_id), losing).await,
            Err(StoreError::VersionConflict { .. })
        ),
        "a stale commit with entries conflicts",
    )?;
    check(
        store
            .read_entries(
                RunKey::new(tenant, run_id),
                &conversation_prefix("node_1", 1),
            )
            .await
            .map_err(failed)?
            .is_empty(),
        "the losing commit wrote no entry",
    )?;

    // Twelve turns over two commits (out of order within one), one of them
    // large, plus another attempt's turn and three judges' calls.
    let large = "x".repeat(120_000);
    let mut first = commit(
        current.version,
        current.state.status(),
        current.state.clone(),
        vec![],
        vec![],
        None,
    );
    first.entries = (0..6)
        .rev()
        .map(|seq| turn_entry("node_1", 1, seq, format!("result {seq}")))
        .chain([turn_entry("node_1", 2, 0, "another attempt".into())])
        .chain([1, 10].map(round_entry))
        .collect();
    let version = store
        .commit_step(RunKey::new(tenant, run_id), first)
        .await
        .map_err(failed)?;
    let mut second = commit(
        version,
        current.state.status(),
        current.state.clone(),
        vec![],
        vec![],
        None,
    );
    second.entries = (6..12)
        .map(|seq| {
            let content = if seq == 7 {
                large.clone()
            } else {
                format!("result {seq}")
            };
            turn_entry("node_1", 1, seq, content)
        })
        .collect();
    store
        .commit_step(RunKey::new(tenant, run_id), second)
        .await
        .map_err(failed)?;

    let turns = store
        .read_entries(
            RunKey::new(tenant, run_id),
            &conversation_prefix("node_1", 1),
        )
        .await
        .map_err(failed)?;
    let expected: Vec<RunEntry> = (0..12)
        .map(|seq| {
            let content = if seq == 7 {
                large.clone()
            } else {
                format!("result {seq}")
            };
            turn_entry("node_1", 1, seq, content)
        })
        .collect();
    check(
        turns.len() == 12,
        "a prefix read returns the conversation's twelve turns and nothing of another attempt",
    )?;
    check(
        turns == expected,
        "turns come back in sequence order, bodies intact (a 120 kB one too)",
    )?;
    let round = store
        .read_entries(RunKey::new(tenant, run_id), &round_entry(1).key)
        .await
        .map_err(failed)?;
    check(
        round == vec![round_entry(1)],
        "a round's key reads that round alone (not attempt 10's)",
    )?;
    check(
        store
            .read_entries(RunKey::new("another-tenant", run_id), "turn#")
            .await
            .map(|entries| entries.is_empty())
            .unwrap_or(true),
        "another tenant reads none of the run's entries",
    )?;
    Ok(())
}
