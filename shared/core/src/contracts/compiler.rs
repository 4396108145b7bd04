//! The facet contract compiler: merges the schemas of
//! a node's selected facets into one object schema, keeping provenance (which
//! facet each property came from) so validation errors can name the facet.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::basics::error::CoreError;
use crate::contracts::facet::FacetCatalog;

use super::compiled::ContractRecipe;
pub use super::compiled::{CompiledContract, ContractDirection, FacetProvenance};

/// Merges `facet_names` into one object schema. `caller_property_schema`
/// returns the caller contract's schema for a facet that is also a top-level
/// property of the caller's output contract; that schema is combined with
/// the facet's own (`allOf`) so a producer is held to the caller's shape.
pub fn compile_contract(
    catalog: &FacetCatalog,
    facet_names: &[String],
    direction: ContractDirection,
    caller_property_schema: &dyn Fn(&str) -> Option<Value>,
) -> Result<CompiledContract, CoreError> {
    let tightenings: Vec<Option<Value>> = facet_names
        .iter()
        .map(|facet_name| caller_property_schema(facet_name))
        .collect();
    let recipe = ContractRecipe {
        direction,
        facets: facet_names
            .iter()
            .zip(&tightenings)
            .map(|(facet, tightening)| (facet.clone(), tightening.as_ref().map(Value::to_string)))
            .collect(),
    };
    if let Some(compiled) = catalog.compiled_contracts.get(&recipe) {
        return Ok(compiled);
    }
    let mut compiled = merge_facet_schemas(catalog, facet_names, direction, tightenings)?;
    compiled.schema_key = contract_key_of(catalog, &recipe)?;
    catalog.compiled_contracts.put(recipe, compiled.clone());
    Ok(compiled)
}

fn merge_facet_schemas(
    catalog: &FacetCatalog,
    facet_names: &[String],
    direction: ContractDirection,
    tightenings: Vec<Option<Value>>,
) -> Result<CompiledContract, CoreError> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut provenance = Vec::new();
    for (facet_name, tightening) in facet_names.iter().zip(tightenings) {
        let facet = catalog
            .get(facet_name)
            .ok_or_else(|| CoreError::SchemaDoesNotCompile {
                path: format!("facet `{facet_name}`"),
                message: "unknown facet".to_string(),
            })?;
        let tightened = tightening.is_some();
        let property_schema = match tightening {
            Some(caller_schema) => json!({"allOf": [facet.schema.clone(), caller_schema]}),
            None => facet.schema.clone(),
        };
        properties.insert(facet_name.clone(), property_schema);
        if direction == ContractDirection::Output || facet.required_by_default {
            required.push(Value::String(facet_name.clone()));
        }
        provenance.push(FacetProvenance {
            facet: facet_name.clone(),
            schema_pointer: format!("/properties/{facet_name}"),
            tightened_by_caller_contract: tightened,
        });
    }
    // Built as a map, not with `json!`: the macro would copy `properties`
    // through `to_value`, a sixth of compiling a contract.
    let mut schema = Map::with_capacity(4);
    schema.insert("type".into(), Value::from("object"));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("required".into(), Value::Array(required));
    schema.insert("additionalProperties".into(), Value::Bool(false));
    let schema = Value::Object(schema);
    // Compilability is proven by the plan validator (through its cache);
    // the key is the recipe's (`contract_key_of`), set by the caller.
    Ok(CompiledContract {
        schema: Arc::new(schema),
        provenance: Arc::new(provenance),
        schema_key: Arc::from(""),
    })
}

