//! The envelope builder's turn: the conversation read from its first
//! message, the envelope drafted from what it says, checked, and the reply
//! that asks for what is missing or shows the plan.

use std::collections::BTreeSet;

use baton_core::basics::error::Refusal;
use baton_core::catalog::registry::Registry;
use baton_core::planning::preview::PlanPreview;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::conversation::{
    DraftProblem, DraftRequest, DraftRole, InputText, MAX_DRAFT_MESSAGE_BYTES, MAX_DRAFT_MESSAGES,
    Reading, read_message,
};
use crate::goals::{goals_in_words, inputs_to_ask, producible};
use crate::inputs::{AskedInput, asked_input, input_problems, not_a_facet, shape_text};

/// A drafted envelope checked as a submission would be: refused (with
/// its path), or planned and judged. `baton plan`'s checks, given by the
/// caller (the API's run service, the CLI's registry).
pub trait EnvelopeCheck {
    fn check(&self, envelope: &Value) -> Result<PlanPreview, DraftProblem>;
}

impl<F: Fn(&Value) -> Result<PlanPreview, DraftProblem>> EnvelopeCheck for F {
    fn check(&self, envelope: &Value) -> Result<PlanPreview, DraftProblem> {
        self(envelope)
    }
}

/// Where the conversation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DraftStage {
    /// No objective yet: the builder asks what the run is for.
    NeedsObjective,
    /// The objective names no output the registry makes.
    NeedsOutputs,
    /// A plan needs inputs not given (or given wrong).
    NeedsInputs,
    /// The drafted envelope is refused or its plan rejected.
    NeedsChanges,
    /// The envelope passes: the caller confirms or changes it.
    AwaitingConfirmation,
    /// Confirmed: `envelope` is the caller's.
    Ready,
}

/// The builder's answer to one turn.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DraftTurn {
    /// What the builder says, in prose.
    pub reply: String,
    pub stage: DraftStage,
    /// Whether `envelope` is confirmed and passes: submit it as it is.
    pub ready: bool,
    pub objective: Option<String>,
    /// The outputs (facet names) the envelope's contract asks for.
    pub outputs: Vec<String>,
    /// The inputs given so far, by facet name.
    pub inputs: Vec<String>,
    /// Inputs a plan cannot do without.
    pub missing_inputs: Vec<AskedInput>,
    /// Inputs a plan would read if given.
    pub optional_inputs: Vec<AskedInput>,
    /// What is wrong now: the last message, the inputs, the envelope.
    pub problems: Vec<DraftProblem>,
    /// The drafted envelope (once there is an objective and an output).
    pub envelope: Option<Value>,
    /// The plan a run of it would start with, judged (`baton plan`'s
    /// JSON: `diagnostics`, `plan`, `escalation`).
    pub plan: Option<Value>,
    /// The plan as a Mermaid flowchart.
    pub plan_mermaid: Option<String>,
}

/// What the conversation has said so far.
#[derive(Default)]
struct Understanding {
    objective: Option<String>,
    outputs: Vec<String>,
    inputs: Map<String, Value>,
    last_confirms: bool,
    /// Problems of the last message read.
    problems: Vec<DraftProblem>,
}

/// One turn: `request`'s conversation read, the envelope drafted and
/// checked by `check`, and the reply. An unreadable request (too many or
/// too long messages) is refused naming its path.
pub fn draft_turn(
    registry: &Registry,
    request: &DraftRequest,
    check: &dyn EnvelopeCheck,
) -> Result<DraftTurn, DraftProblem> {
    if request.messages.len() > MAX_DRAFT_MESSAGES {
        return Err(DraftProblem::new(
            "$.messages",
            format!(
                "{} messages; a conversation has at most {MAX_DRAFT_MESSAGES}: start a new one with what you have",
                request.messages.len()
            ),
        ));
    }
    let mut understanding = Understanding::default();
    for (index, message) in request.messages.iter().enumerate() {
        if message.content.len() > MAX_DRAFT_MESSAGE_BYTES {
            return Err(DraftProblem::new(
                format!("$.messages[{index}].content"),
                format!(
                    "{} bytes; a message has at most {MAX_DRAFT_MESSAGE_BYTES}",
                    message.content.len()
                ),
            ));
        }
        if message.role == DraftRole::User {
            understanding.read(registry, index, &message.content);
        }
    }
    Ok(understanding.answer(registry, check))
}

