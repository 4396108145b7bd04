//! Capability scoring: candidates that produce a
//! needed facet are ranked on selection policy, facet alignment (required
//! inputs already available), the envelope's language and channel/format
//! hints against each capability's declared `inputTraits`, and declared cost.
//!
//! Hints are read from the envelope's `inputs` and from non-canonical
//! `policies` keys: `language`, `languages`, `locale` (language hints) and
//! `channel`, `channels`, `format`, `formats` (format hints), each a string
//! or a list of strings. The keys are generic envelope vocabulary; the
//! values (which languages, which channels) are the caller's data.
//!
//! Cutoff (`policies.planner.selection.cutoff`): by default (`language`) a
//! capability that declares languages, none of which is hinted, cannot
//! serve the run and is not a candidate, and a declared format that matches
//! no hint only ranks the capability lower; `strict` cuts a format mismatch
//! too; `none` cuts nothing (mismatches only rank lower).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::contracts::capability::CapabilityRegistration;
use crate::contracts::envelope::TaskEnvelope;

const LANGUAGE_KEYS: [&str; 3] = ["language", "languages", "locale"];
const FORMAT_KEYS: [&str; 4] = ["channel", "channels", "format", "formats"];

/// What the envelope says about language and channel/format.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SelectionHints {
    /// Lower-case primary language subtags (`en` for `en-GB`).
    pub languages: BTreeSet<String>,
    /// Lower-case channel/format names.
    pub formats: BTreeSet<String>,
}

