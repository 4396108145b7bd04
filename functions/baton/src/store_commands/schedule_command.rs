//! `baton schedule …`: schedules kept in a store (`--store sqlite`, the
//! default file, or `dynamodb`, the table of `BATON_TABLE`) for the tenant
//! `--tenant` (default `local`, the tenant `baton serve` gives requests
//! when it has no tokens). `baton serve` on the same store fires them.
//! `create` takes the expression, the time zone and an envelope file and
//! prints the schedule (JSON); `list`, `show`, `pause`, `resume`, `delete`
//! do what they say. A wrong expression, time zone or envelope exits 2
//! naming its field.

use std::path::PathBuf;

use baton_bootstrap::StoreChoice;
use baton_core::records::schedules::{MissedFirePolicy, Schedule};
use baton_runtime::error::RuntimeError;

use clap::{Subcommand, ValueEnum};

use crate::terminal::TaskFormat;

use crate::failure::{Ended, Outcome, invalid};

#[derive(Subcommand)]
pub enum ScheduleCommand {
    /// Keep a new schedule: ENVELOPE submitted at every fire time of
    /// EXPRESSION (`rate(1 hour)`, `cron(0 8 ? * MON-FRI *)`, EventBridge
    /// Scheduler's syntax) read in TIMEZONE. Prints the schedule.
    Create {
        envelope: PathBuf,
        #[arg(long)]
        expression: String,
        /// An IANA time zone (default UTC).
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// What fires missed while nothing kept the schedule become.
        #[arg(long, value_enum, default_value_t = MissedFires::Skip)]
        missed_fires: MissedFires,
        #[arg(long)]
        description: Option<String>,
    },
    /// The tenant's schedules, oldest first.
    List {
        #[arg(long, value_enum, default_value_t = TaskFormat::Pretty)]
        format: TaskFormat,
    },
    /// One schedule (JSON).
    Show { schedule_id: String },
    /// Stop it firing until it is resumed.
    Pause { schedule_id: String },
    /// Fire again from now on.
    Resume { schedule_id: String },
    /// Remove it (the runs it started stay).
    Delete { schedule_id: String },
}

/// `--missed-fires`.
#[derive(Clone, Copy, ValueEnum)]
pub enum MissedFires {
    /// Dropped; the schedule goes on from its next time.
    Skip,
    /// One run for the latest of them.
    CatchUpOnce,
}

/// What `baton schedule` was asked to do.
pub enum ScheduleAction {
    Create {
        envelope: PathBuf,
        expression: String,
        timezone: String,
        missed_fires: MissedFirePolicy,
        description: Option<String>,
    },
    List {
        format: TaskFormat,
    },
    Show {
        schedule_id: String,
    },
    Pause {
        schedule_id: String,
    },
    Resume {
        schedule_id: String,
    },
    Delete {
        schedule_id: String,
    },
}

/// Runs `baton schedule ACTION` on `store` for `tenant`.
pub async fn schedule(
    action: ScheduleAction,
    store: StoreChoice,
    tenant: String,
    registry: Option<PathBuf>,
) -> Outcome {
    let services = super::store_services(
        &store,
        registry,
        "schedules need --store sqlite or dynamodb (and `baton serve` on it to fire them)",
    )
    .await?;
    let schedules = &services.schedules;
    let done = match action {
        ScheduleAction::Create {
            envelope,
            expression,
            timezone,
            missed_fires,
            description,
        } => {
            let text = match std::fs::read_to_string(&envelope) {
                Ok(text) => text,
                Err(error) => return Err(invalid(format!("{}: {error}", envelope.display()))),
            };
            let envelope_json: serde_json::Value = match serde_json::from_str(&text) {
                Ok(value) => value,
                Err(error) => {
                    return Err(invalid(format!(
                        "{}: not JSON: {error}",
                        envelope.display()
                    )));
                }
            };
            let mut request = serde_json::json!({
                "expression": expression,
                "timezone": timezone,
                "missedFires": missed_fires,
                "envelope": envelope_json,
            });
            if let Some(description) = description {
                request["description"] = description.into();
            }
            schedules.create(&tenant, &request).await.map(Some)
        }
        ScheduleAction::List { format } => match schedules.list(&tenant).await {
            Ok(listed) => {
                print_list(&listed, format);
                Ok(None)
            }
            Err(error) => Err(error),
        },
        ScheduleAction::Show { schedule_id } => {
            schedules.get(&tenant, &schedule_id).await.map(Some)
        }
        ScheduleAction::Pause { schedule_id } => {
            schedules.pause(&tenant, &schedule_id).await.map(Some)
        }
        ScheduleAction::Resume { schedule_id } => {
            schedules.resume(&tenant, &schedule_id).await.map(Some)
        }
        ScheduleAction::Delete { schedule_id } => {
            schedules.delete(&tenant, &schedule_id).await.map(|()| {
                println!("{}", serde_json::json!({"deleted": schedule_id}));
                None
            })
        }
    };
    match done {
        Ok(Some(schedule)) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&schedule).unwrap_or_default()
            );
            Ok(Ended::Completed)
        }
        Ok(None) => Ok(Ended::Completed),
        Err(RuntimeError::InvalidSchedule { path, message }) => {
            Err(invalid(format!("schedule: {path}: {message}")))
        }
        Err(error) => Err(invalid(format!("schedule: {error}"))),
    }
}

fn print_list(schedules: &[Schedule], format: TaskFormat) {
    match format {
        TaskFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(schedules).unwrap_or_else(|_| "[]".into())
        ),
        TaskFormat::Pretty => {
            if schedules.is_empty() {
                println!("no schedules");
            }
            for schedule in schedules {
                println!(
                    "{}  {:<7} {:<28} {:<16} next {}  fires {}",
                    schedule.schedule_id,
                    schedule.state.as_ref(),
                    schedule.expression,
                    schedule.timezone,
                    schedule
                        .next_fire_at
                        .map_or_else(|| "-".to_string(), |next| next.rfc3339()),
                    schedule.fires,
                );
            }
        }
    }
}

impl From<ScheduleCommand> for ScheduleAction {
    fn from(command: ScheduleCommand) -> Self {
        match command {
            ScheduleCommand::Create {
                envelope,
                expression,
                timezone,
                missed_fires,
                description,
            } => ScheduleAction::Create {
                envelope,
                expression,
                timezone,
                missed_fires: match missed_fires {
                    MissedFires::Skip => baton_core::records::schedules::MissedFirePolicy::Skip,
                    MissedFires::CatchUpOnce => {
                        baton_core::records::schedules::MissedFirePolicy::CatchUpOnce
                    }
                },
                description,
            },
            ScheduleCommand::List { format } => ScheduleAction::List { format },
            ScheduleCommand::Show { schedule_id } => ScheduleAction::Show { schedule_id },
            ScheduleCommand::Pause { schedule_id } => ScheduleAction::Pause { schedule_id },
            ScheduleCommand::Resume { schedule_id } => ScheduleAction::Resume { schedule_id },
            ScheduleCommand::Delete { schedule_id } => ScheduleAction::Delete { schedule_id },
        }
    }
}
