//! Context-type guidance as registry data (`registry/contexts/*.json`): what
//! a conversation in a given context is for and how the agent must behave
//! in it. A session's `contextType` picks one; its text joins the system
//! prompt, and its `requiredPlanSteps` are checked on every plan the
//! session's agent creates (`required_steps_missing`). No context type is
//! named in code.

use serde::{Deserialize, Serialize};

/// One context type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextGuidance {
    pub name: String,
    /// Other names callers use for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// The primary intent, one line.
    pub intent: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_behaviors: Vec<String>,
    /// The model profile this context wants (`speed`, `balanced`, `quality`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Steps every plan created in this context must have, in this order
    /// (each met by a node of one of its capabilities).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_plan_steps: Vec<RequiredPlanStep>,
}

/// One step a context's plans must have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequiredPlanStep {
    /// What the step is, as the agent is told.
    pub name: String,
    /// The capabilities any of which performs it.
    pub capabilities: Vec<String>,
}

impl ContextGuidance {
    /// Checks a definition; an error is `(JSON path, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        let valid = |name: &str| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !valid(&self.name) {
            return Err((
                "$.name".into(),
                format!("`{}`: ASCII letters, digits, `_` or `-`", self.name),
            ));
        }
        if let Some(index) = self.aliases.iter().position(|alias| !valid(alias)) {
            return Err((
                format!("$.aliases[{index}]"),
                "ASCII letters, digits, `_` or `-`".into(),
            ));
        }
        if self.intent.trim().is_empty() {
            return Err(("$.intent".into(), "say what the context is for".into()));
        }
        for (index, step) in self.required_plan_steps.iter().enumerate() {
            if step.name.trim().is_empty() {
                return Err((
                    format!("$.requiredPlanSteps[{index}].name"),
                    "name the step".into(),
                ));
            }
            if step.capabilities.is_empty() {
                return Err((
                    format!("$.requiredPlanSteps[{index}].capabilities"),
                    "name at least one capability that performs the step".into(),
                ));
            }
        }
        Ok(())
    }

    /// The first capability a required step names that `registered` does
    /// not know, as `(JSON path, message)`.
    pub fn unknown_step_capability(
        &self,
        registered: impl Fn(&str) -> bool,
    ) -> Option<(String, String)> {
        self.required_plan_steps
            .iter()
            .enumerate()
            .flat_map(|(index, step)| {
                step.capabilities
                    .iter()
                    .enumerate()
                    .map(move |(position, capability)| (index, position, capability))
            })
            .find(|(_, _, capability)| !registered(capability))
            .map(|(index, position, capability)| {
                (
                    format!("$.requiredPlanSteps[{index}].capabilities[{position}]"),
                    format!("`{capability}` is not a registered capability"),
                )
            })
    }

    /// The required steps a plan whose nodes run `capabilities` (in the
    /// plan's order) does not have in order, as a sentence the agent reads;
    /// `None` when it has them all.
    pub fn required_steps_missing<'a>(
        &self,
        capabilities: impl IntoIterator<Item = &'a str>,
    ) -> Option<String> {
        if self.required_plan_steps.is_empty() {
            return None;
        }
        let planned: Vec<&str> = capabilities.into_iter().collect();
        let mut from = 0;
        let mut missing = Vec::new();
        for step in &self.required_plan_steps {
            let found = planned[from..]
                .iter()
                .position(|capability| step.capabilities.iter().any(|wanted| wanted == capability));
            match found {
                Some(offset) => from += offset + 1,
                None => missing.push(step.name.as_str()),
            }
        }
        if missing.is_empty() {
            return None;
        }
        let order: Vec<String> = self
            .required_plan_steps
            .iter()
            .map(|step| format!("{} ({})", step.name, step.capabilities.join(" or ")))
            .collect();
        Some(format!(
            "In the `{}` context a plan must have these steps, in this order: {}. This plan lacks (or has out of order): {}. Ask for outputs that need them and call again.",
            self.name,
            order.join(" → "),
            missing.join(", ")
        ))
    }

    /// Whether `context_type` names this context (its name or an alias).
    pub fn answers_to(&self, context_type: &str) -> bool {
        self.name == context_type || self.aliases.iter().any(|alias| alias == context_type)
    }

    /// The section this context adds to a session's system prompt.
    pub fn prompt_section(&self) -> String {
        let mut section = format!("Context: {}. Intent: {}.", self.name, self.intent);
        if !self.required_behaviors.is_empty() {
            section.push_str("\nRequired behaviours:");
            for behavior in &self.required_behaviors {
                section.push_str("\n- ");
                section.push_str(behavior);
            }
        }
        section
    }
}
