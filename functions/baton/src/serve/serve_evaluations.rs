//! `baton serve`'s evaluations (`/api/v1/flex/evaluations`): the runtime's
//! `DatasetEvaluations`, kept in the server's store (the SQLite file, the
//! DynamoDB table, or in memory with `--store memory`), judged by panel
//! runs on the server's own services, each driven by a task of this
//! process (`baton_bootstrap::evaluations::served_in_process`).

use std::sync::Arc;

use baton_core::catalog::registry::Registry;
use baton_http::evaluation_port::EvaluationsExtension;
use baton_runtime::clock::SystemClock;
use baton_runtime::memory::InMemoryEvaluations;
use baton_runtime::ports::evaluation_ports::EvaluationRecords;
use baton_runtime::services::dataset_evaluations::{
    DatasetEvaluations, EvaluationError, InProcessDriver,
};
use baton_runtime::services::{RunRetention, Services};

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

/// The server's evaluations over `services`, kept in `records` and
/// driven by this process: any left `running` by an earlier process taken
/// up, the ended ones past their tenant's retention deleted.
pub async fn served_evaluations(
    services: &Services,
    registry: Arc<Registry>,
    retention: RunRetention,
    records: Arc<dyn EvaluationRecords>,
) -> Result<EvaluationsExtension, EvaluationError> {
    let judges_can_run = crate::setup::model_choice::routed_model_for_cli(
        &registry,
        &baton_bootstrap::process_environment,
        // A judge panel is models only: no remote agent, no secret.
        Arc::new(baton_runtime::ports::NoSecrets),
    )
    .map(|_| ())
    .map_err(|error| Arc::new(error) as baton_runtime::services::dataset_evaluations::NoJudgeModel);
    let evaluations = DatasetEvaluations::new(
        records,
        services.runs.clone(),
        registry,
        judges_can_run,
        Arc::new(SystemClock),
        retention,
    );
    let driver = InProcessDriver::new(Arc::new(evaluations));
    driver.resume_all().await?;
    Ok(baton_bootstrap::evaluations::served_in_process(driver))
}
