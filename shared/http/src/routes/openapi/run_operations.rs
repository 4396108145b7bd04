//! The runs', capabilities' and people's operations of the table (split
//! from `mod.rs` to keep each file short), in the order the document lists
//! them.

use axum::routing::{delete, get, patch, post};

use super::super::{capabilities, events, forks, people, runs};
use super::{BAD_JSON, Body, CONFLICT, INVALID, NOT_FOUND, Operation, answer, api, route};
use crate::auth::Scope;

const CAPABILITY_NOT_REGISTERED: super::Answer = answer(
    404,
    "no registration of that id for the tenant: `capability_not_registered`",
    Body::Json("Error"),
);

pub(super) fn runs_and_people() -> Vec<Operation> {
    vec![
        api(
            route(
                "submitRun",
                Scope::RunsWrite,
                || post(runs::create_run),
                "post",
                "/api/v1/flex/runs",
            ),
            "Submit a task envelope; the run starts on the step queue",
            Some("TaskEnvelope"),
            &[],
            &[
                answer(202, "created", Body::Json("RunAccepted")),
                answer(
                    200,
                    "the same idempotency key was submitted before, or constraints.resumeRunId names a run: that run",
                    Body::Json("RunAccepted"),
                ),
                answer(
                    404,
                    "constraints.resumeRunId names no run of the tenant",
                    Body::Json("Error"),
                ),
                BAD_JSON,
                INVALID,
            ],
        ),
        api(
            route(
                "listRuns",
                Scope::RunsRead,
                || get(runs::list_runs),
                "get",
                "/api/v1/flex/runs",
            ),
            "The tenant's runs, newest first",
            None,
            &[
                ("status", "only runs with this status"),
                ("limit", "1 to 100 (default 20)"),
                ("cursor", "the previous page's nextCursor"),
                ("forkedFrom", "only the forks of this run"),
            ],
            &[
                answer(200, "one page", Body::Json("RunListPage")),
                answer(
                    400,
                    "a bad parameter (`details.parameter`)",
                    Body::Json("Error"),
                ),
            ],
        ),
        api(
            route(
                "submitRunAndStream",
                Scope::RunsWrite,
                || post(runs::create_run_and_stream),
                "post",
                "/api/v1/flex/run.stream",
            ),
            "Submit an envelope and stream the run's frames until it ends or parks",
            Some("TaskEnvelope"),
            &[("dialect", "`hooks`: the hook-event rendering")],
            &[
                answer(
                    200,
                    "the run's frames (with constraints.resumeRunId: that run's, from its first)",
                    Body::Sse,
                ),
                answer(
                    404,
                    "constraints.resumeRunId names no run of the tenant",
                    Body::Json("Error"),
                ),
                BAD_JSON,
                INVALID,
            ],
        ),
        api(
            route(
                "getRun",
                Scope::RunsRead,
                || get(runs::run_snapshot),
                "get",
                "/api/v1/flex/runs/{run_id}",
            ),
            "A redacted snapshot of a run: status, plan, nodes, usage and cost, notifications",
            None,
            &[],
            &[
                answer(200, "the snapshot", Body::Json("RunSnapshotResponse")),
                NOT_FOUND,
            ],
        ),
        api(
            route(
                "streamRunEvents",
                Scope::RunsRead,
                || get(events::run_events),
                "get",
                "/api/v1/flex/runs/{run_id}/events",
            ),
            "The run's frames: replay, then follow (`Last-Event-ID` resumes)",
            None,
            &[("dialect", "`hooks`: the hook-event rendering")],
            &[
                answer(200, "the run's frames", Body::Sse),
                answer(
                    400,
                    "a `Last-Event-ID` that is not a frame id",
                    Body::Json("Error"),
                ),
                NOT_FOUND,
            ],
        ),
        api(
            route(
                "cancelRun",
                Scope::RunsWrite,
                || post(runs::cancel_run),
                "post",
                "/api/v1/flex/runs/{run_id}/cancel",
            ),
            "Cancel a run that has not ended",
            None,
            &[],
            &[
                answer(
                    202,
                    "the run's status after the cancel",
                    Body::Json("RunStatusAnswer"),
                ),
                NOT_FOUND,
            ],
        ),
        api(
            route(
                "getRunHistory",
                Scope::RunsRead,
                || get(forks::run_history),
                "get",
                "/api/v1/flex/runs/{run_id}/history",
            ),
            "The run's checkpoints (plan versions, node completions) a fork can start from",
            None,
            &[],
            &[
                answer(200, "the checkpoints", Body::Json("RunHistory")),
                NOT_FOUND,
            ],
        ),
        api(
            route(
                "forkRun",
                Scope::RunsWrite,
                || post(forks::fork_run),
                "post",
                "/api/v1/flex/runs/{run_id}/fork",
            ),
            "A new run from a point of this one, reusing what was done there, with inputs or node outputs changed",
            Some("ForkRequest"),
            &[],
            &[
                answer(202, "the new run", Body::Json("RunAccepted")),
                BAD_JSON,
                NOT_FOUND,
                INVALID,
            ],
        ),
        api(
            route(
                "listCapabilities",
                Scope::RunsRead,
                || get(capabilities::list_capabilities),
                "get",
                "/api/v1/flex/capabilities",
            ),
            "The registry's capabilities and the tenant's registrations; with `q`, those a search finds, best first",
            None,
            &[
                (
                    "q",
                    "words (or a sentence) to search the capabilities by: BM25, fused with embeddings where the deployment has an embedding model",
                ),
                ("limit", "with `q`: 1 to 100 matches (default 20)"),
            ],
            &[
                answer(200, "the capabilities", Body::Json("CapabilityList")),
                answer(
                    400,
                    "a bad parameter (`details.parameter`)",
                    Body::Json("Error"),
                ),
            ],
        ),
        api(
            route(
                "registerCapability",
                Scope::RegistryWrite,
                || post(capabilities::register_capability),
                "post",
                "/api/v1/flex/capabilities/register",
            ),
            "Register (or heartbeat) a capability",
            Some("CapabilityRegistration"),
            &[],
            &[
                answer(
                    200,
                    "the registration with its compiled schemas",
                    Body::Json("CapabilityRegistered"),
                ),
                BAD_JSON,
                answer(
                    409,
                    "the capability id belongs to the registry files or conflicts",
                    Body::Json("Error"),
                ),
                INVALID,
            ],
        ),
        api(
            route(
                "renewCapability",
                Scope::RegistryWrite,
                || patch(capabilities::renew_capability),
                "patch",
                "/api/v1/flex/capabilities/{capability_id}",
            ),
            "A registered capability's heartbeat: seen now, active again",
            None,
            &[],
            &[
                answer(
                    200,
                    "the registration with its status",
                    Body::Json("CapabilitySummary"),
                ),
                CAPABILITY_NOT_REGISTERED,
            ],
        ),
        api(
            route(
                "deregisterCapability",
                Scope::RegistryWrite,
                || delete(capabilities::deregister_capability),
                "delete",
                "/api/v1/flex/capabilities/{capability_id}",
            ),
            "Remove a registration (a run's node of it escalates)",
            None,
            &[],
            &[
                answer(204, "removed", Body::Empty),
                CAPABILITY_NOT_REGISTERED,
            ],
        ),
        api(
            route(
                "resumeRun",
                Scope::TasksAnswer,
                || post(people::resume_run),
                "post",
                "/api/v1/flex/run.resume",
            ),
            "A person's answer to a parked node, a clarifying answer, or a pause resumed",
            Some("ResumeRequest"),
            &[],
            &[
                answer(
                    200,
                    "the run goes on (`Accept: text/event-stream`: its frames)",
                    Body::Json("HumanActionApplied"),
                ),
                BAD_JSON,
                NOT_FOUND,
                CONFLICT,
                INVALID,
            ],
        ),
        api(
            route(
                "resolveRequest",
                Scope::ApprovalsDecide,
                || post(people::resolve_request),
                "post",
                "/api/v1/flex/hitl/resolve",
            ),
            "Approve or reject a pending approval request",
            Some("ResolveRequest"),
            &[],
            &[
                answer(200, "resolved", Body::Json("HumanActionApplied")),
                BAD_JSON,
                NOT_FOUND,
                CONFLICT,
            ],
        ),
        api(
            route(
                "triggerPolicy",
                Scope::ApprovalsDecide,
                || post(people::trigger_policy),
                "post",
                "/api/v1/flex/runs/{run_id}/policies/{policy_id}/trigger",
            ),
            "Fire a manual runtime policy",
            None,
            &[],
            &[
                answer(200, "fired", Body::Json("HumanActionApplied")),
                NOT_FOUND,
                CONFLICT,
            ],
        ),
        api(
            route(
                "listTasks",
                Scope::RunsRead,
                || get(people::list_tasks),
                "get",
                "/api/v1/flex/tasks",
            ),
            "The tasks parked runs wait on a person for",
            None,
            &[
                ("status", "only `pending` (the default)"),
                ("capabilityId", "only this capability's tasks"),
            ],
            &[
                answer(200, "the pending tasks", Body::Json("TaskList")),
                answer(400, "a status other than `pending`", Body::Json("Error")),
            ],
        ),
        api(
            route(
                "listRequests",
                Scope::RunsRead,
                || get(people::list_requests),
                "get",
                "/api/v1/flex/hitl/requests",
            ),
            "The pending approval requests and clarifying questions",
            None,
            &[],
            &[answer(
                200,
                "the pending requests",
                Body::Json("RequestList"),
            )],
        ),
        api(
            route(
                "declineTask",
                Scope::TasksAnswer,
                || post(people::decline_task),
                "post",
                "/api/v1/flex/tasks/{task_id}/decline",
            ),
            "A person declines a task (the run fails or fires onTimeout)",
            Some("DeclineRequest"),
            &[],
            &[
                answer(200, "declined", Body::Json("HumanActionApplied")),
                BAD_JSON,
                NOT_FOUND,
                CONFLICT,
            ],
        ),
    ]
}
