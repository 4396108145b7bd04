//! Tests of the registry loader: what it refuses, naming file and path.

use super::*;

fn doc(name: &str, text: &str) -> RegistryDocument {
    RegistryDocument {
        source_name: name.to_string(),
        text: text.to_string(),
    }
}

const FACET_IN: &str = r#"{"name": "brief", "title": "B", "description": "d", "schema": {"type": "string"}, "direction": "input"}"#;
const FACET_OUT: &str = r#"{"name": "draft", "title": "D", "description": "d", "schema": {"type": "string"}, "direction": "output"}"#;

fn capability(inputs: &str, outputs: &str) -> String {
    format!(
        r#"{{"capabilityId": "w", "agentType": "ai", "version": "1", "displayName": "W", "summary": "s",
            "inputContract": {inputs}, "outputContract": {outputs}}}"#
    )
}

#[test]
fn valid_registry_loads() {
    let registry = Registry::from_documents(
        &[doc("f1", FACET_IN), doc("f2", FACET_OUT)],
        &[(doc("c", &capability(r#"["brief"]"#, r#"["draft"]"#)), None)],
    )
    .unwrap();
    assert_eq!(registry.producers_of("draft").len(), 1);
}

#[test]
fn unknown_facet_names_file_and_path() {
    let error = Registry::from_documents(
        &[doc("f1", FACET_IN), doc("f2", FACET_OUT)],
        &[(
            doc(
                "caps/w.json",
                &capability(r#"["brief", "nope"]"#, r#"["draft"]"#),
            ),
            None,
        )],
    )
    .unwrap_err();
    assert_eq!(
        error,
        registry_error("caps/w.json", "$.inputContract[1]", "unknown facet `nope`")
    );
}

#[test]
fn direction_mismatch_is_rejected() {
    let error = Registry::from_documents(
        &[doc("f1", FACET_IN), doc("f2", FACET_OUT)],
        &[(doc("c", &capability(r#"["draft"]"#, r#"["draft"]"#)), None)],
    )
    .unwrap_err();
    assert_eq!(error.path(), Some("$.inputContract[0]"));
}

#[test]
fn duplicate_capability_is_rejected() {
    let text = capability(r#"["brief"]"#, r#"["draft"]"#);
    let error = Registry::from_documents(
        &[doc("f1", FACET_IN), doc("f2", FACET_OUT)],
        &[(doc("a", &text), None), (doc("b", &text), None)],
    )
    .unwrap_err();
    assert!(
        error.to_string().contains("duplicate capability"),
        "{error}"
    );
}

#[test]
fn facet_schema_that_does_not_compile_is_rejected() {
    let bad = r#"{"name": "x", "title": "X", "description": "d", "schema": {"type": 12}, "direction": "input"}"#;
    let error = Registry::from_documents(&[doc("facets/x.json", bad)], &[]).unwrap_err();
    assert_eq!(error.path(), Some("$.schema"));
}

#[test]
fn duplicate_facet_is_rejected() {
    let error =
        Registry::from_documents(&[doc("a", FACET_IN), doc("b", FACET_IN)], &[]).unwrap_err();
    assert!(error.to_string().contains("duplicate facet"));
}
