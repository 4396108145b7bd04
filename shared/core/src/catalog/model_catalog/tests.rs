//! The catalog's prices, dated names and the deployment's default model.

use super::*;

fn table() -> ModelCatalog {
    serde_json::from_value(serde_json::json!({
        "providers": {"p": {"kind": "openai"}},
        "models": {
            "m": {"provider": "p", "inputPerMillionUsd": 1.0, "outputPerMillionUsd": 4.0, "cacheReadPerMillionUsd": 0.5},
            "m-large": {"provider": "p", "inputPerMillionUsd": 10.0, "outputPerMillionUsd": 40.0}
        }
    }))
    .unwrap()
}

fn usage(prompt: u64, completion: u64, cached: u64) -> TokenUsage {
    TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_prompt_tokens: cached,
        cache_write_prompt_tokens: 0,
    }
}

#[test]
fn cost_counts_cached_prompt_tokens_at_their_own_price() {
    let cost = table().cost_usd("m", &usage(1_000, 500, 400)).unwrap();
    // 600 × 1 + 400 × 0.5 + 500 × 4 = 2 800 per million.
    assert_eq!(round_cost(cost), 0.0028);
}

#[test]
fn cache_writes_are_priced_at_the_cache_write_rate() {
    let mut table = table();
    table
        .models
        .get_mut("m")
        .unwrap()
        .cache_write_per_million_usd = Some(1.25);
    let mut written = usage(1_000, 0, 400);
    written.cache_write_prompt_tokens = 500;
    // 100 × 1 + 400 × 0.5 + 500 × 1.25 = 925 per million.
    assert_eq!(round_cost(table.cost_usd("m", &written).unwrap()), 0.000925);
}

#[test]
fn a_default_model_the_file_lacks_joins_the_catalog_with_unknown_prices() {
    let table = table().with_deployment_default("stand-in", ProviderKind::Openai);
    assert_eq!(table.deployment_default.as_deref(), Some("stand-in"));
    let entry = table.model("stand-in").unwrap();
    assert_eq!(entry.provider, "p", "the file's openai provider serves it");
    assert!(entry.supports.tools && entry.supports.json_schema);
    // Unknown, never zero: no price, no cost, dated names included.
    assert!(!table.is_priced("stand-in"));
    assert!(table.price_of("stand-in").is_none());
    assert!(table.price_of("stand-in-2025-01-01").is_none());
    assert_eq!(table.cost_usd("stand-in", &usage(10, 10, 0)), None);
    assert!(table.check().is_ok());
}

#[test]
fn a_default_model_the_file_prices_keeps_its_entry() {
    let table = table().with_deployment_default("m", ProviderKind::Openai);
    assert_eq!(table.deployment_default.as_deref(), Some("m"));
    assert!(table.is_priced("m"));
    assert_eq!(
        table.price_of("m").map(|p| p.input_per_million_usd),
        Some(1.0)
    );
    assert_eq!(table.providers.len(), 1, "no provider added");
}

#[test]
fn a_default_model_of_a_kind_the_file_lacks_gets_its_own_provider() {
    let table = table().with_deployment_default("offline", ProviderKind::Local);
    assert_eq!(
        table.model("offline").map(|model| model.provider.as_str()),
        Some(DEPLOYMENT_DEFAULT_PROVIDER)
    );
    assert_eq!(
        table.providers[DEPLOYMENT_DEFAULT_PROVIDER].kind,
        ProviderKind::Local
    );
    assert!(table.check().is_ok());
    // A blank name adds nothing.
    let unchanged = table
        .clone()
        .with_deployment_default("  ", ProviderKind::Openai);
    assert_eq!(unchanged, table);
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
    let mut bad = table.models["m"].clone();
    bad.input_per_million_usd = -1.0;
    table.models.insert("bad".into(), bad);
    let (path, _) = table.check().unwrap_err();
    assert_eq!(path, "$.models['bad'].inputPerMillionUsd");
}

#[test]
fn the_planner_model_must_be_a_catalog_model_with_structured_output() {
    let mut table = table();
    table.planner_model = Some("nowhere".into());
    assert_eq!(table.check().unwrap_err().0, "$.plannerModel");
    table.planner_model = Some("m".into());
    let (path, message) = table.check().unwrap_err();
    assert_eq!(path, "$.plannerModel");
    assert!(message.contains("jsonSchema"), "{message}");
    table.models.get_mut("m").unwrap().supports.json_schema = true;
    assert_eq!(table.check(), Ok(()));
}

#[test]
fn a_model_of_an_unknown_provider_is_refused_with_its_path() {
    let mut table = table();
    let mut stray = table.models["m"].clone();
    stray.provider = "nowhere".into();
    table.models.insert("stray".into(), stray);
    let (path, message) = table.check().unwrap_err();
    assert_eq!(path, "$.models['stray'].provider");
    assert!(message.contains("providers: p"), "{message}");
}

#[test]
fn a_literal_key_is_refused_naming_its_path_and_what_to_write_instead() {
    let document = serde_json::json!({
        "providers": {"hosted": {"kind": "openai", "apiKey": "sk-123"}},
        "models": {}
    });
    let (path, message) = ModelCatalog::refuse_literal_credentials(&document).unwrap_err();
    assert_eq!(path, "$.providers['hosted'].apiKey");
    assert!(message.contains("apiKeyVariable"), "{message}");
    let named = serde_json::json!({
        "providers": {"hosted": {"kind": "openai", "apiKeyVariable": "HOSTED_API_KEY"}},
        "models": {}
    });
    assert_eq!(ModelCatalog::refuse_literal_credentials(&named), Ok(()));
}
