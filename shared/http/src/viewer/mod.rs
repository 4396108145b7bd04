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
        "sandbox.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/sandbox.js"),
    ),
    (
        "schedules.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/schedules.js"),
    ),
    (
        "memory.js",
        "text/javascript; charset=utf-8",
        include_str!("../../viewer/memory.js"),
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

/// The Content-Security-Policy of every viewer file: scripts, styles and
/// images from this server only, and API calls to this server and the
/// operator's `api_origins` only (so even a changed page cannot send the
/// token elsewhere).
fn content_security_policy(api_origins: &[String]) -> String {
    let mut connect = String::from("'self'");
    for origin in api_origins {
        connect.push(' ');
        connect.push_str(origin);
    }
    format!(
        "default-src 'self'; connect-src {connect}; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// The page with the API origins it may use written into its
/// `baton-api-origins` meta tag (`api.js` reads it).
fn page_with_api_origins(api_origins: &[String]) -> String {
    let listed = api_origins
        .iter()
        .map(|origin| {
            origin
                .replace('&', "&amp;")
                .replace('"', "&quot;")
                .replace('<', "&lt;")
        })
        .collect::<Vec<_>>()
        .join(" ");
    PAGE.replace(
        "<meta name=\"baton-api-origins\" content=\"\">",
        &format!("<meta name=\"baton-api-origins\" content=\"{listed}\">"),
    )
}

/// An API origin as the browser writes it (`scheme://host[:port]`, no path,
/// no trailing slash), or `None` for anything else.
pub fn normalised_api_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/');
    let (scheme, authority) = text.split_once("://")?;
    let well_formed = matches!(scheme, "http" | "https")
        && !authority.is_empty()
        && !authority.contains(['/', '?', '#', '@', ' ', '"', '\'', '<', '>']);
    well_formed.then(|| format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

fn file(content_type: &'static str, contents: String, policy: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CACHE_CONTROL, "no-cache".to_string()),
            (header::CONTENT_SECURITY_POLICY, policy.to_string()),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
            (header::REFERRER_POLICY, "no-referrer".to_string()),
        ],
        contents,
    )
        .into_response()
}

/// `/` and `/viewer/{file}`; `api_origins`: the API origins besides the
/// page's own the viewer may call (`BATON_VIEWER_API_ORIGINS`, each
/// `scheme://host[:port]`).
pub fn viewer_routes(api_origins: &[String]) -> Router {
    let api_origins: Vec<String> = api_origins
        .iter()
        .filter_map(|origin| normalised_api_origin(origin))
        .collect();
    let policy: std::sync::Arc<str> = content_security_policy(&api_origins).into();
    let page_text: std::sync::Arc<str> = page_with_api_origins(&api_origins).into();
    let page = {
        let policy = policy.clone();
        move || {
            let policy = policy.clone();
            let page_text = page_text.clone();
            async move { file("text/html; charset=utf-8", page_text.to_string(), &policy) }
        }
    };
    let asset = move |Path(name): Path<String>| {
        let policy = policy.clone();
        async move {
            match FILES.iter().find(|(file_name, _, _)| *file_name == name) {
                Some((_, content_type, contents)) => {
                    file(content_type, (*contents).to_string(), &policy)
                }
                None => ApiError::new(
                    StatusCode::NOT_FOUND,
                    "route_not_found",
                    format!("the viewer has no file `{name}`"),
                )
                .into_response(),
            }
        }
    };
    Router::new()
        .route("/", get(page.clone()))
        .route("/index.html", get(page))
        .route("/viewer/{name}", get(asset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_the_configured_api_origins() {
        let origins = vec!["https://api.example".to_string()];
        let page = page_with_api_origins(&origins);
        assert!(
            page.contains("<meta name=\"baton-api-origins\" content=\"https://api.example\">"),
            "the page carries the configured origin"
        );
        let policy = content_security_policy(&origins);
        assert!(
            policy.contains("connect-src 'self' https://api.example;"),
            "{policy}"
        );
        assert!(!content_security_policy(&[]).contains('*'));
        assert!(PAGE.contains("<meta name=\"baton-api-origins\" content=\"\">"));
    }

    #[test]
    fn api_origins_are_normalised_or_refused() {
        assert_eq!(
            normalised_api_origin("https://API.example:8443/").as_deref(),
            Some("https://api.example:8443")
        );
        assert_eq!(normalised_api_origin("https://a.example/path"), None);
        assert_eq!(normalised_api_origin("javascript:alert(1)"), None);
        assert_eq!(normalised_api_origin("https://user@a.example"), None);
        assert_eq!(normalised_api_origin("*"), None);
    }

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
