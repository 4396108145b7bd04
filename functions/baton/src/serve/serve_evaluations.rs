//! `baton serve`'s evaluations (`/api/v1/flex/evaluations`, the
//! `ServedEvaluations` port): a dataset given inline runs on the server's
//! own services under the caller's tenant (so its runs are the tenant's,
//! shown in the viewer, counted by its limits), at most `concurrency`
//! examples at once, judged in process when a panel is given. Each
//! evaluation is kept as one JSON file,
//! `{data dir}/baton/evaluations/{tenant, hex}/{evaluationId}.json`,
//! rewritten (to a temporary file, then renamed) as each example finishes,
//! with its results file (`.jsonl`) and transcripts beside it once done. A
//! tenant runs at most `MAX_RUNNING_PER_TENANT` at once; an evaluation left
//! `running` by a server that stopped is marked `interrupted` at start. An
//! ended evaluation older than its tenant's retention (`BATON_RETENTION_DAYS`,
//! the registry's per-tenant days) is deleted with its files, at start and
//! whenever the tenant starts or lists evaluations.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use baton_core::instant::Instant;
use baton_core::registry::Registry;
use baton_evaluation::results::results_text;
use baton_evaluation::served::{
    EvaluationRecord, EvaluationRequest, EvaluationStatus, InvalidEvaluation,
};
use baton_evaluation::summary::Summary;
use baton_http::evaluation_port::{EvaluationRefusal, ServedEvaluations};
use baton_runtime::services::{RunRetention, Services};
use serde_json::Value;

use crate::eval::eval_judges::EvalJudges;
use crate::eval::eval_runs::ExampleRunner;

/// Evaluations one tenant may have running at once.
pub const MAX_RUNNING_PER_TENANT: usize = 2;

/// Examples at once when the request does not say.
const DEFAULT_CONCURRENCY: usize = 2;

/// The server's evaluations.
pub struct ServeEvaluations {
    services: Services,
    registry: Arc<Registry>,
    retention: RunRetention,
    folder: PathBuf,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

fn refusal(error: InvalidEvaluation) -> EvaluationRefusal {
    EvaluationRefusal::Invalid {
        path: error.path,
        message: error.message,
    }
}

fn unavailable(error: impl std::fmt::Display) -> EvaluationRefusal {
    EvaluationRefusal::Unavailable(error.to_string())
}

/// A tenant id as a folder name (hex of its bytes: no separator, no `..`).
fn tenant_folder(tenant_id: &str) -> String {
    tenant_id
        .bytes()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The tenant id a folder name encodes ([`tenant_folder`] reversed).
fn tenant_of_folder(name: &str) -> String {
    let bytes: Vec<u8> = (0..name.len() / 2)
        .filter_map(|at| u8::from_str_radix(name.get(at * 2..at * 2 + 2)?, 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).to_string()
}

/// The evaluation records (`*.json`) in a tenant's folder.
fn record_files(tenant_folder: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tenant_folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|file| file.path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect()
}

/// Writes `record` as `path`, whole or not at all.
fn keep(path: &Path, record: &EvaluationRecord) -> Result<(), EvaluationRefusal> {
    let text = serde_json::to_string(record).map_err(unavailable)?;
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text).map_err(unavailable)?;
    std::fs::rename(&partial, path).map_err(unavailable)
}

fn read(path: &Path) -> Option<EvaluationRecord> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

impl ServeEvaluations {
    /// Evaluations kept under `data_home/baton/evaluations`; any left
    /// `running` by an earlier process is marked `interrupted`, and the
    /// ended ones past their tenant's retention are deleted.
    pub fn new(
        services: Services,
        registry: Arc<Registry>,
        retention: RunRetention,
        data_home: &Path,
    ) -> Self {
        let folder = data_home.join("baton").join("evaluations");
        let evaluations = Self {
            services,
            registry,
            retention,
            folder,
            running: Arc::default(),
        };
        for tenant in std::fs::read_dir(&evaluations.folder)
            .into_iter()
            .flatten()
            .flatten()
        {
            for path in record_files(&tenant.path()) {
                if let Some(mut record) = read(&path)
                    && record.status == EvaluationStatus::Running
                {
                    record.status = EvaluationStatus::Interrupted;
                    let _ = keep(&path, &record);
                }
            }
            let tenant_id = tenant_of_folder(&tenant.file_name().to_string_lossy());
            let _ = evaluations.prune(&tenant.path(), &tenant_id);
        }
        evaluations
    }

    /// Deletes the tenant's ended evaluations older than its retention,
    /// each with its results file and transcripts; returns the others.
    fn prune(&self, tenant_folder: &Path, tenant_id: &str) -> Vec<EvaluationRecord> {
        let keep_for = self.retention.of(tenant_id);
        let now = Instant::from_unix_millis(now_millis());
        let mut kept = Vec::new();
        for path in record_files(tenant_folder) {
            let Some(record) = read(&path) else { continue };
            let ended = record.status != EvaluationStatus::Running;
            let expired = Instant::parse_rfc3339(&record.created_at)
                .is_some_and(|created| now.since(created) > keep_for);
            if ended && expired {
                let _ = std::fs::remove_file(path.with_extension("jsonl"));
                let _ = std::fs::remove_dir_all(
                    tenant_folder.join(format!("{}.transcripts", record.evaluation_id)),
                );
                let _ = std::fs::remove_file(&path);
            } else {
                kept.push(record);
            }
        }
        kept
    }

    fn record_path(&self, tenant_id: &str, evaluation_id: &str) -> Option<PathBuf> {
        let well_formed = evaluation_id.strip_prefix("eval_").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|character| character.is_ascii_hexdigit())
        });
        well_formed.then(|| {
            self.folder
                .join(tenant_folder(tenant_id))
                .join(format!("{evaluation_id}.json"))
        })
    }
}

