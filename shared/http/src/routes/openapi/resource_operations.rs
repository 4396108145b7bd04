//! The schedules', the served evaluations' and the developer sandbox's
//! operations (split from `mod.rs` to keep each file short).

use axum::routing::{delete, get, post};

use super::super::{audit, dataset_evaluations, sandbox, schedules};
use super::{Answer, BAD_JSON, Body, Operation, answer, api, route};
use crate::auth::Scope;

const SCHEDULE_NOT_FOUND: Answer = answer(
    404,
    "no such schedule (or another tenant's): `schedule_not_found`",
    Body::Json("Error"),
);
const EVALUATION_NOT_FOUND: Answer = answer(
    404,
    "no such evaluation (or another tenant's): `evaluation_not_found`",
    Body::Json("Error"),
);
const NOT_SERVED: Answer = answer(
    501,
    "this server runs no evaluations (`baton serve` and the Lambda API do; a router built without them does not): `evaluations_not_served`; evaluate a deployment from outside with `baton eval --api`",
    Body::Json("Error"),
);

/// In the order the document lists them.
pub(super) fn schedules_and_evaluations() -> Vec<Operation> {
    vec![
        api(
            route(
                "createSchedule",
                Scope::SchedulesWrite,
                || post(schedules::create_schedule),
                "post",
                "/api/v1/flex/schedules",
            ),
            "Keep a schedule: the envelope submitted at every fire time of a rate or cron expression in a time zone",
            Some("ScheduleRequest"),
            &[],
            &[
                answer(201, "the schedule", Body::Json("Schedule")),
                BAD_JSON,
                answer(
                    409,
                    "the tenant keeps `BATON_MAX_SCHEDULES_PER_TENANT` schedules already (`schedule_limit`)",
                    Body::Json("Error"),
                ),
                answer(
                    422,
                    "a wrong expression, time zone, policy or envelope (`invalid_schedule`); `details.path` names it (`$.expression`, `$.envelope.objective`)",
                    Body::Json("Error"),
                ),
            ],
        ),
        api(
            route(
                "listSchedules",
                Scope::RunsRead,
                || get(schedules::list_schedules),
                "get",
                "/api/v1/flex/schedules",
            ),
            "The tenant's schedules, oldest first",
            None,
            &[],
            &[answer(200, "the schedules", Body::Json("ScheduleList"))],
        ),
        api(
            route(
                "getSchedule",
                Scope::RunsRead,
                || get(schedules::get_schedule),
                "get",
                "/api/v1/flex/schedules/{schedule_id}",
            ),
            "A schedule: its next fire, its last run, its counts",
            None,
            &[],
            &[
                answer(200, "the schedule", Body::Json("Schedule")),
                SCHEDULE_NOT_FOUND,
            ],
        ),
        api(
            route(
                "deleteSchedule",
                Scope::SchedulesWrite,
                || delete(schedules::delete_schedule),
                "delete",
                "/api/v1/flex/schedules/{schedule_id}",
            ),
            "Remove a schedule (the runs it started stay)",
            None,
            &[],
            &[answer(204, "removed", Body::Empty), SCHEDULE_NOT_FOUND],
        ),
        api(
            route(
                "pauseSchedule",
                Scope::SchedulesWrite,
                || post(schedules::pause_schedule),
                "post",
                "/api/v1/flex/schedules/{schedule_id}/pause",
            ),
            "Stop a schedule firing until it is resumed",
            None,
            &[],
            &[
                answer(200, "the paused schedule", Body::Json("Schedule")),
                SCHEDULE_NOT_FOUND,
            ],
        ),
        api(
            route(
                "resumeSchedule",
                Scope::SchedulesWrite,
                || post(schedules::resume_schedule),
                "post",
                "/api/v1/flex/schedules/{schedule_id}/resume",
            ),
            "Fire a paused schedule again, from now on",
            None,
            &[],
            &[
                answer(200, "the active schedule", Body::Json("Schedule")),
                SCHEDULE_NOT_FOUND,
            ],
        ),
        api(
            route(
                "createDatasetEvaluation",
                Scope::EvaluationsRun,
                || post(dataset_evaluations::create_evaluation),
                "post",
                "/api/v1/flex/evaluations",
            ),
            "Run a dataset's examples (inline: lines, template, optional judge panel) under this tenant and keep the results; answers at once, the examples running",
            Some("EvaluationRequest"),
            &[],
            &[
                answer(
                    202,
                    "the evaluation, running",
                    Body::Json("EvaluationRecord"),
                ),
                BAD_JSON,
                answer(
                    409,
                    "the tenant has as many evaluations running as allowed (`evaluation_limit`, `details.limit`)",
                    Body::Json("Error"),
                ),
                answer(
                    422,
                    "a wrong dataset line, template or judge panel (`invalid_evaluation`); `details.path` names it (`$.dataset[1].envelope.objective`, `$.judges.request.selectedAgents`)",
                    Body::Json("Error"),
                ),
                NOT_SERVED,
            ],
        ),
        api(
            route(
                "listDatasetEvaluations",
                Scope::RunsRead,
                || get(dataset_evaluations::list_evaluations),
                "get",
                "/api/v1/flex/evaluations",
            ),
            "The tenant's evaluations, newest first, without their results",
            None,
            &[],
            &[
                answer(200, "the evaluations", Body::Json("EvaluationList")),
                NOT_SERVED,
            ],
        ),
        api(
            route(
                "getDatasetEvaluation",
                Scope::RunsRead,
                || get(dataset_evaluations::get_evaluation),
                "get",
                "/api/v1/flex/evaluations/{evaluation_id}",
            ),
            "An evaluation: its status, counts, summary once done, and the results of the examples finished so far",
            None,
            &[],
            &[
                answer(200, "the evaluation", Body::Json("EvaluationRecord")),
                EVALUATION_NOT_FOUND,
                NOT_SERVED,
            ],
        ),
        api(
            route(
                "listAuditRecords",
                Scope::Admin,
                || get(audit::list_audit),
                "get",
                "/api/v1/flex/audit",
            ),
            "The tenant's audit trail, newest first: who changed what, when, and how it went (admin)",
            None,
            &[
                ("limit", "1 to 1000 (default 100)"),
                ("cursor", "the previous page's nextCursor"),
                (
                    "format",
                    "`json` (default) or `jsonl`: one record per line (application/x-ndjson), the next cursor in `X-Next-Cursor`",
                ),
            ],
            &[
                answer(200, "one page", Body::Json("AuditPage")),
                answer(
                    400,
                    "a bad parameter (`details.parameter`)",
                    Body::Json("Error"),
                ),
            ],
        ),
    ]
}

