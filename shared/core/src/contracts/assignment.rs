//! Who may answer: a task's or an approval's [`Assignment`] (named users,
//! members of named groups), and the person who answers ([`Answerer`]),
//! as the edge authenticated them. A capability's `assignmentDefaults`
//! assign its tasks (`state::tasks`); an envelope's `hitl` policy action
//! assigns its approvals (`approvers`).

use serde::{Deserialize, Serialize};

/// Who may answer a task: named users, and members of named groups (a
/// capability's `role` is a group). The core says who a task is for; the
/// edge says who the caller is (an [`Answerer`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Assignment {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// Group claims (`roles` is read as the same).
    #[serde(default, alias = "roles", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Who answers: the signed-in user and their groups, or an operator who may
/// answer any task (an `admin`, the local CLI).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Answerer {
    pub user: Option<String>,
    pub groups: Vec<String>,
    pub may_answer_any_task: bool,
}

impl Answerer {
    /// An operator who may answer any task, named `user` when known.
    pub fn operator(user: Option<String>) -> Self {
        Answerer {
            user,
            groups: Vec::new(),
            may_answer_any_task: true,
        }
    }
}
