//! Where evaluations are kept on one machine (feature `evaluations`):
//! [`EvaluationFiles`] keeps each as files under a folder (`baton serve`
//! keeps them under its data directory), [`InMemoryEvaluations`] in the
//! process; [`TranscriptFolder`] keeps judge panels' outputs as files
//! (`baton eval` beside its results file). Both stores pass the one
//! conformance suite of `EvaluationRecords`.
//!
//! Files: `{root}/{tenant, hex}/{evaluationId}.json` (the record, written
//! to a temporary file and renamed, so whole or not at all),
//! `{evaluationId}.request` (the request it was started with),
//! `{evaluationId}.jsonl` (its results lines) and
//! `{evaluationId}.transcripts/{example}.json` beside it. A tenant id is a
//! folder name in hex (no separator, no `..`); an evaluation id is
//! `eval_` and hex digits, anything else names no file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_evaluation::served::EvaluationRecord;
use sha2::Digest;

use crate::error::StoreError;
use crate::ports::evaluation_ports::{EvaluationRecords, TranscriptShelf};

/// Evaluations kept as files under one folder.
pub struct EvaluationFiles {
    root: PathBuf,
}

impl EvaluationFiles {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn tenant_folder(&self, tenant_id: &str) -> PathBuf {
        self.root.join(tenant_folder_name(tenant_id))
    }

    /// The record's file, if `evaluation_id` is well formed.
    fn record_path(&self, tenant_id: &str, evaluation_id: &str) -> Option<PathBuf> {
        let well_formed = evaluation_id.strip_prefix("eval_").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|character| character.is_ascii_hexdigit())
        });
        well_formed.then(|| {
            self.tenant_folder(tenant_id)
                .join(format!("{evaluation_id}.json"))
        })
    }

    fn well_formed(&self, tenant_id: &str, evaluation_id: &str) -> Result<PathBuf, StoreError> {
        self.record_path(tenant_id, evaluation_id).ok_or_else(|| {
            StoreError::Corrupt(format!("`{evaluation_id}` is not an evaluation id"))
        })
    }
}

/// A tenant id as a folder name (hex of its bytes: no separator, no `..`).
fn tenant_folder_name(tenant_id: &str) -> String {
    tenant_id
        .bytes()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The tenant id a folder name encodes ([`tenant_folder_name`] reversed).
fn tenant_of_folder(name: &str) -> String {
    let bytes: Vec<u8> = (0..name.len() / 2)
        .filter_map(|at| u8::from_str_radix(name.get(at * 2..at * 2 + 2)?, 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).to_string()
}

fn unavailable(path: &Path, error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{}: {error}", path.display()))
}

/// Writes `text` as `path`, whole or not at all.
fn write_whole(path: &Path, text: &str) -> Result<(), StoreError> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder).map_err(|error| unavailable(folder, error))?;
    }
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, text).map_err(|error| unavailable(&partial, error))?;
    std::fs::rename(&partial, path).map_err(|error| unavailable(path, error))
}

/// Nothing when the path does not exist; else the error.
fn removed(path: &Path, outcome: std::io::Result<()>) -> Result<(), StoreError> {
    match outcome {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(unavailable(path, error)),
        _ => Ok(()),
    }
}

fn read_record(path: &Path) -> Result<Option<EvaluationRecord>, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(unavailable(path, error)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|error| StoreError::Corrupt(format!("{}: {error}", path.display())))
}

