//! The settings of what Baton integrates with: EventBridge Scheduler
//! (`BATON_SCHEDULER_*`) and trace export (the standard `OTEL_*` names).

use super::{VariableReader, non_empty};
use crate::StartupError;

/// Where EventBridge Scheduler sends schedules' fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerConfiguration {
    pub group: String,
    pub target_arn: String,
    pub role_arn: String,
}

impl SchedulerConfiguration {
    pub(super) fn from_variables(read: VariableReader<'_>) -> Result<Option<Self>, StartupError> {
        match (
            non_empty(read, "BATON_SCHEDULER_TARGET_ARN"),
            non_empty(read, "BATON_SCHEDULER_ROLE_ARN"),
        ) {
            (None, None) => Ok(None),
            (Some(target_arn), Some(role_arn)) => Ok(Some(SchedulerConfiguration {
                group: non_empty(read, "BATON_SCHEDULE_GROUP").unwrap_or_else(|| "default".into()),
                target_arn,
                role_arn,
            })),
            _ => Err(StartupError(
                "BATON_SCHEDULER_TARGET_ARN and BATON_SCHEDULER_ROLE_ARN go together: set both (EventBridge Scheduler fires schedules) or neither (`baton serve` does)".into(),
            )),
        }
    }
}

/// Whether and how traces are exported (`OTEL_*`, the standard names).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceExportConfiguration {
    /// `OTEL_SERVICE_NAME` is set: the SDK names the service; otherwise
    /// each binary names itself (`baton`, `baton-step`, …).
    pub service_name_set: bool,
}

impl TraceExportConfiguration {
    pub(super) fn from_variables(read: VariableReader<'_>) -> Result<Option<Self>, StartupError> {
        let endpoint = non_empty(read, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| non_empty(read, "OTEL_EXPORTER_OTLP_ENDPOINT"));
        let disabled = non_empty(read, "OTEL_SDK_DISABLED")
            .is_some_and(|value| value.eq_ignore_ascii_case("true"))
            || non_empty(read, "OTEL_TRACES_EXPORTER")
                .is_some_and(|value| value.eq_ignore_ascii_case("none"));
        if endpoint.is_none() || disabled {
            return Ok(None);
        }
        let protocol = non_empty(read, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| non_empty(read, "OTEL_EXPORTER_OTLP_PROTOCOL"));
        if let Some(protocol) = protocol
            && protocol != "http/protobuf"
        {
            return Err(StartupError(format!(
                "OTEL_EXPORTER_OTLP_PROTOCOL is `{protocol}`: Baton exports traces over `http/protobuf` only (unset it, or point an OpenTelemetry Collector's HTTP receiver at port 4318)"
            )));
        }
        Ok(Some(TraceExportConfiguration {
            service_name_set: non_empty(read, "OTEL_SERVICE_NAME").is_some(),
        }))
    }
}

/// An on/off setting: `on`, `true` or `1`; `off`, `false`, `0` or unset.
/// Anything else is refused naming the variable.
pub(super) fn on_off(read: VariableReader<'_>, name: &str) -> Result<bool, StartupError> {
    match non_empty(read, name).map(|value| value.to_ascii_lowercase()) {
        None => Ok(false),
        Some(value) if matches!(value.as_str(), "on" | "true" | "1") => Ok(true),
        Some(value) if matches!(value.as_str(), "off" | "false" | "0") => Ok(false),
        Some(value) => Err(StartupError(format!(
            "{name} is `{value}`: write `on` or `off`"
        ))),
    }
}
