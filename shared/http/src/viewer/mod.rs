//! The run viewer's static files (`viewer/`: plain HTML, CSS and ES
//! modules, no build step), built into the binary and served at `/` beside
//! the API, without a token: the page asks for one and sends it with every
//! API call. The `api` function serves the same bundle.

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::ApiError;

/// `(file name, content type, contents)` of every viewer file but the page.
const FILES: &[(&str, &str, &str)] = &[
    (
        "viewer.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/viewer.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/api.js"),
    ),
    (
        "graph.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/graph.js"),
    ),
    (
        "form.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/form.js"),
    ),
    (
        "transcript.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/transcript.js"),
    ),
    (
        "chat.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/chat.js"),
    ),
    (
        "forks.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/forks.js"),
    ),
    (
        "timeline.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/timeline.js"),
    ),
    (
        "schedules.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/schedules.js"),
    ),
    (
        "evaluations.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/evaluations.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/dom.js"),
    ),
    (
        "viewer.css",
        "text/css; charset=utf-8",
        include_str!("../../viewer/viewer.css"),
    ),
];

const PAGE: &str = include_str!("../../viewer/index.html");

/// Every viewer file's name (for the deploy bundle and its test).
pub fn viewer_file_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("index.html").chain(FILES.iter().map(|(name, _, _)| *name))
}

fn file(content_type: &'static str, contents: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; connect-src *; img-src 'self' data:",
            ),
        ],
        contents,
    )
        .into_response()
}

async fn page() -> Response {
    file("text/html; charset=utf-8", PAGE)
}

async fn asset(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file_name, _, _)| *file_name == name) {
        Some((_, content_type, contents)) => file(content_type, contents),
        None => ApiError::new(
            StatusCode::NOT_FOUND,
            "route_not_found",
            format!("the viewer has no file `{name}`"),
        )
        .into_response(),
    }
}

/// `/` and `/viewer/{file}`.
pub fn viewer_routes() -> Router {
    Router::new()
        .route("/", get(page))
        .route("/index.html", get(page))
        .route("/viewer/{name}", get(asset))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file the page or a module names (`href`, `src`, `import … from
    /// "./x.js"`, `import('./x.js')`) is one the server serves, and nothing
    /// is loaded from another origin: the page works offline.
    #[test]
    fn every_referenced_file_is_served_and_nothing_comes_from_elsewhere() {
        let served: Vec<&str> = viewer_file_names().collect();
        let mut referenced = Vec::new();
        for text in std::iter::once(PAGE).chain(FILES.iter().map(|(_, _, contents)| *contents)) {
            for marker in ["href=\"viewer/", "src=\"viewer/", "from \"./", "import('./"] {
                for piece in text.split(marker).skip(1) {
                    let name: String = piece
                        .chars()
                        .take_while(|c| !matches!(c, '"' | '\''))
                        .collect();
                    referenced.push(name);
                }
            }
            for foreign in [
                "src=\"http",
                "href=\"http",
                "from \"http",
                "import(\"http",
                "import('http",
                "url(http",
                "src=\"//",
                "href=\"//",
            ] {
                assert!(!text.contains(foreign), "`{foreign}` in a viewer file");
            }
        }
        for (name, _, _) in FILES {
            assert!(
                referenced.iter().any(|reference| reference == name),
                "`{name}` is served but nothing loads it: {referenced:?}"
            );
        }
        for name in referenced {
            assert!(
                served.contains(&name.as_str()),
                "`{name}` is referenced but not served"
            );
        }
    }
}
