//! The store's schedule keeper (`baton serve`): ticks
//! [`ScheduleService::fire_due`] until told to stop. Several keepers on one
//! store (two `serve` processes on one DynamoDB table) are safe: a fire's
//! run is submitted under its idempotency key and the schedule moves by a
//! conditional write, so one fire time makes one run.

use std::time::Duration;

use crate::services::ScheduleService;

/// How often the keeper looks for due schedules: well inside
/// `baton_core::records::schedules::ON_TIME_WINDOW`, so a fire is on time.
pub const SCHEDULE_TICK: Duration = Duration::from_secs(5);

/// Fires due schedules every `tick` until `stop` resolves.
pub async fn keep_schedules_until(
    schedules: &ScheduleService,
    tick: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => return,
            _ = every.tick() => {}
        }
        match schedules.fire_due().await {
            Ok(tick) => {
                for run in &tick.runs {
                    tracing::info!(tenant_id = %run.tenant_id, schedule_id = %run.schedule_id, fire_at = %run.fire_at.rfc3339(), run_id = %run.run_id, deduplicated = run.deduplicated, "a schedule fired");
                }
                if tick.missed > 0 {
                    tracing::warn!(
                        missed = tick.missed,
                        "schedules' fires were missed (nothing kept them then)"
                    );
                }
            }
            Err(error) => {
                tracing::warn!(%error, "looking for due schedules failed; trying again at the next tick");
            }
        }
    }
}