#[async_trait]
impl EvaluationRecords for EvaluationFiles {
    async fn put_record(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<(), StoreError> {
        let path = self.well_formed(tenant_id, &record.evaluation_id)?;
        let text = serde_json::to_string(record)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        write_whole(&path, &text)
    }

    async fn get_record(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<EvaluationRecord>, StoreError> {
        match self.record_path(tenant_id, evaluation_id) {
            Some(path) => read_record(&path),
            None => Ok(None),
        }
    }

    async fn list_records(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, StoreError> {
        let folder = self.tenant_folder(tenant_id);
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(unavailable(&folder, error)),
        };
        let mut records = Vec::new();
        for entry in entries {
            let path = entry.map_err(|error| unavailable(&folder, error))?.path();
            if path
                .extension()
                .is_some_and(|extension| extension == "json")
                && let Some(record) = read_record(&path)?
            {
                records.push(record);
            }
        }
        Ok(records)
    }

    async fn tenants(&self) -> Result<Vec<String>, StoreError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(unavailable(&self.root, error)),
        };
        let mut tenants = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| unavailable(&self.root, error))?;
            if entry.path().is_dir() {
                tenants.push(tenant_of_folder(&entry.file_name().to_string_lossy()));
            }
        }
        Ok(tenants)
    }

    async fn put_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        request_text: &str,
    ) -> Result<(), StoreError> {
        let path = self.well_formed(tenant_id, evaluation_id)?;
        write_whole(&path.with_extension("request"), request_text)
    }

    async fn get_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let Some(path) = self.record_path(tenant_id, evaluation_id) else {
            return Ok(None);
        };
        let path = path.with_extension("request");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(unavailable(&path, error)),
        }
    }

    async fn put_results(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        results_text: &str,
    ) -> Result<(), StoreError> {
        let path = self.well_formed(tenant_id, evaluation_id)?;
        write_whole(&path.with_extension("jsonl"), results_text)
    }

    fn transcript_shelf(&self, tenant_id: &str, evaluation_id: &str) -> Arc<dyn TranscriptShelf> {
        // An id that names no record names no folder of its own either.
        let name = if self.record_path(tenant_id, evaluation_id).is_some() {
            evaluation_id
        } else {
            "eval_refused"
        };
        Arc::new(TranscriptFolder::shown_as(
            self.tenant_folder(tenant_id)
                .join(format!("{name}.transcripts")),
            format!("{name}.transcripts"),
        ))
    }

    async fn delete_evaluation(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<(), StoreError> {
        let Some(path) = self.record_path(tenant_id, evaluation_id) else {
            return Ok(());
        };
        let results = path.with_extension("jsonl");
        removed(&results, std::fs::remove_file(&results))?;
        let request = path.with_extension("request");
        removed(&request, std::fs::remove_file(&request))?;
        let transcripts = path.with_extension("transcripts");
        removed(&transcripts, std::fs::remove_dir_all(&transcripts))?;
        // The record last: a deletion cut short is found again by the next prune.
        removed(&path, std::fs::remove_file(&path))
    }
}

/// Judge panels' outputs kept as files in one folder, one per example
/// (`{example}.json`, the id's letters, digits, `.`, `_` and `-` kept,
/// anything else `_`).
pub struct TranscriptFolder {
    folder: PathBuf,
    /// How the results name a transcript: by `{shown_as}/{file}`, or by
    /// its path (None).
    shown_as: Option<String>,
}

impl TranscriptFolder {
    pub fn new(folder: impl Into<PathBuf>) -> Self {
        Self {
            folder: folder.into(),
            shown_as: None,
        }
    }

    /// A folder whose transcripts are named `{shown_as}/{file}` in the
    /// results, not by their path on this machine (a server's data
    /// directory is nobody's business).
    pub fn shown_as(folder: impl Into<PathBuf>, shown_as: impl Into<String>) -> Self {
        Self {
            folder: folder.into(),
            shown_as: Some(shown_as.into()),
        }
    }

    /// The folder the transcripts of results file `results` go to:
    /// `eval-results.jsonl` → `eval-results.transcripts/`.
    pub fn beside(results: &Path) -> Self {
        let stem = results.file_stem().map_or_else(
            || "eval-results".into(),
            |stem| stem.to_string_lossy().to_string(),
        );
        Self::new(results.with_file_name(format!("{stem}.transcripts")))
    }
}

/// A transcript's file name for an example id: the id itself when it is a
/// plain file name, else its plain characters and a hash of the whole id,
/// so two ids never share a file (`a/b` and `a_b`).
fn file_name_of(example_id: &str) -> String {
    let plain =
        |character: char| character.is_ascii_alphanumeric() || matches!(character, '.' | '_' | '-');
    if !example_id.is_empty() && !example_id.starts_with('.') && example_id.chars().all(plain) {
        return example_id.to_string();
    }
    let kept: String = example_id
        .chars()
        .map(|character| if plain(character) { character } else { '_' })
        .collect();
    let digest = sha2::Sha256::digest(example_id.as_bytes());
    let hash: String = digest[..4]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{}-{hash}", kept.trim_start_matches('.'))
}

#[async_trait]
impl TranscriptShelf for TranscriptFolder {
    async fn keep(&self, example_id: &str, panel_output: &str) -> Result<String, StoreError> {
        let name = format!("{}.json", file_name_of(example_id));
        let file = self.folder.join(&name);
        write_whole(&file, panel_output)?;
        Ok(match &self.shown_as {
            Some(shown_as) => format!("{shown_as}/{name}"),
            None => file.display().to_string(),
        })
    }
}

