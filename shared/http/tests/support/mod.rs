//! What the router-level tests share: the API over the real services on
//! the in-memory adapters, with a model endpoint that is never reached (a
//! closed port: no worker runs, so a submitted run only queues its plan
//! step).

use std::sync::Arc;

use baton_http::{ApiState, HttpSettings, TokenAuthenticator, router};
use baton_test_support::TestServices;

/// The router with `authenticator` and `settings`, no worker, no model.
#[allow(dead_code)] // each test file uses its own part of the support
pub fn api_without_a_model(
    authenticator: TokenAuthenticator,
    settings: HttpSettings,
) -> axum::Router {
    api_embedding_with(authenticator, settings, None)
}

/// [`api_without_a_model`] whose deployment embeds with `embedder` (a
/// test double of an embeddings endpoint), when one is given.
#[allow(dead_code)] // each test file uses its own part of the support
pub fn api_embedding_with(
    authenticator: TokenAuthenticator,
    settings: HttpSettings,
    embedder: Option<Arc<dyn baton_runtime::ports::TextEmbedder>>,
) -> axum::Router {
    let model = baton_llm::OpenAiCompatibleProvider::new(baton_llm::OpenAiCompatibleConfig::new(
        "http://127.0.0.1:9/v1".to_string(),
        "unreached",
        None,
    ))
    .expect("the model client builds");
    let built = TestServices::with_model(Arc::new(model))
        .memory(
            Arc::new(baton_runtime::memory::InMemoryMemoryStore::default()),
            embedder,
        )
        .build();
    router(ApiState {
        runs: built.services.runs.clone(),
        capabilities: built.services.capabilities.clone(),
        people: built.services.people.clone(),
        authenticator: Arc::new(authenticator),
        settings,
        streams: built.services.streams.clone(),
        schedules: built.services.schedules.clone(),
        audit: built.services.audit.clone(),
        request_keys: built.services.request_keys.clone(),
        memory: built.services.memory.clone(),
    })
}
