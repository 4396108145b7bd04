//! Facets: the semantic primitives contracts are made of.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which way a facet may flow through a capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FacetDirection {
    Input,
    Output,
    Bidirectional,
}

impl FacetDirection {
    pub fn allows_input(self) -> bool {
        matches!(self, FacetDirection::Input | FacetDirection::Bidirectional)
    }
    pub fn allows_output(self) -> bool {
        matches!(self, FacetDirection::Output | FacetDirection::Bidirectional)
    }
}

/// How a node sees a facet that several nodes upstream of it produce.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum FacetMerge {
    /// The value of the one producer the plan wires to the node.
    #[default]
    Replace,
    /// The facet is a list every producer adds to: a node sees the items of
    /// every producer upstream of it (and the envelope's input), in plan
    /// order, each item once, so parallel branches that join lose nothing.
    Append,
}

impl FacetMerge {
    pub fn is_replace(&self) -> bool {
        *self == FacetMerge::Replace
    }
}

/// One facet definition, as stored in `registry/facets/<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Facet {
    pub name: String,
    pub title: String,
    pub description: String,
    pub schema: Value,
    /// Guidance for the agent on how to use or produce this facet.
    #[serde(default)]
    pub semantics: String,
    pub direction: FacetDirection,
    /// A required facet must be present in a node's input; an optional one is
    /// handed over when available and never forces a producer into the plan.
    #[serde(default = "required_by_default")]
    pub required_by_default: bool,
    /// Its value is a list of feedback items, each naming what to revise
    /// (`facet`: a facet name, or `*` for the whole output; or `nodeId`),
    /// with its `message` and an optional `resolution` (`open` when
    /// absent; `addressed` and `dismissed` items are not acted on). When a
    /// node produces it with open items, the engine re-runs the producers of
    /// what they name, and everything downstream, in a new plan version
    /// (`engine/feedback.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drives_revisions: bool,
    /// How a node sees the facet when several nodes upstream produce it
    /// (`replace`, the default, or `append` for a list they all add to).
    #[serde(default, skip_serializing_if = "FacetMerge::is_replace")]
    pub merge: FacetMerge,
    /// How a person edits it on a task surface (`facet_widgets`); absent:
    /// the generic form of its schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub widget: Option<crate::contracts::facet_widgets::FacetWidget>,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

fn required_by_default() -> bool {
    true
}

/// All facets by name.
#[derive(Debug, Clone, Default)]
pub struct FacetCatalog {
    facets_by_name: BTreeMap<String, Facet>,
    /// Contracts compiled from these facets (`compiler::compile_contract`),
    /// shared by the catalog's clones and replaced when a facet is added.
    pub(crate) compiled_contracts: std::sync::Arc<crate::contracts::compiled::CompiledContracts>,
    /// The digests of these facets' schemas, likewise shared and replaced.
    schema_keys: std::sync::Arc<crate::contracts::compiled::FacetSchemaKeys>,
}

impl FacetCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a facet; returns the previous definition of the same name, if any.
    pub fn insert(&mut self, facet: Facet) -> Option<Facet> {
        self.compiled_contracts = Default::default();
        self.schema_keys = Default::default();
        self.facets_by_name.insert(facet.name.clone(), facet)
    }

    /// The digest of facet `name`'s schema (hex SHA-256 of its JSON text),
    /// computed once per catalog; `None` for a facet it does not hold.
    pub fn schema_key(&self, name: &str) -> Option<std::sync::Arc<str>> {
        let facet = self.facets_by_name.get(name)?;
        Some(
            self.schema_keys
                .get_or_compute(name, || crate::basics::schema::schema_key_of(&facet.schema)),
        )
    }

    pub fn get(&self, name: &str) -> Option<&Facet> {
        self.facets_by_name.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.facets_by_name.contains_key(name)
    }

    pub fn list(&self) -> impl Iterator<Item = &Facet> {
        self.facets_by_name.values()
    }

    pub fn len(&self) -> usize {
        self.facets_by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.facets_by_name.is_empty()
    }
}
