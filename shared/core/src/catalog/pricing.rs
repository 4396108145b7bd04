//! The model price table (`registry/models.json`): what a model's tokens
//! cost, so a node's `node_complete` and every `metrics` frame carry
//! `costUsd`. A model the table does not name has no cost (the engine says
//! so once per run with a `model_price_unknown` warning); it is never
//! guessed.
//!
//! A provider often answers with a dated name (`vendor-model-2025-01-01`)
//! for the name it was asked for: a model is priced by its exact entry,
//! else by the longest entry it starts with followed by `-`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::basics::usage::TokenUsage;

/// One model's prices, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPrice {
    pub input_per_million_usd: f64,
    pub output_per_million_usd: f64,
    /// Prompt tokens the provider served from its cache (defaults to the
    /// input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_million_usd: Option<f64>,
}

/// `registry/models.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceTable {
    /// The JSON Schema this file follows (ignored).
    #[serde(default, rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Model name → its prices.
    pub models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// Every price must be a finite number ≥ 0: `(JSON path, message)`.
    pub fn check(&self) -> Result<(), (String, String)> {
        for (name, price) in &self.models {
            let fields = [
                ("inputPerMillionUsd", Some(price.input_per_million_usd)),
                ("outputPerMillionUsd", Some(price.output_per_million_usd)),
                (
                    "cachedInputPerMillionUsd",
                    price.cached_input_per_million_usd,
                ),
            ];
            for (field, value) in fields {
                if let Some(value) = value
                    && !(value.is_finite() && value >= 0.0)
                {
                    return Err((
                        format!("$.models['{name}'].{field}"),
                        format!("a price must be a number ≥ 0, not {value}"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The prices of `model`: its exact entry, else the longest entry it
    /// starts with followed by `-`.
    pub fn price_of(&self, model: &str) -> Option<&ModelPrice> {
        if let Some(price) = self.models.get(model) {
            return Some(price);
        }
        self.models
            .iter()
            .filter(|(name, _)| {
                model.len() > name.len()
                    && model.starts_with(name.as_str())
                    && model.as_bytes().get(name.len()) == Some(&b'-')
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }

    /// What `usage` on `model` cost, when the table prices it.
    pub fn cost_usd(&self, model: &str, usage: &TokenUsage) -> Option<f64> {
        let price = self.price_of(model)?;
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let uncached = usage.prompt_tokens - cached;
        let cached_price = price
            .cached_input_per_million_usd
            .unwrap_or(price.input_per_million_usd);
        let micro_dollars = uncached as f64 * price.input_per_million_usd
            + cached as f64 * cached_price
            + usage.completion_tokens as f64 * price.output_per_million_usd;
        Some(micro_dollars / 1_000_000.0)
    }
}

/// Rounds a cost for display in frames (to a millionth of a cent), so
/// float noise does not show.
pub fn round_cost(cost_usd: f64) -> f64 {
    (cost_usd * 1e8).round() / 1e8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        serde_json::from_value(serde_json::json!({
            "models": {
                "m": {"inputPerMillionUsd": 1.0, "outputPerMillionUsd": 4.0, "cachedInputPerMillionUsd": 0.5},
                "m-large": {"inputPerMillionUsd": 10.0, "outputPerMillionUsd": 40.0}
            }
        }))
        .unwrap()
    }

    fn usage(prompt: u64, completion: u64, cached: u64) -> TokenUsage {
        TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_prompt_tokens: cached,
        }
    }

    #[test]
    fn cost_counts_cached_prompt_tokens_at_their_own_price() {
        let cost = table().cost_usd("m", &usage(1_000, 500, 400)).unwrap();
        // 600 × 1 + 400 × 0.5 + 500 × 4 = 2 800 per million.
        assert_eq!(round_cost(cost), 0.0028);
    }

    #[test]
    fn a_dated_name_takes_the_longest_matching_entry() {
        let table = table();
        assert_eq!(
            table
                .price_of("m-large-2025-01-01")
                .map(|p| p.input_per_million_usd),
            Some(10.0)
        );
        assert_eq!(
            table.price_of("m-2025").map(|p| p.input_per_million_usd),
            Some(1.0)
        );
        assert_eq!(table.price_of("mx"), None);
        assert_eq!(table.cost_usd("unknown", &usage(10, 10, 0)), None);
    }

    #[test]
    fn a_negative_price_is_refused_with_its_path() {
        let mut table = table();
        table.models.insert(
            "bad".into(),
            ModelPrice {
                input_per_million_usd: -1.0,
                output_per_million_usd: 0.0,
                cached_input_per_million_usd: None,
            },
        );
        let (path, _) = table.check().unwrap_err();
        assert_eq!(path, "$.models['bad'].inputPerMillionUsd");
    }
}
