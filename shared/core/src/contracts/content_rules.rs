//! Content rules as registry data (`registry/rules/*.json`): limits a
//! delivered text must keep where the registry declares them (its length,
//! words it must not use, its hashtags), checked deterministically on every
//! node answer that carries a facet they target, like a schema. A rule set
//! applies to a run when its `appliesWhen` (JSONLogic over the envelope's
//! `objective`, `inputs` and `constraints`) holds, e.g. a constraint naming
//! the channel a post is for. A broken rule is a violation of the node's
//! output (its JSON pointer, the facet and the rule named): the node is
//! asked again with it, like any contract violation. No channel, word or
//! limit is named in code.
//!
//! Invariants: checking reads only the answer and the rules (no I/O, no
//! clock); a rule set that targets none of a node's facets costs a string
//! comparison per target; lengths count Unicode scalar values.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::schema::SchemaViolation;

/// One rule set (a registry `rules/*.json` document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContentRules {
    /// The rule set's name, in violations and warnings.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSONLogic over `{objective, inputs, constraints}` of the envelope:
    /// the rules apply to runs where it holds. Absent: to every run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_when: Option<Value>,
    /// The texts checked.
    pub targets: Vec<RuleTarget>,
    /// Most characters (Unicode scalar values) one target text may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    /// Words or phrases a text must not contain (whole words, any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden_words: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashtags: Option<HashtagRule>,
}

/// Where the checked texts are: a facet, and inside it a JSON pointer
/// whose `*` segments stand for every item of an array or member of an
/// object. A string found is one text; an object or array found is one
/// text made of its strings, in order, a blank line apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleTarget {
    pub facet: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pointer: String,
}

/// Hashtags (`#` then letters, digits or `_`) per text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HashtagRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<usize>,
    /// Hashtags every text must carry (with or without `#`, any case).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
}

impl ContentRules {
    /// Checks a definition; an error is `(JSON path, message)`.
    pub fn check(&self, facet_known: impl Fn(&str) -> bool) -> Result<(), (String, String)> {
        if self.name.is_empty() {
            return Err(("$.name".into(), "a rule set needs a name".into()));
        }
        if self.targets.is_empty() {
            return Err((
                "$.targets".into(),
                "name at least one facet to check".into(),
            ));
        }
        for (index, target) in self.targets.iter().enumerate() {
            if !facet_known(&target.facet) {
                return Err((
                    format!("$.targets[{index}].facet"),
                    format!("unknown facet `{}`", target.facet),
                ));
            }
            if !target.pointer.is_empty() && !target.pointer.starts_with('/') {
                return Err((
                    format!("$.targets[{index}].pointer"),
                    "a JSON pointer starts with `/`".into(),
                ));
            }
        }
        if let Some(condition) = &self.applies_when {
            crate::basics::logic::check_expression_reads_only(
                condition,
                &["objective".into(), "inputs".into(), "constraints".into()],
            )
            .map_err(|problem| {
                (
                    format!("$.appliesWhen{}", problem.inner_path),
                    problem.message,
                )
            })?;
        }
        if self.max_length.is_none() && self.forbidden_words.is_empty() && self.hashtags.is_none() {
            return Err((
                "$".into(),
                "a rule set needs maxLength, forbiddenWords or hashtags".into(),
            ));
        }
        Ok(())
    }

    /// Whether any target is one of `facets`.
    pub fn targets_any(&self, facets: &[String]) -> bool {
        self.targets
            .iter()
            .any(|target| facets.contains(&target.facet))
    }

    /// Whether the rules apply to a run of this envelope data
    /// (`{objective, inputs, constraints}`).
    pub fn applies_to(&self, envelope_data: &Value) -> bool {
        self.applies_when
            .as_ref()
            .is_none_or(|condition| crate::basics::logic::holds(condition, envelope_data))
    }

    /// What `answer` (a node's output, facets by name) breaks, each
    /// violation at its JSON pointer in the answer.
    pub fn violations(&self, answer: &Value) -> Vec<SchemaViolation> {
        let mut found = Vec::new();
        for target in &self.targets {
            let Some(value) = answer.get(&target.facet) else {
                continue;
            };
            let mut texts = Vec::new();
            collect_texts(
                value,
                &target.pointer,
                format!("/{}", target.facet),
                &mut texts,
            );
            for (pointer, text) in texts {
                for (rule, message) in self.broken_by(&text) {
                    found.push(SchemaViolation {
                        instance_pointer: pointer.clone(),
                        schema_pointer: format!("rules/{}#/{rule}", self.name),
                        message: format!("rule set `{}`: {message}", self.name),
                        facet: Some(target.facet.clone()),
                    });
                }
            }
        }
        found
    }

    /// `(rule keyword, why)` for every rule `text` breaks.
    fn broken_by(&self, text: &str) -> Vec<(&'static str, String)> {
        let mut broken = Vec::new();
        if let Some(most) = self.max_length {
            let length = text.chars().count();
            if length > most {
                broken.push((
                    "maxLength",
                    format!("{length} characters, over the {most} allowed"),
                ));
            }
        }
        let lowered = text.to_lowercase();
        for word in &self.forbidden_words {
            if contains_whole_word(&lowered, &word.to_lowercase()) {
                broken.push(("forbiddenWords", format!("uses the forbidden `{word}`")));
            }
        }
        if let Some(rule) = &self.hashtags {
            let tags = hashtags(&lowered);
            if let Some(most) = rule.max
                && tags.len() > most
            {
                broken.push((
                    "hashtags",
                    format!("{} hashtags, over the {most} allowed", tags.len()),
                ));
            }
            if let Some(least) = rule.min
                && tags.len() < least
            {
                broken.push((
                    "hashtags",
                    format!("{} hashtags, fewer than the {least} required", tags.len()),
                ));
            }
            for required in &rule.required {
                let wanted = required.trim_start_matches('#').to_lowercase();
                if !tags.contains(&wanted.as_str()) {
                    broken.push(("hashtags", format!("lacks the hashtag `#{wanted}`")));
                }
            }
        }
        broken
    }
}

