//! Where a run and a node stand: the statuses every layer reads (frames,
//! notifications, the store's indexes), kept apart from the run state that
//! holds them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    AwaitingHuman,
    /// Held on an approval request or a clarifying question.
    AwaitingHitl,
    /// Paused by a policy until `run.resume`.
    Paused,
    Completed,
    Failed,
    PlanRejected,
    Cancelled,
}

impl RunStatus {
    /// No further step will change the run.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed
                | RunStatus::Failed
                | RunStatus::PlanRejected
                | RunStatus::Cancelled
        )
    }
    /// At work: queued or running (what a tenant's live-run limit counts;
    /// parked and ended runs are not at work).
    pub fn is_at_work(self) -> bool {
        matches!(self, RunStatus::Queued | RunStatus::Running)
    }
    /// Terminal, or parked until something outside the engine acts.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self.awaits_people()
    }
    /// Parked until a person acts: a human task, an approval or question,
    /// or a pause to resume.
    pub fn awaits_people(self) -> bool {
        matches!(
            self,
            RunStatus::AwaitingHuman | RunStatus::AwaitingHitl | RunStatus::Paused
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::AwaitingHuman => "awaiting_human",
            RunStatus::AwaitingHitl => "awaiting_hitl",
            RunStatus::Paused => "paused",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::PlanRejected => "plan_rejected",
            RunStatus::Cancelled => "cancelled",
        }
    }
    /// Every status, in the order a run may pass through them.
    pub const ALL: [RunStatus; 9] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::AwaitingHuman,
        RunStatus::AwaitingHitl,
        RunStatus::Paused,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::PlanRejected,
        RunStatus::Cancelled,
    ];
    /// The status `text` names ([`RunStatus::as_str`]'s inverse).
    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Waiting for upstream nodes.
    Pending,
    /// A step message for `current_attempt` is in the outbox or on the queue.
    Scheduled,
    AwaitingHuman,
    /// Its own steps are at work: a panel's judges, one step each.
    Deliberating,
    Completed,
    Failed,
    /// Never ran: its guard did not hold, or every node it depends on was
    /// skipped. Ended, like completed, without an output.
    Skipped,
}

impl NodeStatus {
    /// Completed or skipped: the node will not run again and its
    /// dependents may go on (with its output, or without it).
    pub fn is_settled(self) -> bool {
        matches!(self, NodeStatus::Completed | NodeStatus::Skipped)
    }
}
