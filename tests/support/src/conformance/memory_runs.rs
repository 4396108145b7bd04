//! Memory across runs, as every store's test drives it: the shipped
//! writer (`ContentGenerator.copyVariants`) remembers the tone of voice of
//! the sample envelope when its run completes, and a later run whose
//! envelope gives no tone recalls it.

use serde_json::{Value, json};

use crate::schema_shaped_model::RecordingModel;

/// The writer's output schema name (what its model requests are named).
pub const WRITER_SCHEMA: &str = "ContentGenerator_copyVariants";

/// Where the tone is remembered and recalled from.
pub fn tone_namespace() -> Vec<String> {
    ["client", "example", "tone"]
        .iter()
        .map(|part| part.to_string())
        .collect()
}

/// The sample envelope (its tone of voice given or left out), recalling
/// from and remembering to [`tone_namespace`].
pub fn tone_envelope(with_tone: bool) -> Value {
    let mut envelope = crate::plain_example_envelope("seed-10.1-sample-envelope.json");
    if !with_tone {
        envelope["inputs"]
            .as_object_mut()
            .expect("the sample's inputs are an object")
            .remove("toneOfVoice");
    }
    envelope["memory"] = json!({
        "recall": {"namespaces": [tone_namespace()], "perNode": 3},
        "rememberTo": tone_namespace()
    });
    envelope
}

/// The one writer request `model` received quotes the remembered tone,
/// with `remembered_by` (the first run) as its provenance; returns it.
pub fn assert_the_writer_recalled_the_tone(model: &RecordingModel, remembered_by: &str) -> Value {
    let requests = model.user_messages_for(WRITER_SCHEMA);
    assert_eq!(requests.len(), 1, "one writer call");
    let writer = requests.into_iter().next().expect("one writer call");
    assert!(
        writer["inputs"].get("toneOfVoice").is_none(),
        "the second envelope gives no tone"
    );
    let tone = writer["recalledMemory"]
        .as_array()
        .expect("recalled items")
        .iter()
        .find(|snippet| snippet["key"] == "toneOfVoice")
        .cloned()
        .expect("the tone is recalled");
    assert!(
        tone["text"]
            .as_str()
            .is_some_and(|text| text.contains("confident")),
        "{tone}"
    );
    assert_eq!(tone["provenance"]["runId"], remembered_by);
    assert_eq!(tone["namespace"], json!(tone_namespace()));
    writer
}
