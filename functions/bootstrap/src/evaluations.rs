//! Served evaluations (`/api/v1/flex/evaluations`, feature `evaluations`):
//! the HTTP port (`baton_http::evaluation_port::ServedEvaluations`) over
//! the runtime's `DatasetEvaluations`, driven as the deployment can.
//! `baton serve` drives each evaluation in a task of its own
//! ([`served_in_process`]); the Lambda API runs an evaluation's first pass
//! when it accepts it and leaves the others to the sweeper function
//! ([`served_by_passes`], [`cloud_evaluations`]).

use std::sync::Arc;

use baton_runtime::clock::SystemClock;
use baton_runtime::services::Services;
use baton_runtime::services::dataset_evaluations::{DatasetEvaluations, NoJudgeModel};

use crate::{Configuration, StartupError};

#[cfg(feature = "http")]
pub use served::{served_by_passes, served_in_process, serving_evaluations};

/// The HTTP port over the runtime's evaluations.
#[cfg(feature = "http")]
mod served {
    use std::sync::Arc;

    use baton_evaluation::served::EvaluationRecord;
    use baton_http::evaluation_port::{EvaluationRefusal, EvaluationsExtension, ServedEvaluations};
    use baton_runtime::services::dataset_evaluations::{
        DatasetEvaluations, EvaluationError, InProcessDriver,
    };
    use serde_json::Value;

    /// Who runs an accepted evaluation's passes.
    enum Driven {
        /// A task of this process, until it ends.
        InProcess(InProcessDriver),
        /// Its first pass here, the others elsewhere (the sweeper function).
        FirstPassHere(Arc<DatasetEvaluations>),
    }

    impl Driven {
        fn evaluations(&self) -> &DatasetEvaluations {
            match self {
                Driven::InProcess(driver) => driver.evaluations(),
                Driven::FirstPassHere(evaluations) => evaluations,
            }
        }
    }

    fn refusal(error: EvaluationError) -> EvaluationRefusal {
        match error {
            EvaluationError::Invalid { path, message } => {
                EvaluationRefusal::Invalid { path, message }
            }
            EvaluationError::NotFound => EvaluationRefusal::NotFound,
            EvaluationError::Limit { running, limit } => {
                EvaluationRefusal::Limit { running, limit }
            }
            EvaluationError::Unavailable(reason) => EvaluationRefusal::Unavailable(reason),
        }
    }

    #[async_trait::async_trait]
    impl ServedEvaluations for Driven {
        async fn start(
            &self,
            tenant_id: &str,
            request: &Value,
        ) -> Result<EvaluationRecord, EvaluationRefusal> {
            let record = self
                .evaluations()
                .start(tenant_id, request)
                .await
                .map_err(refusal)?;
            match self {
                Driven::InProcess(driver) => driver.drive(tenant_id, &record.evaluation_id),
                Driven::FirstPassHere(evaluations) => {
                    // The first examples start now; a pass that fails here is
                    // the sweeper's to take up, the evaluation is kept.
                    if let Err(error) = evaluations.advance(tenant_id, &record.evaluation_id).await
                    {
                        tracing::warn!(%error, evaluation = %record.evaluation_id, "an evaluation's first pass failed; the sweeper takes it up");
                    }
                }
            }
            Ok(record)
        }

        async fn list(&self, tenant_id: &str) -> Result<Vec<EvaluationRecord>, EvaluationRefusal> {
            self.evaluations().list(tenant_id).await.map_err(refusal)
        }

        async fn get(
            &self,
            tenant_id: &str,
            evaluation_id: &str,
        ) -> Result<EvaluationRecord, EvaluationRefusal> {
            self.evaluations()
                .get(tenant_id, evaluation_id)
                .await
                .map_err(refusal)
        }
    }

    /// `router` with `evaluations` behind its `/evaluations` routes.
    pub fn serving_evaluations(
        router: baton_http::Router,
        evaluations: EvaluationsExtension,
    ) -> baton_http::Router {
        router.layer(axum::Extension(evaluations))
    }

    /// Evaluations this process drives to their end (`baton serve`).
    pub fn served_in_process(driver: InProcessDriver) -> EvaluationsExtension {
        Arc::new(Driven::InProcess(driver))
    }

    /// Evaluations whose first pass runs in the request that accepts them,
    /// the others in the sweeper function (the Lambda API).
    pub fn served_by_passes(evaluations: Arc<DatasetEvaluations>) -> EvaluationsExtension {
        Arc::new(Driven::FirstPassHere(evaluations))
    }
}

/// The deployment's evaluations, kept in its DynamoDB table and run on
/// `services` (the api and sweeper functions). Judges run as panel runs
/// on the step function, whose model answers them: nothing here calls a
/// model, so `judges_can_run` is the deployment's to say.
pub async fn cloud_evaluations(
    configuration: &Configuration,
    services: &Services,
    judges_can_run: Result<(), NoJudgeModel>,
) -> Result<Arc<DatasetEvaluations>, StartupError> {
    let table = Configuration::required(
        &configuration.table,
        "BATON_TABLE",
        "name the DynamoDB table (infra/local.sh up prints it)",
    )?;
    let aws = baton_aws::AwsConnection::from_environment().await;
    let registry = services.capabilities.registry().clone();
    let retention = configuration
        .retention()
        .with_tenant_settings(registry.tenant_settings());
    Ok(Arc::new(DatasetEvaluations::new(
        Arc::new(baton_aws::DynamoRunStore::new(&aws, table)),
        services.runs.clone(),
        registry,
        judges_can_run,
        Arc::new(SystemClock),
        retention,
    )))
}