fn strings_in(value: &Value) -> Vec<String> {
    match value {
        Value::String(text) => vec![text.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn primary_language(tag: &str) -> String {
    tag.split(['-', '_'])
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Only letters and digits, lower case: `newsLetter_issue` → `newsletterissue`.
fn folded(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

impl SelectionHints {
    pub fn from_envelope(envelope: &TaskEnvelope) -> Self {
        let mut hints = SelectionHints::default();
        let sources = [&envelope.inputs, &envelope.policies.hints];
        for source in sources {
            for key in LANGUAGE_KEYS {
                if let Some(value) = source.get(key) {
                    hints.languages.extend(
                        strings_in(value)
                            .iter()
                            .map(|tag| primary_language(tag))
                            .filter(|tag| !tag.is_empty()),
                    );
                }
            }
            for key in FORMAT_KEYS {
                if let Some(value) = source.get(key) {
                    hints.formats.extend(
                        strings_in(value)
                            .iter()
                            .map(|name| folded(name))
                            .filter(|name| !name.is_empty()),
                    );
                }
            }
        }
        hints
    }

    pub fn is_empty(&self) -> bool {
        self.languages.is_empty() && self.formats.is_empty()
    }
}

/// How one declared trait list compares with the hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraitMatch {
    /// The envelope gives no hint of this kind.
    NotHinted,
    /// The capability declares nothing of this kind.
    Undeclared,
    Matches,
    Mismatch,
}

/// A capability's fit to the hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraitFit {
    pub languages: TraitMatch,
    pub formats: TraitMatch,
}

impl TraitFit {
    /// Below the cutoff: the capability cannot serve the hinted language.
    pub fn is_excluded(&self) -> bool {
        self.is_below(crate::contracts::policies::SelectionCutoff::Language)
    }

    /// Below `cutoff`: not a candidate at all.
    pub fn is_below(&self, cutoff: crate::contracts::policies::SelectionCutoff) -> bool {
        use crate::contracts::policies::SelectionCutoff;
        match cutoff {
            SelectionCutoff::Language => self.languages == TraitMatch::Mismatch,
            SelectionCutoff::Strict => {
                self.languages == TraitMatch::Mismatch || self.formats == TraitMatch::Mismatch
            }
            SelectionCutoff::None => false,
        }
    }

    /// Higher is better: a language match 2, a format match 1, a format mismatch −1.
    pub fn score(&self) -> i32 {
        let language = match self.languages {
            TraitMatch::Matches => 2,
            _ => 0,
        };
        let format = match self.formats {
            TraitMatch::Matches => 1,
            TraitMatch::Mismatch => -1,
            _ => 0,
        };
        language + format
    }
}

/// Compares `capability`'s declared languages and formats with `hints`.
pub fn trait_fit(capability: &CapabilityRegistration, hints: &SelectionHints) -> TraitFit {
    let no_traits = crate::contracts::capability::InputTraits::default();
    let traits = capability.input_traits.as_ref().unwrap_or(&no_traits);
    let languages = if hints.languages.is_empty() {
        TraitMatch::NotHinted
    } else if traits.languages.is_empty() {
        TraitMatch::Undeclared
    } else if traits
        .languages
        .iter()
        .any(|language| hints.languages.contains(&primary_language(language)))
    {
        TraitMatch::Matches
    } else {
        TraitMatch::Mismatch
    };
    let formats = if hints.formats.is_empty() {
        TraitMatch::NotHinted
    } else if traits.formats.is_empty() {
        TraitMatch::Undeclared
    } else if traits.formats.iter().any(|format| {
        let format = folded(format);
        hints
            .formats
            .iter()
            .any(|hint| format.contains(hint.as_str()) || hint.contains(format.as_str()))
    }) {
        TraitMatch::Matches
    } else {
        TraitMatch::Mismatch
    };
    TraitFit { languages, formats }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(languages: &[&str], formats: &[&str]) -> CapabilityRegistration {
        serde_json::from_value(json!({
            "capabilityId": "writer.x",
            "agentType": "ai",
            "version": "1",
            "displayName": "Writer",
            "summary": "Writes.",
            "inputTraits": {"languages": languages, "formats": formats},
            "inputContract": [],
            "outputContract": ["copy"]
        }))
        .unwrap_or_else(|error| unreachable!("{error}"))
    }

    fn envelope(inputs: Value, policies: Value) -> TaskEnvelope {
        TaskEnvelope::parse_value(&json!({
            "objective": "x",
            "inputs": inputs,
            "policies": policies,
            "outputContract": {"schema": {"type": "object"}}
        }))
        .unwrap_or_else(|error| unreachable!("{error}"))
    }

    #[test]
    fn hints_come_from_inputs_and_policy_keys_normalised() {
        let hints = SelectionHints::from_envelope(&envelope(
            json!({"channel": "Video", "locale": "fr-CA"}),
            json!({"languages": ["en-GB"], "formats": ["Newsletter"]}),
        ));
        assert_eq!(
            hints.languages,
            BTreeSet::from(["en".to_string(), "fr".to_string()])
        );
        assert_eq!(
            hints.formats,
            BTreeSet::from(["newsletter".to_string(), "video".to_string()])
        );
        assert!(SelectionHints::from_envelope(&envelope(json!({}), json!({}))).is_empty());
    }

    #[test]
    fn trait_fit_table() {
        let hints = SelectionHints {
            languages: BTreeSet::from(["fr".to_string()]),
            formats: BTreeSet::from(["newsletter".to_string()]),
        };
        let table = [
            (
                capability(&["fr-FR"], &["newsLetter_issue"]),
                TraitMatch::Matches,
                TraitMatch::Matches,
                3,
                false,
            ),
            (
                capability(&["en"], &["newsLetter_issue"]),
                TraitMatch::Mismatch,
                TraitMatch::Matches,
                1,
                true,
            ),
            (
                capability(&[], &["video_short"]),
                TraitMatch::Undeclared,
                TraitMatch::Mismatch,
                -1,
                false,
            ),
            (
                capability(&[], &[]),
                TraitMatch::Undeclared,
                TraitMatch::Undeclared,
                0,
                false,
            ),
        ];
        for (capability, languages, formats, score, excluded) in table {
            let fit = trait_fit(&capability, &hints);
            assert_eq!(fit.languages, languages, "{:?}", capability.input_traits);
            assert_eq!(fit.formats, formats, "{:?}", capability.input_traits);
            assert_eq!(fit.score(), score, "{:?}", capability.input_traits);
            assert_eq!(fit.is_excluded(), excluded, "{:?}", capability.input_traits);
        }
        let no_hints = trait_fit(&capability(&["en"], &[]), &SelectionHints::default());
        assert_eq!(no_hints.languages, TraitMatch::NotHinted);
        assert!(!no_hints.is_excluded());
    }
}
