//! How a person edits a facet: the widget a facet definition names
//! (`"widget": {"kind": "longText"}`), which a human task's surface uses
//! instead of the generic schema form. The kinds are generic shapes, not
//! domain words: long text, a choice among an enum, tags, cards (a list of
//! objects), a score table (an object of numbers) and fields (an object
//! whose properties name their own widgets). A widget is checked against
//! its facet's schema when the registry loads (`longText` on a number is
//! refused, naming the path). A task carries the widgets of the facets it
//! asks for (`HumanTask.widgets`); a facet without one gets the generic form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One facet's (or one field's) widget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FacetWidget {
    pub kind: WidgetKind,
    /// `longText`: the text area's height in lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u32>,
    /// `cards`: the item property shown as each card's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_title: Option<String>,
    /// `fields`: widgets of the object's properties, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, FacetWidget>,
}

/// The widget shapes a task surface knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum WidgetKind {
    /// A string: a text area with a character count.
    LongText,
    /// A value of an `enum` (radio buttons), or a list of them (check boxes).
    Choice,
    /// A list of strings, typed comma-separated.
    Tags,
    /// A list of objects, each a card.
    Cards,
    /// An object of numbers: one row per number, with its bounds.
    ScoreTable,
    /// An object whose properties name their own widgets in `fields`.
    Fields,
}

impl FacetWidget {
    /// Checks the widget against `schema` (the facet's, or a property's);
    /// an error is `(JSON path below `at`, message)`.
    pub fn check(&self, schema: &Value, at: &str) -> Result<(), (String, String)> {
        let kind_path = format!("{at}.kind");
        let schema_type = schema.get("type").and_then(Value::as_str);
        let items = schema.get("items").unwrap_or(&Value::Null);
        let items_type = items.get("type").and_then(Value::as_str);
        let refuse = |what: &str| Err((kind_path.clone(), format!("{what} ({self:?})")));
        match self.kind {
            WidgetKind::LongText if schema_type != Some("string") => {
                refuse("a longText widget edits a string")
            }
            WidgetKind::Choice if schema.get("enum").is_none() && items.get("enum").is_none() => {
                refuse("a choice widget needs an `enum` (or items with one)")
            }
            WidgetKind::Tags if schema_type != Some("array") || items_type != Some("string") => {
                refuse("a tags widget edits a list of strings")
            }
            WidgetKind::Cards if schema_type != Some("array") || items_type != Some("object") => {
                refuse("a cards widget edits a list of objects")
            }
            WidgetKind::ScoreTable | WidgetKind::Fields if schema_type != Some("object") => {
                refuse("this widget edits an object")
            }
            _ => self.check_fields(schema, at),
        }
    }

    fn check_fields(&self, schema: &Value, at: &str) -> Result<(), (String, String)> {
        if self.kind != WidgetKind::Fields && !self.fields.is_empty() {
            return Err((
                format!("{at}.fields"),
                "only a fields widget names widgets of its properties".into(),
            ));
        }
        if let Some(title) = &self.card_title
            && schema
                .pointer(&format!("/items/properties/{title}"))
                .is_none()
        {
            return Err((
                format!("{at}.cardTitle"),
                format!("the items have no property `{title}`"),
            ));
        }
        for (name, widget) in &self.fields {
            let path = format!("{at}.fields.{name}");
            let Some(property) = schema.pointer(&format!("/properties/{name}")) else {
                return Err((path, format!("the object has no property `{name}`")));
            };
            widget.check(property, &path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget(document: Value) -> FacetWidget {
        serde_json::from_value(document).expect("a widget")
    }

    #[test]
    fn a_widget_that_does_not_fit_its_schema_is_refused_naming_the_path() {
        let post = json!({"type": "object", "properties": {
            "copy": {"type": "string"}, "visuals": {"type": "array", "items": {"type": "string"}}}});
        let fits = widget(json!({"kind": "fields", "fields": {
            "copy": {"kind": "longText", "rows": 5}, "visuals": {"kind": "tags"}}}));
        assert_eq!(fits.check(&post, "$.widget"), Ok(()));
        let misfit = widget(json!({"kind": "fields", "fields": {"visuals": {"kind": "longText"}}}));
        assert_eq!(
            misfit.check(&post, "$.widget").unwrap_err().0,
            "$.widget.fields.visuals.kind"
        );
        let unknown = widget(json!({"kind": "fields", "fields": {"title": {"kind": "longText"}}}));
        assert_eq!(
            unknown.check(&post, "$.widget").unwrap_err().0,
            "$.widget.fields.title"
        );
        let no_enum = widget(json!({"kind": "choice"}));
        assert_eq!(
            no_enum
                .check(&json!({"type": "string"}), "$.widget")
                .unwrap_err()
                .0,
            "$.widget.kind"
        );
        let cards = widget(json!({"kind": "cards", "cardTitle": "headline"}));
        let list =
            json!({"type": "array", "items": {"type": "object", "properties": {"body": {}}}});
        assert_eq!(
            cards.check(&list, "$.widget").unwrap_err().0,
            "$.widget.cardTitle"
        );
    }
}
