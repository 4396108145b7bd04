//! Conformance of the runs list: newest first by creation time then run
//! id, pages that follow each other by cursor without gaps or repeats, the
//! status filter (after a commit changes a status), the forks of a run,
//! tenant isolation.

use baton_core::basics::ids::RunKey;
use baton_core::basics::instant::Instant;
use baton_core::state::listing::{ListCursor, RunListPage, RunListQuery};
use baton_core::state::run::RunStatus;

use super::{NOW, check, commit, new_run};
use baton_runtime::error::StoreError;
use baton_runtime::ports::RunStore;

fn ids(page: &RunListPage) -> Vec<String> {
    page.runs
        .iter()
        .map(|listing| listing.run_id.clone())
        .collect()
}

pub(super) async fn run_list_conformance(store: &dyn RunStore, unique: &str) -> Result<(), String> {
    let failed = |error: StoreError| format!("store error: {error}");
    let tenant = format!("tenant-{unique}-list");
    // Five runs a second apart, the last two created in the same millisecond
    // (their ids decide), and one run of another tenant.
    let created_offsets = [0_u64, 1_000, 2_000, 3_000, 3_000];
    let mut versions = Vec::new();
    for (index, offset) in created_offsets.iter().enumerate() {
        let run_id = format!("list-{unique}-{index}");
        let (mut state, events, outbox) = new_run(&tenant, &run_id);
        state.created_at = Instant::from_unix_millis(NOW.unix_millis() + offset);
        store
            .create_run(&state, events, outbox, None)
            .await
            .map_err(failed)?;
        versions.push(state);
    }
    let (other, events, outbox) = new_run(&format!("{tenant}-other"), &format!("list-{unique}-x"));
    store
        .create_run(&other, events, outbox, None)
        .await
        .map_err(failed)?;
    let run = |index: usize| format!("list-{unique}-{index}");

    // Pages of two, newest first, the cursor carrying on exactly.
    let mut query = RunListQuery {
        status: None,
        limit: 2,
        cursor: None,
        forked_from: None,
    };
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = store.list_runs(&tenant, &query).await.map_err(failed)?;
        pages += 1;
        check(page.runs.len() <= 2, "a page holds at most `limit` runs")?;
        seen.extend(ids(&page));
        let Some(next) = page.next_cursor else {
            break;
        };
        query.cursor = Some(ListCursor::parse(&next).ok_or("a page's cursor parses")?);
        check(pages < 10, "the pages end")?;
    }
    check(
        seen == [run(4), run(3), run(2), run(1), run(0)],
        &format!("newest first, ties by run id descending, no gap or repeat: {seen:?}"),
    )?;
    check(
        pages == 3,
        &format!("five runs in pages of two are three pages, not {pages}"),
    )?;
    let everything = RunListQuery {
        status: None,
        limit: 5,
        cursor: None,
        forked_from: None,
    };
    let whole = store
        .list_runs(&tenant, &everything)
        .await
        .map_err(failed)?;
    check(
        whole.runs.len() == 5 && whole.next_cursor.is_none(),
        "a page holding the last run has no cursor",
    )?;
    check(
        whole.runs[0].status == RunStatus::Queued && whole.runs[0].objective == "conformance",
        "a listing carries the run's status and objective",
    )?;

    // A commit that changes a status moves the run into that status's list.
    let mut completed = versions[1].clone();
    completed.set_status_for_fixtures(RunStatus::Completed);
    store
        .commit_step(
            RunKey::new(&tenant, &run(1)),
            commit(1, RunStatus::Queued, completed, vec![], vec![], None),
        )
        .await
        .map_err(failed)?;
    let mut also_completed = versions[3].clone();
    also_completed.set_status_for_fixtures(RunStatus::Completed);
    store
        .commit_step(
            RunKey::new(&tenant, &run(3)),
            commit(1, RunStatus::Queued, also_completed, vec![], vec![], None),
        )
        .await
        .map_err(failed)?;
    let completed_only = RunListQuery {
        status: Some(RunStatus::Completed),
        limit: 1,
        cursor: None,
        forked_from: None,
    };
    let first = store
        .list_runs(&tenant, &completed_only)
        .await
        .map_err(failed)?;
    check(
        ids(&first) == [run(3)],
        &format!("completed runs, newest first: {:?}", ids(&first)),
    )?;
    let next = first.next_cursor.as_deref().and_then(ListCursor::parse);
    check(next.is_some(), "another completed run remains")?;
    let second = store
        .list_runs(
            &tenant,
            &RunListQuery {
                cursor: next,
                ..completed_only.clone()
            },
        )
        .await
        .map_err(failed)?;
    check(
        ids(&second) == [run(1)] && second.next_cursor.is_none(),
        &format!("the second completed run, and no more: {:?}", ids(&second)),
    )?;
    let queued = store
        .list_runs(
            &tenant,
            &RunListQuery {
                status: Some(RunStatus::Queued),
                limit: 10,
                cursor: None,
                forked_from: None,
            },
        )
        .await
        .map_err(failed)?;
    check(
        ids(&queued) == [run(4), run(2), run(0)],
        &format!("a status's list leaves the others out: {:?}", ids(&queued)),
    )?;

    // A fork lists under its source; the source's forks are only its own.
    let (mut fork, events, outbox) = new_run(&tenant, &format!("list-{unique}-fork"));
    fork.created_at = Instant::from_unix_millis(NOW.unix_millis() + 4_000);
    fork.forked_from = Some(Box::new(baton_core::state::run::ForkOrigin {
        run_id: run(2),
        at: "planVersion 1".into(),
        reused_nodes: Vec::new(),
    }));
    store
        .create_run(&fork, events, outbox, None)
        .await
        .map_err(failed)?;
    let forks_of = |source: String| RunListQuery {
        forked_from: Some(source),
        ..everything.clone()
    };
    let forks = store
        .list_runs(&tenant, &forks_of(run(2)))
        .await
        .map_err(failed)?;
    check(
        ids(&forks) == [format!("list-{unique}-fork")]
            && forks.runs[0].forked_from_run_id.as_deref() == Some(run(2).as_str()),
        &format!("the forks of a run, naming it: {:?}", ids(&forks)),
    )?;
    check(
        store
            .list_runs(&tenant, &forks_of(run(1)))
            .await
            .map_err(failed)?
            .runs
            .is_empty(),
        "a run without forks lists none",
    )?;
    let fork_status = fork.status();
    let other_status = RunStatus::ALL
        .into_iter()
        .find(|status| *status != fork_status)
        .unwrap_or(fork_status);
    for (status, expected) in [(fork_status, 1), (other_status, 0)] {
        let listed = store
            .list_runs(
                &tenant,
                &RunListQuery {
                    status: Some(status),
                    ..forks_of(run(2))
                },
            )
            .await
            .map_err(failed)?;
        check(
            listed.runs.len() == expected,
            &format!(
                "the forks of a run, of status {}: {:?}",
                status.as_str(),
                ids(&listed)
            ),
        )?;
    }

    // Tenants do not see each other's runs.
    let others = store
        .list_runs(&format!("{tenant}-other"), &everything)
        .await
        .map_err(failed)?;
    check(
        ids(&others) == [format!("list-{unique}-x")],
        "another tenant's list holds its own run only",
    )?;
    Ok(())
}