#[async_trait::async_trait]
impl ServedEvaluations for ServeEvaluations {
    async fn start(
        &self,
        tenant_id: &str,
        body: &Value,
    ) -> Result<EvaluationRecord, EvaluationRefusal> {
        let request = EvaluationRequest::parse(body).map_err(refusal)?;
        let dataset = request.dataset().map_err(refusal)?;
        let evaluation_id = format!("eval_{}", uuid::Uuid::new_v4().simple());
        let tenant_folder = self.folder.join(tenant_folder(tenant_id));
        std::fs::create_dir_all(&tenant_folder).map_err(unavailable)?;
        let _ = self.prune(&tenant_folder, tenant_id);
        let path = tenant_folder.join(format!("{evaluation_id}.json"));
        let judges = match &request.judges {
            Some(template) => Some(Arc::new(
                EvalJudges::from_template(
                    template.clone(),
                    &self.registry,
                    tenant_folder.join(format!("{evaluation_id}.transcripts")),
                )
                .map_err(|(path, message)| EvaluationRefusal::Invalid {
                    path: format!("$.judges{}", path.strip_prefix('$').unwrap_or(&path)),
                    message,
                })?,
            )),
            None => None,
        };
        {
            let mut running = self.running.lock().map_err(unavailable)?;
            let count = running.entry(tenant_id.to_string()).or_insert(0);
            if *count >= MAX_RUNNING_PER_TENANT {
                return Err(EvaluationRefusal::Limit {
                    running: *count,
                    limit: MAX_RUNNING_PER_TENANT,
                });
            }
            *count += 1;
        }
        let record = EvaluationRecord {
            evaluation_id: evaluation_id.clone(),
            name: request
                .name
                .clone()
                .unwrap_or_else(|| dataset.header.name.clone()),
            status: EvaluationStatus::Running,
            created_at: Instant::from_unix_millis(now_millis()).rfc3339(),
            total: dataset.examples.len(),
            finished: 0,
            passed: 0,
            judged: judges.is_some(),
            summary: None,
            results: Vec::new(),
        };
        if let Err(error) = keep(&path, &record) {
            release(&self.running, tenant_id);
            return Err(error);
        }
        let runner = Arc::new(ExampleRunner::Embedded {
            services: self.services.clone(),
            tenant: tenant_id.to_string(),
        });
        let concurrency = request.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
        let (running, tenant, answered) =
            (self.running.clone(), tenant_id.to_string(), record.clone());
        tokio::spawn(async move {
            let kept = Arc::new(tokio::sync::Mutex::new(record));
            let slots = Arc::new(tokio::sync::Semaphore::new(concurrency));
            let mut tasks = Vec::new();
            for example in dataset.examples {
                let (runner, judges, slots, kept, path) = (
                    runner.clone(),
                    judges.clone(),
                    slots.clone(),
                    kept.clone(),
                    path.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await;
                    let result =
                        crate::eval::run_example(&runner, judges.as_deref(), &example).await;
                    let mut record = kept.lock().await;
                    record.finished += 1;
                    record.passed += usize::from(result.passed);
                    record.results.push(result);
                    let _ = keep(&path, &record);
                }));
            }
            for task in tasks {
                let _ = task.await;
            }
            let mut record = kept.lock().await;
            // The dataset's order, whatever order they finished in.
            record.results.sort_by_key(|result| result.line);
            record.summary = Some(Summary::of(&record.results));
            record.status = EvaluationStatus::Completed;
            let _ = std::fs::write(path.with_extension("jsonl"), results_text(&record.results));
            if let Err(error) = keep(&path, &record) {
                tracing::warn!(error = ?error, evaluation = %record.evaluation_id, "the evaluation's record was not kept");
            }
            release(&running, &tenant);
        });
        Ok(answered)
    }

    async fn list(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationRefusal> {
        // One read of each record: the expired are deleted, the rest listed.
        let mut records = self.prune(&self.folder.join(tenant_folder(tenant_id)), tenant_id);
        for record in &mut records {
            record.results.clear();
        }
        records.sort_by(|first, second| second.created_at.cmp(&first.created_at));
        Ok(records)
    }

    async fn get(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<EvaluationRecord, EvaluationRefusal> {
        self.record_path(tenant_id, evaluation_id)
            .and_then(|path| read(&path))
            .ok_or(EvaluationRefusal::NotFound)
    }
}

fn release(running: &Mutex<HashMap<String, usize>>, tenant_id: &str) {
    if let Ok(mut running) = running.lock()
        && let Some(count) = running.get_mut(tenant_id)
    {
        *count = count.saturating_sub(1);
    }
}

fn now_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_folder_is_hex_and_reads_back() {
        for tenant in ["tenant-a", "../other", "ténant/1", ""] {
            let folder = tenant_folder(tenant);
            assert!(
                folder
                    .chars()
                    .all(|character| character.is_ascii_hexdigit()),
                "{folder}"
            );
            assert_eq!(tenant_of_folder(&folder), tenant);
        }
    }
}
