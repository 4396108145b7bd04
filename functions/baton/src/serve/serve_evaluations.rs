//! `baton serve`'s evaluations (`/api/v1/flex/evaluations`): the HTTP
//! port (`baton_http::evaluation_port::ServedEvaluations`) over the
//! runtime's `DatasetEvaluations`, kept in the server's store (the SQLite
//! file, the DynamoDB table, or in memory with `--store memory`), and
//! judged by panel runs on the server's own services.

use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_evaluation::served::EvaluationRecord;
use baton_http::evaluation_port::{EvaluationRefusal, EvaluationsExtension, ServedEvaluations};
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryEvaluations;
use baton_runtime::ports::evaluation_ports::EvaluationRecords;
use baton_runtime::services::dataset_evaluations::{
    DatasetEvaluations, EvaluationError, NoJudgeModel,
};
use baton_runtime::services::{RunRetention, Services};
use serde_json::Value;

/// The runtime's evaluations, as the routes find them.
struct ServedByRuntime(DatasetEvaluations);

fn refusal(error: EvaluationError) -> EvaluationRefusal {
    match error {
        EvaluationError::Invalid { path, message } => EvaluationRefusal::Invalid { path, message },
        EvaluationError::NotFound => EvaluationRefusal::NotFound,
        EvaluationError::Limit { running, limit } => EvaluationRefusal::Limit { running, limit },
        EvaluationError::Unavailable(reason) => EvaluationRefusal::Unavailable(reason),
    }
}

#[async_trait::async_trait]
impl ServedEvaluations for ServedByRuntime {
    async fn start(
        &self,
        tenant_id: &str,
        request: &Value,
    ) -> Result<EvaluationRecord, EvaluationRefusal> {
        self.0.start(tenant_id, request).await.map_err(refusal)
    }

    async fn list(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationRefusal> {
        self.0.list(tenant_id).await.map_err(refusal)
    }

    async fn get(
        &self,
        tenant_id: &str,
        evaluation_id: &str,
    ) -> Result<EvaluationRecord, EvaluationRefusal> {
        self.0.get(tenant_id, evaluation_id).await.map_err(refusal)
    }
}

/// Where the server keeps its evaluations on `store`.
pub async fn evaluation_records(
    store: &baton_bootstrap::stores::StoreChoice,
    configuration: &baton_bootstrap::Configuration,
) -> Result<Arc<dyn EvaluationRecords>, baton_bootstrap::StartupError> {
    use baton_bootstrap::stores::StoreChoice;
    Ok(match store {
        StoreChoice::Sqlite(_) => {
            let path = baton_bootstrap::stores::sqlite_file(store, configuration)?;
            Arc::new(
                baton_sqlite::SqliteStore::open(&path)
                    .map_err(|error| baton_bootstrap::StartupError(error.to_string()))?,
            )
        }
        StoreChoice::Memory => Arc::new(InMemoryEvaluations::default()),
        StoreChoice::Dynamodb => {
            let table = configuration.table.as_deref().ok_or_else(|| {
                baton_bootstrap::StartupError(
                    "BATON_TABLE is not set: name the DynamoDB table (infra/local.sh up prints it)"
                        .into(),
                )
            })?;
            let aws = baton_aws::AwsConnection::from_environment().await;
            Arc::new(baton_aws::DynamoRunStore::new(&aws, table))
        }
    })
}

/// The server's evaluations over `services`, kept in `records`: any left
/// `running` by an earlier process resumed, the ended ones past their
/// tenant's retention deleted.
pub async fn served_evaluations(
    services: &Services,
    registry: Arc<Registry>,
    retention: RunRetention,
    records: Arc<dyn EvaluationRecords>,
) -> Result<EvaluationsExtension, EvaluationError> {
    let judge_model = crate::setup::model_choice::routed_model_for_cli(
        &registry,
        &baton_bootstrap::process_environment,
        // A judge panel is models only: no remote agent, no secret.
        Arc::new(baton_runtime::ports::NoSecrets),
    )
    .map_err(|error| Arc::new(error) as NoJudgeModel);
    let evaluations = DatasetEvaluations::open(
        records,
        services.runs.clone(),
        registry,
        judge_model,
        Arc::new(SystemClock),
        retention,
    )
    .await?;
    Ok(Arc::new(ServedByRuntime(evaluations)))
}
