//! JSON Schema compilation and validation through the `jsonschema` crate, with
//! remote and file `$ref` retrieval turned off, plus a cache of compiled
//! validators (found by a compiled contract's digest, or by the schema's
//! structure) so the hot path compiles a schema once per process.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::basics::error::CoreError;

/// A compiled validator shared between threads.
pub type SharedValidator = Arc<jsonschema::Validator>;

/// One schema violation: where in the instance, what rule, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaViolation {
    /// JSON pointer into the validated instance ("" is the root).
    pub instance_pointer: String,
    /// JSON pointer into the schema, naming the failed keyword.
    pub schema_pointer: String,
    /// Human-readable message from the validator.
    pub message: String,
    /// The facet this part of the schema came from, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub facet: Option<String>,
}

/// `value` with every whole `f64` as an integer: ProtoJSON's `Struct`
/// (A2A's data parts) has only doubles, so a protobuf peer sends `2` as
/// `2.0`, which a schema's `minItems` or an integer facet would refuse.
pub fn whole_numbers_as_integers(value: Value) -> Value {
    match value {
        Value::Number(number) if !number.is_i64() && !number.is_u64() => match number.as_f64() {
            Some(float) if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 => {
                Value::from(float as i64)
            }
            _ => Value::Number(number),
        },
        Value::Array(items) => {
            Value::Array(items.into_iter().map(whole_numbers_as_integers).collect())
        }
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key, whole_numbers_as_integers(value)))
                .collect(),
        ),
        other => other,
    }
}

/// Hex SHA-256 of `schema`'s JSON text: a schema's key in the validator
/// cache, and a facet's schema digest in the audit (a merged contract's
/// key is its recipe's: `contracts::compiler`).
pub fn schema_key_of(schema: &Value) -> Arc<str> {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(schema.to_string().as_bytes())).into()
}

/// Compiles `schema` with no remote or file retrieval and format checks on.
/// `path` names where the schema came from, for the error.
/// A JSON path (`$.inputs.key`) continued by a JSON pointer into the value
/// it names, rendered as `.field[0]`: how errors name what is wrong.
pub fn json_path_for_pointer(prefix: &str, pointer: &str) -> String {
    let mut path = prefix.to_string();
    for segment in pointer.split('/').skip(1) {
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            path.push_str(&format!("[{segment}]"));
        } else {
            path.push('.');
            path.push_str(&segment.replace("~1", "/").replace("~0", "~"));
        }
    }
    path
}

pub fn compile_schema(schema: &Value, path: &str) -> Result<jsonschema::Validator, CoreError> {
    jsonschema::options()
        .offline()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|error| CoreError::SchemaDoesNotCompile {
            path: path.to_string(),
            message: error.to_string(),
        })
}

/// Validates `instance` and returns every violation (empty when valid).
pub fn collect_violations(
    validator: &jsonschema::Validator,
    instance: &Value,
) -> Vec<SchemaViolation> {
    validator
        .iter_errors(instance)
        .map(|error| SchemaViolation {
            instance_pointer: error.instance_path().to_string(),
            schema_pointer: error.schema_path().to_string(),
            message: error.to_string(),
            facet: None,
        })
        .collect()
}

/// Feeds `value`'s structure to `hasher`: each node's kind, then its
/// contents, lengths first (so no two different trees feed the same
/// sequence).
fn hash_structure(value: &Value, hasher: &mut impl Hasher) {
    match value {
        Value::Null => hasher.write_u8(0),
        Value::Bool(flag) => {
            hasher.write_u8(1);
            flag.hash(hasher);
        }
        Value::Number(number) => {
            hasher.write_u8(2);
            number.hash(hasher);
        }
        Value::String(text) => {
            hasher.write_u8(3);
            text.hash(hasher);
        }
        Value::Array(items) => {
            hasher.write_u8(4);
            hasher.write_usize(items.len());
            for item in items {
                hash_structure(item, hasher);
            }
        }
        Value::Object(entries) => {
            hasher.write_u8(5);
            hasher.write_usize(entries.len());
            for (key, item) in entries {
                key.hash(hasher);
                hash_structure(item, hasher);
            }
        }
    }
}

/// Whether two values are the same tree, objects' keys in the same order
/// (the order `hash_structure` feeds them in; the same schema written in
/// another key order is only compiled once more).
fn same_tree(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|(left, right)| same_tree(left, right))
        }
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|((left_key, left), (right_key, right))| {
                        left_key == right_key && same_tree(left, right)
                    })
        }
        (left, right) => left == right,
    }
}