/// The key of the contract `recipe` merges: hex SHA-256 of what it is
/// merged of (each facet's name, whether it is required (the only way the
/// direction shows), its schema's digest and the caller's tightening), each part
/// length-prefixed. The merge is a function of exactly these, so the key
/// names the merged schema as its text's digest would, from a few hundred
/// bytes instead of the whole merged text, and without serialising it
/// (that serialisation and digest were a third of a five-node plan step).
fn contract_key_of(catalog: &FacetCatalog, recipe: &ContractRecipe) -> Result<Arc<str>, CoreError> {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    let mut part = |bytes: &[u8]| {
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    };
    part(b"baton.contract.v1");
    for (facet_name, tightening) in &recipe.facets {
        let (Some(facet), Some(facet_key)) =
            (catalog.get(facet_name), catalog.schema_key(facet_name))
        else {
            return Err(CoreError::SchemaDoesNotCompile {
                path: format!("facet `{facet_name}`"),
                message: "unknown facet".to_string(),
            });
        };
        let required = recipe.direction == ContractDirection::Output || facet.required_by_default;
        part(facet_name.as_bytes());
        part(if required { b"required" } else { b"optional" });
        part(facet_key.as_bytes());
        match tightening {
            Some(text) => part(text.as_bytes()),
            None => part(b""),
        }
        part(if tightening.is_some() {
            b"tightened"
        } else {
            b"own"
        });
    }
    Ok(format!("{:x}", digest.finalize()).into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::basics::schema::schema_key_of;
    use crate::basics::schema::{collect_violations, compile_schema};
    use crate::contracts::facet::{Facet, FacetDirection};

    fn catalog() -> FacetCatalog {
        let mut catalog = FacetCatalog::new();
        for (name, schema, required) in [
            ("tone", json!({"type": "string"}), false),
            (
                "items",
                json!({"type": "array", "items": {"type": "string"}}),
                true,
            ),
        ] {
            catalog.insert(Facet {
                name: name.into(),
                title: name.into(),
                description: String::new(),
                schema,
                semantics: String::new(),
                direction: FacetDirection::Bidirectional,
                required_by_default: required,
                drives_revisions: false,
                merge: Default::default(),
                widget: None,
                metadata: Map::new(),
            });
        }
        catalog
    }

    #[test]
    fn input_contract_requires_only_required_facets() {
        let compiled = compile_contract(
            &catalog(),
            &["tone".into(), "items".into()],
            ContractDirection::Input,
            &|_| None,
        )
        .unwrap();
        assert_eq!(compiled.schema["required"], json!(["items"]));
        assert_eq!(compiled.provenance.len(), 2);
    }

    #[test]
    fn output_contract_requires_every_facet_and_is_tightened_by_the_caller() {
        let compiled = compile_contract(
            &catalog(),
            &["items".into()],
            ContractDirection::Output,
            &|name| (name == "items").then(|| json!({"minItems": 2})),
        )
        .unwrap();
        assert!(compiled.provenance[0].tightened_by_caller_contract);
        let validator = compile_schema(&compiled.schema, "t").unwrap();
        let mut violations = collect_violations(&validator, &json!({"items": ["one"]}));
        assert_eq!(violations.len(), 1);
        compiled.attribute_violations(&mut violations);
        assert_eq!(violations[0].facet.as_deref(), Some("items"));
    }

    #[test]
    fn unknown_facet_is_an_error() {
        assert!(
            compile_contract(
                &catalog(),
                &["nope".into()],
                ContractDirection::Input,
                &|_| None
            )
            .is_err()
        );
    }

    #[test]
    fn a_recipe_compiles_once_per_catalog_and_a_new_facet_starts_over() {
        let mut catalog = catalog();
        let facets = ["items".to_string()];
        let compile = |catalog: &FacetCatalog, tightening: Option<Value>| {
            compile_contract(catalog, &facets, ContractDirection::Output, &|_| {
                tightening.clone()
            })
            .unwrap()
        };
        let first = compile(&catalog, None);
        let again = compile(&catalog, None);
        assert!(
            Arc::ptr_eq(&first.schema, &again.schema),
            "the same recipe is reused"
        );
        let on_a_clone = compile(&catalog.clone(), None);
        assert!(
            Arc::ptr_eq(&first.schema, &on_a_clone.schema),
            "clones share it"
        );
        let tightened = compile(&catalog, Some(json!({"minItems": 2})));
        assert_ne!(
            tightened.schema_key, first.schema_key,
            "a tightening is part of the recipe"
        );
        assert!(tightened.provenance[0].tightened_by_caller_contract);
        let other_direction =
            compile_contract(&catalog, &facets, ContractDirection::Input, &|_| None).unwrap();
        assert_eq!(other_direction.schema["required"], json!(["items"]));

        let mut redefined = catalog.get("items").unwrap().clone();
        redefined.schema = json!({"type": "array", "maxItems": 1});
        catalog.insert(redefined);
        let after = compile(&catalog, None);
        assert_ne!(
            after.schema_key, first.schema_key,
            "a changed facet compiles anew"
        );
        assert_eq!(after.schema["properties"]["items"]["maxItems"], json!(1));
    }

    /// The recipe key names the merged schema: two recipes share a key
    /// exactly when they merge to the same schema text.
    #[test]
    fn contracts_share_a_key_exactly_when_their_merged_schemas_are_the_same() {
        let catalog = catalog();
        let compile = |facets: &[&str], direction, tightening: Option<Value>| {
            let facets: Vec<String> = facets.iter().map(|name| name.to_string()).collect();
            compile_contract(&catalog, &facets, direction, &|_| tightening.clone()).unwrap()
        };
        let recipes = [
            compile(&["tone"], ContractDirection::Input, None),
            compile(&["tone"], ContractDirection::Output, None),
            compile(&["items"], ContractDirection::Input, None),
            compile(&["items"], ContractDirection::Output, None),
            compile(&["tone", "items"], ContractDirection::Input, None),
            compile(&["items", "tone"], ContractDirection::Input, None),
            compile(
                &["tone"],
                ContractDirection::Input,
                Some(json!({"minLength": 2})),
            ),
            compile(
                &["tone"],
                ContractDirection::Input,
                Some(json!({"minLength": 3})),
            ),
        ];
        for (left, first) in recipes.iter().enumerate() {
            for second in &recipes[left + 1..] {
                assert_eq!(
                    first.schema_key == second.schema_key,
                    first.schema.to_string() == second.schema.to_string(),
                    "{} against {}",
                    first.schema,
                    second.schema
                );
            }
        }
        // "items" is required by default: its input and output merges are
        // one schema, so one key.
        assert_eq!(recipes[2].schema_key, recipes[3].schema_key);
        let fresh_catalog = catalog.clone();
        let again = compile_contract(
            &fresh_catalog,
            &["tone".into()],
            ContractDirection::Input,
            &|_| None,
        )
        .unwrap();
        assert_eq!(again.schema_key, recipes[0].schema_key);
        assert_eq!(
            catalog.schema_key("tone").unwrap(),
            schema_key_of(&json!({"type": "string"})),
            "a facet's own key is its schema text's digest"
        );
    }
}