/// One tenant's evaluations in the process: records, results and
/// transcripts by evaluation id.
#[derive(Default)]
struct TenantEvaluations {
    records: BTreeMap<String, EvaluationRecord>,
    requests: BTreeMap<String, String>,
    results: BTreeMap<String, String>,
    transcripts: BTreeMap<(String, String), String>,
}

/// Evaluations kept in the process (tests, and a server without a data
/// directory).
#[derive(Default, Clone)]
pub struct InMemoryEvaluations {
    tenants: Arc<Mutex<BTreeMap<String, TenantEvaluations>>>,
}

impl InMemoryEvaluations {
    fn with<T>(&self, change: impl FnOnce(&mut BTreeMap<String, TenantEvaluations>) -> T) -> T {
        let mut tenants = self
            .tenants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut tenants)
    }

    /// The results lines kept for an evaluation (tests read them).
    pub fn results_of(&self, tenant_id: &str, evaluation_id: &str) -> Option<String> {
        self.with(|tenants| {
            tenants
                .get(tenant_id)
                .and_then(|tenant| tenant.results.get(evaluation_id).cloned())
        })
    }
}

#[async_trait]
impl EvaluationRecords for InMemoryEvaluations {
    async fn put_record(
        &self,
        tenant_id: &str,
        record: &EvaluationRecord,
    ) -> Result<(), StoreError> {
        self.with(|tenants| {
            tenants
                .entry(tenant_id.to_string())
                .or_default()
                .records
                .insert(record.evaluation_id.clone(), record.clone());
        });
        Ok(())
    }

    async fn get_record(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<EvaluationRecord>, StoreError> {
        Ok(self.with(|tenants| {
            tenants
                .get(tenant_id)
                .and_then(|tenant| tenant.records.get(evaluation_id).cloned())
        }))
    }

    async fn list_records(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, StoreError> {
        Ok(self.with(|tenants| {
            tenants
                .get(tenant_id)
                .map(|tenant| tenant.records.values().cloned().collect())
                .unwrap_or_default()
        }))
    }

    async fn tenants(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.with(|tenants| tenants.keys().cloned().collect()))
    }

    async fn put_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        request_text: &str,
    ) -> Result<(), StoreError> {
        self.with(|tenants| {
            tenants
                .entry(tenant_id.to_string())
                .or_default()
                .requests
                .insert(evaluation_id.to_string(), request_text.to_string());
        });
        Ok(())
    }

    async fn get_request(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self.with(|tenants| {
            tenants
                .get(tenant_id)
                .and_then(|tenant| tenant.requests.get(evaluation_id).cloned())
        }))
    }

    async fn put_results(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
        results_text: &str,
    ) -> Result<(), StoreError> {
        self.with(|tenants| {
            tenants
                .entry(tenant_id.to_string())
                .or_default()
                .results
                .insert(evaluation_id.to_string(), results_text.to_string());
        });
        Ok(())
    }

    fn transcript_shelf(&self, tenant_id: &str, evaluation_id: &str) -> Arc<dyn TranscriptShelf> {
        Arc::new(InMemoryShelf {
            store: self.clone(),
            tenant_id: tenant_id.to_string(),
            evaluation_id: evaluation_id.to_string(),
        })
    }

    async fn delete_evaluation(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<(), StoreError> {
        self.with(|tenants| {
            if let Some(tenant) = tenants.get_mut(tenant_id) {
                tenant.records.remove(evaluation_id);
                tenant.requests.remove(evaluation_id);
                tenant.results.remove(evaluation_id);
                tenant
                    .transcripts
                    .retain(|(evaluation, _), _| evaluation != evaluation_id);
            }
        });
        Ok(())
    }
}

/// An in-memory evaluation's transcripts.
struct InMemoryShelf {
    store: InMemoryEvaluations,
    tenant_id: String,
    evaluation_id: String,
}

#[async_trait]
impl TranscriptShelf for InMemoryShelf {
    async fn keep(&self, example_id: &str, panel_output: &str) -> Result<String, StoreError> {
        self.store.with(|tenants| {
            tenants
                .entry(self.tenant_id.clone())
                .or_default()
                .transcripts
                .insert(
                    (self.evaluation_id.clone(), example_id.to_string()),
                    panel_output.to_string(),
                );
        });
        Ok(format!("{}/{example_id}", self.evaluation_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_folder_is_hex_and_reads_back() {
        for tenant in ["tenant-a", "../other", "ténant/1", ""] {
            let folder = tenant_folder_name(tenant);
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