/// Most validators a [`ValidatorCache`] keeps; past this it starts over
/// (they are compiled again on use).
pub const MOST_COMPILED_SCHEMAS: usize = 4_096;

/// Cache of compiled validators keyed by a digest or the schema's structure,
/// and of the schemas themselves by their digest: every plan that compiles
/// the same contract shares one copy (a process holding thousands of runs
/// holds each distinct schema once).
#[derive(Default)]
pub struct ValidatorCache {
    compiled_by_schema_text: Mutex<HashMap<String, SharedValidator, foldhash::fast::RandomState>>,
    /// Validators by their schema's structural hash, with the schema each
    /// was compiled from (`validator_for`).
    compiled_by_structure:
        Mutex<HashMap<u64, (Value, SharedValidator), foldhash::fast::RandomState>>,
    structure_hasher: foldhash::fast::RandomState,
    schemas_by_key: Mutex<HashMap<Arc<str>, SharedParts, foldhash::fast::RandomState>>,
    /// Plan texts (a node's composed instructions) by their content: every
    /// plan holding the same text shares one copy.
    texts: Mutex<std::collections::HashSet<Arc<str>, foldhash::fast::RandomState>>,
}

/// One digest's shared copies: the digest, the schema and what the caller
/// keeps beside it (a compiled contract's facet provenance).
type SharedParts = (Arc<str>, Arc<Value>, Arc<dyn std::any::Any + Send + Sync>);