/// The texts `pointer` (with `*` segments) selects in `value`, each with
/// its JSON pointer (`at` is where `value` is).
fn collect_texts(value: &Value, pointer: &str, at: String, texts: &mut Vec<(String, String)>) {
    let Some(rest) = pointer.strip_prefix('/') else {
        let mut text = String::new();
        join_strings(value, &mut text);
        if !text.is_empty() {
            texts.push((at, text));
        }
        return;
    };
    let (segment, remaining) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash..]),
        None => (rest, ""),
    };
    let segment = segment.replace("~1", "/").replace("~0", "~");
    let escaped = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match (value, segment.as_str()) {
        (Value::Array(items), "*") => {
            for (index, item) in items.iter().enumerate() {
                collect_texts(item, remaining, format!("{at}/{index}"), texts);
            }
        }
        (Value::Object(members), "*") => {
            for (key, member) in members {
                collect_texts(member, remaining, format!("{at}/{}", escaped(key)), texts);
            }
        }
        (Value::Array(items), index) => {
            if let Some(item) = index.parse::<usize>().ok().and_then(|at| items.get(at)) {
                collect_texts(item, remaining, format!("{at}/{index}"), texts);
            }
        }
        (Value::Object(members), key) => {
            if let Some(member) = members.get(key) {
                collect_texts(member, remaining, format!("{at}/{}", escaped(key)), texts);
            }
        }
        _ => {}
    }
}

fn join_strings(value: &Value, text: &mut String) {
    match value {
        Value::String(part) => {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(part);
        }
        Value::Array(items) => items.iter().for_each(|item| join_strings(item, text)),
        Value::Object(members) => members
            .values()
            .for_each(|member| join_strings(member, text)),
        _ => {}
    }
}

/// Whether `phrase` occurs in `text` with no letter or digit on either side.
fn contains_whole_word(text: &str, phrase: &str) -> bool {
    if phrase.is_empty() {
        return false;
    }
    let word_character = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(phrase).any(|(start, _)| {
        let before = text[..start].chars().next_back();
        let after = text[start + phrase.len()..].chars().next();
        !word_character(before) && !word_character(after)
    })
}

/// The hashtags of `text`, without `#`.
fn hashtags(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(hash) = rest.find('#') {
        let after = &rest[hash + 1..];
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let preceded_by_word = rest[..hash]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        if end > 0 && !preceded_by_word {
            found.push(&after[..end]);
        }
        rest = &after[end..];
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(document: Value) -> ContentRules {
        serde_json::from_value(document).expect("a rule set")
    }

    #[test]
    fn each_rule_names_its_pointer_facet_and_rule() {
        let set = rules(json!({
            "name": "short", "targets": [{"facet": "variants", "pointer": "/*"}],
            "maxLength": 20, "forbiddenWords": ["click here"],
            "hashtags": {"max": 1, "required": ["launch"]}
        }));
        let answer = json!({"variants": [
            {"title": "Hi", "body": "#launch now"},
            {"title": "Please click here", "body": "#a #b and more words"}
        ]});
        let found = set.violations(&answer);
        let said: Vec<(&str, &str)> = found
            .iter()
            .map(|violation| {
                (
                    violation.instance_pointer.as_str(),
                    violation.schema_pointer.as_str(),
                )
            })
            .collect();
        assert_eq!(
            said,
            vec![
                ("/variants/1", "rules/short#/maxLength"),
                ("/variants/1", "rules/short#/forbiddenWords"),
                ("/variants/1", "rules/short#/hashtags"),
                ("/variants/1", "rules/short#/hashtags"),
            ]
        );
        assert!(
            found[0]
                .message
                .contains("39 characters, over the 20 allowed")
        );
        assert!(found[3].message.contains("lacks the hashtag `#launch`"));
        assert_eq!(found[0].facet.as_deref(), Some("variants"));
    }

    #[test]
    fn words_match_whole_and_hashtags_need_a_boundary() {
        assert!(contains_whole_word("a free offer", "free"));
        assert!(!contains_whole_word("carefree days", "free"));
        assert_eq!(
            hashtags("#one two#three #four_5 # x"),
            vec!["one", "four_5"]
        );
    }

    #[test]
    fn a_condition_reading_other_fields_is_refused_naming_its_path() {
        let set = rules(json!({
            "name": "x", "targets": [{"facet": "text"}], "maxLength": 5,
            "appliesWhen": {"==": [{"var": "secrets.key"}, 1]}
        }));
        let (path, _) = set.check(|_| true).expect_err("refused");
        assert!(path.starts_with("$.appliesWhen"), "{path}");
        let unknown = rules(json!({"name": "x", "targets": [{"facet": "nope"}], "maxLength": 5}));
        assert_eq!(
            unknown
                .check(|facet| facet == "text")
                .expect_err("refused")
                .0,
            "$.targets[0].facet"
        );
    }
}
