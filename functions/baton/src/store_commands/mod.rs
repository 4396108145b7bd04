//! The commands over what a store keeps for a tenant, outside any run:
//! `baton schedule` (`schedule_command.rs`), `baton memory`
//! (`memory_command.rs`) and `baton gc` (`gc_command.rs`: ended runs and
//! expired memory items past their retention).

pub mod gc_command;
pub mod memory_command;
pub mod schedule_command;

use std::path::PathBuf;

use baton_bootstrap::StoreChoice;
use baton_bootstrap::stores::LeftOverSteps;
use baton_runtime::services::Services;

use crate::failure::invalid;
use crate::setup::{configuration, embedded_services, load_registry, services_on};

/// The services over `store` (a SQLite file or the DynamoDB table; memory
/// is refused, saying `why_not_memory`), with no step left over taken up.
pub(crate) async fn store_services(
    store: &StoreChoice,
    registry: Option<PathBuf>,
    why_not_memory: &str,
) -> Result<Services, crate::failure::CommandError> {
    let configuration = configuration()?;
    let registry = load_registry(registry, &configuration)?;
    match store {
        StoreChoice::Memory => Err(invalid(format!(
            "--store memory keeps nothing after this command: {why_not_memory}"
        ))),
        StoreChoice::Dynamodb => {
            let counters =
                std::sync::Arc::new(baton_runtime::observe::telemetry::RunCounters::default());
            services_on(store, registry, &configuration, counters)
                .await
                .map(|(services, _, _)| services)
        }
        StoreChoice::Sqlite(_) => {
            embedded_services(registry, &configuration, store, LeftOverSteps::None)
                .await
                .map(|(services, _)| services)
        }
    }
}