impl Understanding {
    fn read(&mut self, registry: &Registry, index: usize, content: &str) {
        let path = format!("$.messages[{index}].content");
        self.problems.clear();
        self.last_confirms = false;
        let mut reading = read_message(content, self.objective.is_some());
        // "Goal: …" first is an objective, not an input named `Goal`.
        if self.objective.is_none()
            && let Reading::Inputs(pairs) = &reading
            && pairs
                .iter()
                .any(|(key, _)| registry.facets.get(facet_of(key)).is_none())
        {
            reading = Reading::Objective(content.trim().to_string());
        }
        match reading {
            Reading::Objective(objective) => {
                self.outputs = goals_in_words(registry, &objective);
                self.objective = Some(objective);
            }
            Reading::Confirm => self.last_confirms = true,
            Reading::AddGoals(names) => {
                for name in names {
                    match registry.facets.get(&name) {
                        Some(facet) if producible(registry, facet) => {
                            if !self.outputs.contains(&name) {
                                self.outputs.push(name);
                            }
                        }
                        Some(_) => self.problems.push(DraftProblem::new(
                            &path,
                            format!("no capability of this registry produces `{name}`"),
                        )),
                        None => self
                            .problems
                            .push(DraftProblem::new(&path, not_a_facet(registry, &name))),
                    }
                }
            }
            Reading::RemoveGoals(names) => {
                for name in names {
                    let before = self.outputs.len();
                    self.outputs.retain(|output| *output != name);
                    if self.outputs.len() == before {
                        self.problems.push(DraftProblem::new(
                            &path,
                            format!(
                                "`{name}` is not among the outputs ({})",
                                self.outputs.join(", ")
                            ),
                        ));
                    }
                }
            }
            Reading::Inputs(pairs) => {
                for (key, text) in pairs {
                    if let Err(refusal) = self.give_input(registry, &key, text) {
                        self.problems.push(DraftProblem::new(&path, refusal.0));
                    }
                }
            }
            Reading::Unreadable(why) => self.problems.push(DraftProblem::new(
                path,
                format!("I could not read it: {why}"),
            )),
        }
    }

    /// Sets `key` (`facet` or `facet.field.…`) to `text` shaped by its schema.
    fn give_input(
        &mut self,
        registry: &Registry,
        key: &str,
        text: InputText,
    ) -> Result<(), Refusal> {
        let facet_name = facet_of(key);
        let facet = registry
            .facets
            .get(facet_name)
            .ok_or_else(|| Refusal(not_a_facet(registry, facet_name)))?;
        if !facet.direction.allows_input() {
            return Err(Refusal(format!(
                "`{facet_name}` is an output of this registry; it cannot be given as an input"
            )));
        }
        let fields: Vec<&str> = key.split('.').skip(1).collect();
        let mut schema = &facet.schema;
        for field in &fields {
            schema = &schema["properties"][*field];
        }
        let value = match text {
            InputText::Json(value) => value,
            InputText::Text(text) => {
                shape_text(&text, schema).map_err(|why| Refusal(format!("`{key}`: {why}")))?
            }
        };
        let mut slot = self
            .inputs
            .entry(facet_name.to_string())
            .or_insert_with(|| {
                if fields.is_empty() {
                    Value::Null
                } else {
                    json!({})
                }
            });
        for field in &fields {
            if !slot.is_object() {
                *slot = json!({});
            }
            slot = slot
                .as_object_mut()
                .map(|object| object.entry(field.to_string()).or_insert(Value::Null))
                .ok_or_else(|| Refusal(format!("`{key}` cannot be set")))?;
        }
        *slot = value;
        Ok(())
    }