const SANDBOX_OFF: Answer = answer(
    404,
    "the developer sandbox is off on this server: `sandbox_off` (`BATON_SANDBOX=on` turns it on)",
    Body::Json("Error"),
);

/// The developer sandbox (`BATON_SANDBOX=on`).
pub(super) fn sandbox_operations() -> Vec<Operation> {
    vec![
        api(
            route(
                "getSandboxMetadata",
                Scope::RunsRead,
                || get(sandbox::sandbox_metadata),
                "get",
                "/api/v1/flex/sandbox/metadata",
            ),
            "What a developer needs to write an envelope: the registry's capabilities and facets, the JSON Schemas of an envelope, a capability and a facet, the envelope's policies and the example envelopes",
            None,
            &[],
            &[
                answer(200, "the metadata", Body::Json("SandboxMetadata")),
                SANDBOX_OFF,
            ],
        ),
        api(
            route(
                "draftEnvelope",
                Scope::RunsRead,
                || post(sandbox::draft_envelope),
                "post",
                "/api/v1/flex/sandbox/drafts",
            ),
            "One turn of the envelope builder: the conversation so far in; the reply, the drafted envelope (checked as a submission is), its plan, and `ready` once the caller confirmed it. Stores nothing, calls no model",
            Some("DraftRequest"),
            &[],
            &[
                answer(200, "the builder's turn", Body::Json("DraftTurn")),
                BAD_JSON,
                answer(
                    422,
                    "a request the builder cannot read (`invalid_draft`): too many or too long messages, an unknown field; `details.path` names it (`$.messages[3].content`)",
                    Body::Json("Error"),
                ),
                SANDBOX_OFF,
            ],
        ),
    ]
}