impl ValidatorCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The one shared copy of `text` (the argument itself the first time).
    /// Bounded: past 10,000 distinct texts it starts over.
    pub fn shared_text(&self, text: &Arc<str>) -> Arc<str> {
        let Ok(mut texts) = self.texts.lock() else {
            return text.clone();
        };
        if let Some(shared) = texts.get(text) {
            return shared.clone();
        }
        if texts.len() >= 10_000 {
            texts.clear();
        }
        texts.insert(text.clone());
        text.clone()
    }

    /// The one shared copy of the digest `key`, of its schema and of what
    /// goes with it (the arguments themselves the first time): identical
    /// contracts across plans take memory once.
    pub fn shared_parts<Beside: std::any::Any + Send + Sync>(
        &self,
        key: &Arc<str>,
        schema: &Arc<Value>,
        beside: &Arc<Beside>,
    ) -> (Arc<str>, Arc<Value>, Arc<Beside>) {
        let given = || (key.clone(), schema.clone(), beside.clone());
        let Ok(mut schemas) = self.schemas_by_key.lock() else {
            return given();
        };
        let (shared_key, shared_schema, shared_beside) = schemas
            .entry(key.clone())
            .or_insert_with(|| (key.clone(), schema.clone(), beside.clone()))
            .clone();
        match shared_beside.downcast::<Beside>() {
            Ok(shared_beside) => (shared_key, shared_schema, shared_beside),
            Err(_) => given(),
        }
    }

    /// Returns the compiled validator for `schema`, compiling it on first use.
    /// Found by the schema's structure (hashed as a tree, then compared to
    /// the schema it was compiled from: a hash collision compiles again, it
    /// never validates against another schema), so a lookup neither writes
    /// the schema out as text nor allocates.
    pub fn validator_for(&self, schema: &Value, path: &str) -> Result<SharedValidator, CoreError> {
        let fingerprint = {
            let mut hasher = self.structure_hasher.build_hasher();
            hash_structure(schema, &mut hasher);
            hasher.finish()
        };
        if let Ok(cache) = self.compiled_by_structure.lock()
            && let Some((compiled_from, found)) = cache.get(&fingerprint)
            && same_tree(compiled_from, schema)
        {
            return Ok(found.clone());
        }
        let compiled = Arc::new(compile_schema(schema, path)?);
        if let Ok(mut cache) = self.compiled_by_structure.lock() {
            // Bounded, as the cache by key is.
            if cache.len() >= MOST_COMPILED_SCHEMAS {
                cache.clear();
            }
            cache.insert(fingerprint, (schema.clone(), compiled.clone()));
        }
        Ok(compiled)
    }

    /// Same, with a precomputed key (e.g. a compiled contract's digest) so
    /// the hot path does not serialize the schema.
    pub fn validator_for_key(
        &self,
        key: &str,
        schema: &Value,
        path: &str,
    ) -> Result<SharedValidator, CoreError> {
        if let Ok(cache) = self.compiled_by_schema_text.lock()
            && let Some(found) = cache.get(key)
        {
            return Ok(found.clone());
        }
        let compiled = Arc::new(compile_schema(schema, path)?);
        if let Ok(mut cache) = self.compiled_by_schema_text.lock() {
            // Bounded: callers sending a new schema each time (envelopes'
            // contracts are checked through here) must not grow it forever.
            if cache.len() >= MOST_COMPILED_SCHEMAS {
                cache.clear();
            }
            cache.insert(key.to_string(), compiled.clone());
        }
        Ok(compiled)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pointers_render_as_json_paths() {
        use super::json_path_for_pointer;
        assert_eq!(
            json_path_for_pointer("$.inputs.tone", "/0"),
            "$.inputs.tone[0]"
        );
        assert_eq!(
            json_path_for_pointer("$.inputs.ctx", "/data/a~1b"),
            "$.inputs.ctx.data.a/b"
        );
        assert_eq!(json_path_for_pointer("$.inputs.ctx", ""), "$.inputs.ctx");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn remote_references_are_refused_not_fetched() {
        let schema = json!({"$ref": "https://example.com/schema.json"});
        let error = compile_schema(&schema, "outputContract.schema").unwrap_err();
        assert_eq!(error.path(), Some("outputContract.schema"));
    }

    #[test]
    fn violations_name_the_instance_pointer() {
        let schema =
            json!({"type": "object", "properties": {"n": {"minimum": 5}}, "required": ["name"]});
        let validator = compile_schema(&schema, "s").unwrap();
        let violations = collect_violations(&validator, &json!({"n": 1}));
        assert_eq!(violations.len(), 2);
        assert!(violations.iter().any(|v| v.instance_pointer == "/n"));
    }

    #[test]
    fn cache_returns_the_same_compiled_validator() {
        let cache = ValidatorCache::new();
        let schema = json!({"type": "string"});
        let first = cache.validator_for(&schema, "a").unwrap();
        let second = cache.validator_for(&schema, "b").unwrap();
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn different_schemas_get_their_own_validators_even_under_one_hash() {
        let cache = ValidatorCache::new();
        let strings = json!({"type": "string"});
        let numbers = json!({"type": "number"});
        // Nested the other way round: the same strings, a different tree.
        let nested = json!({"type": {"string": "number"}});
        let nested_other = json!({"type": {"number": "string"}});
        for schema in [&strings, &numbers] {
            let validator = cache.validator_for(schema, "s").unwrap();
            let instance = if schema == &strings {
                json!("x")
            } else {
                json!(1)
            };
            assert!(validator.is_valid(&instance), "{schema}");
        }
        assert!(
            !cache
                .validator_for(&numbers, "s")
                .unwrap()
                .is_valid(&json!("x"))
        );
        let fingerprint = |schema: &Value| {
            let mut hasher = cache.structure_hasher.build_hasher();
            hash_structure(schema, &mut hasher);
            hasher.finish()
        };
        assert_ne!(fingerprint(&nested), fingerprint(&nested_other));
        // A collision, forced: the entry for `strings` is stored under the
        // hash of `numbers`. Asking for `numbers` compiles it, it does not
        // take the string validator.
        let string_validator = cache.validator_for(&strings, "s").unwrap();
        cache
            .compiled_by_structure
            .lock()
            .unwrap()
            .insert(fingerprint(&numbers), (strings.clone(), string_validator));
        let for_numbers = cache.validator_for(&numbers, "s").unwrap();
        assert!(for_numbers.is_valid(&json!(1)));
        assert!(!for_numbers.is_valid(&json!("x")));
    }
}

#[cfg(test)]
mod whole_number_tests {
    use super::whole_numbers_as_integers;
    use serde_json::json;

    #[test]
    fn whole_doubles_become_integers_and_fractions_stay() {
        let sent =
            json!({"count": 2.0, "items": [1.0, 2.5], "nested": {"minItems": 3.0}, "big": 1e300});
        let read = whole_numbers_as_integers(sent);
        assert_eq!(read["count"], json!(2));
        assert!(read["count"].is_i64());
        assert_eq!(read["items"], json!([1, 2.5]));
        assert!(read["nested"]["minItems"].is_i64());
        assert!(read["big"].is_f64(), "beyond exact integers: kept");
    }
}
