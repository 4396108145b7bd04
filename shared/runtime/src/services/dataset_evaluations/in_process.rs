//! The driver of a long-running server (`baton serve`): a task per running
//! evaluation runs a pass every [`IN_PROCESS_PASS_EVERY`] until the
//! evaluation ends. At start, the evaluations an earlier process left
//! running are taken up the same way ([`InProcessDriver::resume_all`]). A
//! process drives each evaluation once; another process driving it too
//! (two servers on one store) is harmless, since passes overlap safely.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_evaluation::served::EvaluationStatus;

use super::{DatasetEvaluations, EvaluationError};

/// How often a driven evaluation is passed over.
pub const IN_PROCESS_PASS_EVERY: Duration = Duration::from_millis(100);

/// How long a pass that failed (the store) waits before the next.
const AFTER_A_FAILED_PASS: Duration = Duration::from_secs(1);

/// Drives evaluations in this process.
#[derive(Clone)]
pub struct InProcessDriver {
    evaluations: Arc<DatasetEvaluations>,
    /// `{tenant}/{evaluation}` of those a task drives.
    driven: Arc<Mutex<HashSet<String>>>,
}

impl InProcessDriver {
    pub fn new(evaluations: Arc<DatasetEvaluations>) -> Self {
        Self {
            evaluations,
            driven: Arc::default(),
        }
    }

    /// The evaluations driven.
    pub fn evaluations(&self) -> &Arc<DatasetEvaluations> {
        &self.evaluations
    }

    /// Takes up every running evaluation; answers how many.
    pub async fn resume_all(&self) -> Result<usize, EvaluationError> {
        let running = self.evaluations.running().await?;
        for (tenant_id, evaluation_id) in &running {
            tracing::info!(tenant_id, evaluation = %evaluation_id, "an evaluation an earlier process left running is taken up");
            self.drive(tenant_id, evaluation_id);
        }
        Ok(running.len())
    }

    /// Starts a task passing over the evaluation until it ends (nothing
    /// when one already does).
    pub fn drive(&self, tenant_id: &str, evaluation_id: &str) {
        let name = format!("{tenant_id}/{evaluation_id}");
        let newly_driven = self
            .driven
            .lock()
            .is_ok_and(|mut driven| driven.insert(name.clone()));
        if !newly_driven {
            return;
        }
        let (driver, tenant_id, evaluation_id) = (
            self.clone(),
            tenant_id.to_string(),
            evaluation_id.to_string(),
        );
        tokio::spawn(async move {
            loop {
                match driver.evaluations.advance(&tenant_id, &evaluation_id).await {
                    Ok(EvaluationStatus::Running) => {
                        tokio::time::sleep(IN_PROCESS_PASS_EVERY).await;
                    }
                    Ok(_) | Err(EvaluationError::NotFound) => break,
                    Err(error) => {
                        tracing::warn!(%error, tenant_id, evaluation = %evaluation_id, "an evaluation's pass failed; the next one takes it up");
                        tokio::time::sleep(AFTER_A_FAILED_PASS).await;
                    }
                }
            }
            if let Ok(mut driven) = driver.driven.lock() {
                driven.remove(&name);
            }
        });
    }
}
