//! Schedules fired by Amazon EventBridge Scheduler: each Baton schedule is
//! one EventBridge schedule of the same name in the deployment's schedule
//! group, in the same expression and time zone, whose target is the ingest
//! queue, sent with the template's role. Each fire sends
//!
//! ```json
//! {"tenantId": "…", "scheduleFire": {"scheduleId": "…", "fireTime": "<aws.scheduler.scheduled-time>"}}
//! ```
//!
//! (EventBridge puts the fire time in), and the `ingest` function starts the
//! run under the fire's idempotency key (`workers::process_ingest_batch`).
//! The missed-fire policy becomes the target's retry policy: `skip` keeps a
//! fire one minute (EventBridge's least) with no retries, `catch_up_once`
//! retries it for a day; the ingest function still drops a fire that
//! arrives late under `skip`.

use async_trait::async_trait;
use aws_sdk_scheduler::types::{
    ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, RetryPolicy,
    ScheduleState as EventBridgeState, Target,
};
use baton_core::records::schedules::{MissedFirePolicy, Schedule, ScheduleState, ScheduleTrigger};
use baton_runtime::error::StoreError;
use baton_runtime::ports::ScheduleTriggers;

/// Where EventBridge Scheduler sends fires, and as whom.
#[derive(Debug, Clone)]
pub struct SchedulerTarget {
    /// The schedule group Baton's schedules live in (`BATON_SCHEDULE_GROUP`).
    pub group: String,
    /// The ingest queue's ARN (`BATON_SCHEDULER_TARGET_ARN`).
    pub target_arn: String,
    /// The role EventBridge Scheduler assumes to send to it
    /// (`BATON_SCHEDULER_ROLE_ARN`).
    pub role_arn: String,
}

/// [`ScheduleTriggers`] on EventBridge Scheduler.
#[derive(Clone)]
pub struct EventBridgeScheduleTriggers {
    client: aws_sdk_scheduler::Client,
    target: SchedulerTarget,
}

impl EventBridgeScheduleTriggers {
    pub fn new(connection: &crate::AwsConnection, target: SchedulerTarget) -> Self {
        Self::over_client(connection.scheduler_client(), target)
    }

    pub(crate) fn over_client(client: aws_sdk_scheduler::Client, target: SchedulerTarget) -> Self {
        EventBridgeScheduleTriggers { client, target }
    }

    /// The message a fire of `schedule` sends to the ingest queue, with
    /// EventBridge's placeholder for the fire time.
    pub fn fire_input(schedule: &Schedule) -> String {
        serde_json::json!({
            "tenantId": schedule.tenant_id,
            "scheduleFire": {
                "scheduleId": schedule.schedule_id,
                "fireTime": "<aws.scheduler.scheduled-time>",
            },
        })
        .to_string()
    }

    fn target_of(&self, schedule: &Schedule) -> Result<Target, StoreError> {
        let (maximum_age_seconds, retries) = match schedule.missed_fires {
            MissedFirePolicy::Skip => (60, 0),
            MissedFirePolicy::CatchUpOnce => (86_400, 185),
        };
        Target::builder()
            .arn(&self.target.target_arn)
            .role_arn(&self.target.role_arn)
            .input(Self::fire_input(schedule))
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_event_age_in_seconds(maximum_age_seconds)
                    .maximum_retry_attempts(retries)
                    .build(),
            )
            .build()
            .map_err(scheduler_failure)
    }
}

fn scheduler_failure(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("EventBridge Scheduler: {error}"))
}

/// A failed call through the crate's one mapping: retryable as
/// `Unavailable`, permanent (a group missing, access denied) as `Refused`;
/// no ARN or account id in either.
fn sdk_failure<E>(error: aws_sdk_scheduler::error::SdkError<E>) -> StoreError
where
    E: aws_sdk_scheduler::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let failure = crate::sdk_errors::call_failure("EventBridge Scheduler", &error);
    if failure.retryable {
        StoreError::Unavailable(failure.text)
    } else {
        StoreError::Refused(failure.text)
    }
}

fn state_of(schedule: &Schedule) -> EventBridgeState {
    match schedule.state {
        ScheduleState::Active => EventBridgeState::Enabled,
        ScheduleState::Paused => EventBridgeState::Disabled,
    }
}

#[async_trait]
impl ScheduleTriggers for EventBridgeScheduleTriggers {
    fn trigger(&self) -> ScheduleTrigger {
        ScheduleTrigger::EventBridge
    }

    /// Creates the EventBridge schedule, or updates it when it exists (a
    /// pause, a resume).
    async fn install(&self, schedule: &Schedule) -> Result<(), StoreError> {
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(scheduler_failure)?;
        let description = format!(
            "Baton schedule {} of tenant {}",
            schedule.schedule_id, schedule.tenant_id
        );
        let created = self
            .client
            .create_schedule()
            .name(&schedule.schedule_id)
            .group_name(&self.target.group)
            .description(&description)
            .schedule_expression(&schedule.expression)
            .schedule_expression_timezone(&schedule.timezone)
            .flexible_time_window(window.clone())
            .target(self.target_of(schedule)?)
            .state(state_of(schedule))
            .action_after_completion(ActionAfterCompletion::None)
            .send()
            .await;
        match created {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_conflict_exception()) =>
            {
                self.client
                    .update_schedule()
                    .name(&schedule.schedule_id)
                    .group_name(&self.target.group)
                    .description(&description)
                    .schedule_expression(&schedule.expression)
                    .schedule_expression_timezone(&schedule.timezone)
                    .flexible_time_window(window)
                    .target(self.target_of(schedule)?)
                    .state(state_of(schedule))
                    .action_after_completion(ActionAfterCompletion::None)
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(sdk_failure)
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }

    /// Deletes the EventBridge schedule; one already gone is success.
    async fn remove(&self, schedule: &Schedule) -> Result<(), StoreError> {
        match self
            .client
            .delete_schedule()
            .name(&schedule.schedule_id)
            .group_name(&self.target.group)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_resource_not_found_exception()) =>
            {
                Ok(())
            }
            Err(error) => Err(sdk_failure(error)),
        }
    }
}
