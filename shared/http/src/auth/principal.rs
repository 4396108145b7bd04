//! The one `Principal` a request's credential becomes (tenant, user,
//! groups, scopes), and the scopes that name what a caller may do. Nothing
//! below the edge reads a header or a token: routes, A2A and MCP take the
//! principal the middleware put in the request.

use std::fmt;

use axum::http::StatusCode;
use serde_json::json;

use crate::error::ApiError;

/// What a caller may do. `admin` holds every other scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Read runs, their frames, snapshots, tasks, threads, schedules,
    /// evaluations and the registry.
    RunsRead,
    /// Submit, cancel and fork runs; chat.
    RunsWrite,
    /// Answer or decline a person's task (`run.resume`).
    TasksAnswer,
    /// Approve or reject an approval request; trigger a policy.
    ApprovalsDecide,
    /// Register or deregister a capability.
    RegistryWrite,
    /// Create, pause, resume and delete schedules.
    SchedulesWrite,
    /// Run a judge panel or a dataset evaluation.
    EvaluationsRun,
    /// Everything above, and the audit trail.
    Admin,
}

impl Scope {
    /// Every scope, in the order the documentation lists them.
    pub const ALL: [Scope; 8] = [
        Scope::RunsRead,
        Scope::RunsWrite,
        Scope::TasksAnswer,
        Scope::ApprovalsDecide,
        Scope::RegistryWrite,
        Scope::SchedulesWrite,
        Scope::EvaluationsRun,
        Scope::Admin,
    ];

    /// The scope's name on the wire (`runs:write`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::RunsRead => "runs:read",
            Scope::RunsWrite => "runs:write",
            Scope::TasksAnswer => "tasks:answer",
            Scope::ApprovalsDecide => "approvals:decide",
            Scope::RegistryWrite => "registry:write",
            Scope::SchedulesWrite => "schedules:write",
            Scope::EvaluationsRun => "evaluations:run",
            Scope::Admin => "admin",
        }
    }

    /// A scope by its wire name; `None` for a name Baton does not know (an
    /// identity provider's other scopes, `openid`, `email`, are ignored).
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == name.trim())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// How the caller proved who they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A token of `BATON_API_TOKENS`.
    StaticToken,
    /// An OIDC JWT verified against the issuer's keys.
    Jwt,
    /// No credential: a server without tokens (local development).
    Anonymous,
}

/// Who a request acts for, and what they may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant whose runs the caller reaches.
    pub tenant: String,
    /// The signed-in user (a JWT's user claim, or the user a static token
    /// names); `None` for a service token that names none.
    pub user: Option<String>,
    /// Group claims (a JWT's groups claim, or a static token's groups).
    pub groups: Vec<String>,
    /// The scopes held (`admin` implies the rest).
    pub scopes: Vec<Scope>,
    pub credential: Credential,
}

impl Principal {
    /// Whether the caller holds `scope` (or `admin`).
    pub fn holds(&self, scope: Scope) -> bool {
        self.scopes
            .iter()
            .any(|held| *held == scope || *held == Scope::Admin)
    }

    /// `Ok` when the caller holds `scope`, else the 403 naming it.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.holds(scope) {
            return Ok(());
        }
        Err(missing_scope(scope, &self.scopes))
    }

    /// The caller as one who answers tasks: their user and groups; an
    /// `admin` may answer any task.
    pub fn answerer(&self) -> baton_core::state::tasks::Answerer {
        baton_core::state::tasks::Answerer {
            user: self.user.clone(),
            groups: self.groups.clone(),
            may_answer_any_task: self.scopes.contains(&Scope::Admin),
        }
    }

    /// Who this caller is in a record: the user, else the credential kind.
    pub fn actor(&self) -> String {
        match (&self.user, self.credential) {
            (Some(user), _) => user.clone(),
            (None, Credential::StaticToken) => "token".to_string(),
            (None, Credential::Jwt) => "jwt".to_string(),
            (None, Credential::Anonymous) => "anonymous".to_string(),
        }
    }
}

/// The 403 a caller without `scope` gets.
pub fn missing_scope(scope: Scope, held: &[Scope]) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "missing_scope",
        format!("this needs the `{scope}` scope, which the caller's credential does not hold"),
    )
    .with_details(json!({
        "scope": scope.as_str(),
        "held": held.iter().map(|held| held.as_str()).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(scopes: Vec<Scope>) -> Principal {
        Principal {
            tenant: "t".into(),
            user: Some("ana".into()),
            groups: vec![],
            scopes,
            credential: Credential::Jwt,
        }
    }

    #[test]
    fn scopes_round_trip_and_admin_holds_every_one() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
            assert!(principal(vec![Scope::Admin]).holds(scope));
        }
        assert_eq!(Scope::parse("openid"), None);
        let reader = principal(vec![Scope::RunsRead]);
        assert!(reader.holds(Scope::RunsRead));
        assert!(!reader.holds(Scope::RunsWrite));
        let refusal = reader.require(Scope::ApprovalsDecide).unwrap_err();
        assert_eq!(refusal.status, StatusCode::FORBIDDEN);
        assert!(
            refusal.to_string().contains("approvals:decide"),
            "{refusal}"
        );
    }
}