    fn answer(self, registry: &Registry, check: &dyn EnvelopeCheck) -> DraftTurn {
        let mut turn = DraftTurn {
            reply: String::new(),
            stage: DraftStage::NeedsObjective,
            ready: false,
            objective: self.objective.clone(),
            outputs: self.outputs.clone(),
            inputs: self.inputs.keys().cloned().collect(),
            missing_inputs: Vec::new(),
            optional_inputs: Vec::new(),
            problems: self.problems.clone(),
            envelope: None,
            plan: None,
            plan_mermaid: None,
        };
        let Some(objective) = &self.objective else {
            turn.reply = "What should the run produce? Describe the work in a sentence (for example what you want written, reviewed or decided), and I will find the capabilities that make it.".into();
            return turn;
        };
        if self.outputs.is_empty() {
            turn.stage = DraftStage::NeedsOutputs;
            let offered: Vec<String> = registry
                .facets
                .list()
                .filter(|facet| producible(registry, facet))
                .map(|facet| format!("`{}` ({})", facet.name, facet.title))
                .collect();
            turn.reply = format!(
                "I could not tell which outputs \"{objective}\" asks for. This registry can produce: {}. Say `add NAME` for each you want.",
                offered.join(", ")
            );
            return turn;
        }
        let envelope = self.envelope(registry, objective);
        let supplied: BTreeSet<String> = self.inputs.keys().cloned().collect();
        let asked = inputs_to_ask(registry, &self.outputs, &supplied);
        turn.missing_inputs = asked
            .required
            .iter()
            .filter_map(|name| asked_input(registry, name))
            .collect();
        turn.optional_inputs = asked
            .optional
            .iter()
            .filter_map(|name| asked_input(registry, name))
            .collect();
        turn.problems.extend(input_problems(registry, &self.inputs));
        turn.envelope = Some(envelope.clone());
        let outputs = backticked(&self.outputs);
        if !turn.missing_inputs.is_empty()
            || turn
                .problems
                .iter()
                .any(|problem| problem.path.starts_with("$.inputs"))
        {
            turn.stage = DraftStage::NeedsInputs;
            turn.reply = needs_inputs_reply(&outputs, &turn);
            return turn;
        }
        let preview = match check.check(&envelope) {
            Ok(preview) => preview,
            Err(problem) => {
                turn.stage = DraftStage::NeedsChanges;
                turn.reply = format!(
                    "The draft is refused at `{}`: {}. Change what it names and send it again.",
                    problem.path, problem.message
                );
                turn.problems.push(problem);
                return turn;
            }
        };
        turn.plan = serde_json::to_value(&preview).ok();
        turn.plan_mermaid = preview
            .plan
            .as_ref()
            .map(baton_core::planning::plan_picture::to_mermaid);
        if preview.is_rejected() {
            turn.stage = DraftStage::NeedsChanges;
            let reasons: Vec<String> = preview
                .diagnostics
                .failures
                .iter()
                .map(|failure| {
                    let what = failure
                        .constraint
                        .clone()
                        .unwrap_or_else(|| "the plan".into());
                    match &failure.suggestion {
                        Some(suggestion) => format!("{what}: {suggestion}"),
                        None => what,
                    }
                })
                .collect();
            turn.reply = format!(
                "A plan for {outputs} is rejected: {}. Add inputs or change the outputs.",
                reasons.join("; ")
            );
            return turn;
        }
        let steps: Vec<String> = preview
            .plan
            .iter()
            .flat_map(|plan| plan.nodes.iter())
            .map(|node| format!("{} ({})", node.label, node.capability_id))
            .collect();
        if self.last_confirms && turn.problems.is_empty() {
            turn.stage = DraftStage::Ready;
            turn.ready = true;
            turn.reply = format!(
                "Here is your envelope: it asks for {outputs} and plans {} step(s). Submit it as it is, or keep it as a file.",
                steps.len()
            );
        } else {
            turn.stage = DraftStage::AwaitingConfirmation;
            turn.reply = format!(
                "The envelope passes the plan checks. Its plan: {}. Say `yes` to take it, `add NAME` or `remove NAME` to change the outputs, or give more inputs.",
                steps.join(" → ")
            );
        }
        turn
    }

    fn envelope(&self, registry: &Registry, objective: &str) -> Value {
        let properties: Map<String, Value> = self
            .outputs
            .iter()
            .map(|name| {
                let schema = registry
                    .facets
                    .get(name)
                    .map_or(json!({}), |facet| facet.schema.clone());
                (name.clone(), schema)
            })
            .collect();
        let mut envelope = json!({
            "objective": objective,
            "outputContract": {"schema": {
                "type": "object",
                "required": self.outputs,
                "properties": properties,
            }},
        });
        if !self.inputs.is_empty() {
            envelope["inputs"] = Value::Object(self.inputs.clone());
        }
        envelope
    }
}

/// The facet a key (`facet.field`) is about.
fn facet_of(key: &str) -> &str {
    key.split('.').next().unwrap_or(key)
}

fn backticked(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<String>>()
        .join(" and ")
}

fn needs_inputs_reply(outputs: &str, turn: &DraftTurn) -> String {
    let describe = |input: &AskedInput| {
        let fields: Vec<String> = input
            .fields
            .iter()
            .map(|field| {
                if field.required {
                    format!("{} (required)", field.name)
                } else {
                    field.name.clone()
                }
            })
            .collect();
        if fields.is_empty() {
            format!("`{}`: {}", input.facet, input.description)
        } else {
            format!(
                "`{}`: {} Fields: {}.",
                input.facet,
                input.description,
                fields.join(", ")
            )
        }
    };
    let mut reply = if turn.missing_inputs.is_empty() {
        format!("Some inputs for {outputs} are not right yet.")
    } else {
        let needed: Vec<String> = turn.missing_inputs.iter().map(describe).collect();
        format!("To produce {outputs}, a plan needs: {}", needed.join(" "))
    };
    if !turn.optional_inputs.is_empty() {
        let optional: Vec<String> = turn
            .optional_inputs
            .iter()
            .map(|input| format!("`{}`", input.facet))
            .collect();
        reply.push_str(&format!(
            " It would also read {} if you give them.",
            optional.join(", ")
        ));
    }
    let wrong: Vec<String> = turn.problems.iter().map(ToString::to_string).collect();
    if !wrong.is_empty() {
        reply.push_str(&format!(" Not right yet: {}.", wrong.join("; ")));
    }
    reply
        .push_str(" Give them as `facet.field: value` lines or as one JSON object keyed by facet.");
    reply
}
