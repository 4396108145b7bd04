//! The operations of a tenant's memory across runs (`/api/v1/flex/memory`).

use axum::routing::{delete, get, post, put};

use super::super::memory;
use super::{Answer, BAD_JSON, Body, Operation, answer, api, route};
use crate::auth::Scope;

const INVALID_MEMORY: Answer = answer(
    422,
    "a wrong namespace, key, value, text or expiry (`invalid_memory`); `details.path` names it (`$.namespace[1]`, `$.expiresAt`)",
    Body::Json("Error"),
);
const BAD_PARAMETER: Answer = answer(
    400,
    "a bad parameter (`details.parameter`): a namespace is its JSON array of strings",
    Body::Json("Error"),
);
const ITEM_NOT_FOUND: Answer = answer(
    404,
    "no such item (or it expired): `memory_item_not_found`",
    Body::Json("Error"),
);

/// In the order the document lists them.
pub(super) fn memory_operations() -> Vec<Operation> {
    vec![
        api(
            route(
                "putMemoryItem",
                Scope::RunsWrite,
                || put(memory::put_item),
                "put",
                "/api/v1/flex/memory/items",
            ),
            "Keep a memory item under its namespace and key (a new version replaces the old); the caller's user is its provenance",
            Some("MemoryItemWrite"),
            &[],
            &[
                answer(200, "the item as kept", Body::Json("MemoryItem")),
                BAD_JSON,
                answer(
                    409,
                    "the namespace holds `BATON_MEMORY_NAMESPACE_CAP` items and the key is new (`memory_namespace_full`, `details.cap`)",
                    Body::Json("Error"),
                ),
                INVALID_MEMORY,
            ],
        ),
        api(
            route(
                "listMemoryItems",
                Scope::RunsRead,
                || get(memory::list_items),
                "get",
                "/api/v1/flex/memory/items",
            ),
            "The items of a namespace and those under it, by namespace then key",
            None,
            &[
                (
                    "prefix",
                    "the namespace, a JSON array of strings (default `[]`: every namespace)",
                ),
                ("limit", "1 to 1000 (default 100)"),
            ],
            &[
                answer(200, "the items", Body::Json("MemoryItemList")),
                BAD_PARAMETER,
                INVALID_MEMORY,
            ],
        ),
        api(
            route(
                "getMemoryItem",
                Scope::RunsRead,
                || get(memory::get_item),
                "get",
                "/api/v1/flex/memory/item",
            ),
            "One memory item",
            None,
            &[
                ("namespace", "the namespace, a JSON array of strings"),
                ("key", "the item's key"),
            ],
            &[
                answer(200, "the item", Body::Json("MemoryItem")),
                BAD_PARAMETER,
                ITEM_NOT_FOUND,
            ],
        ),
        api(
            route(
                "deleteMemoryItem",
                Scope::RunsWrite,
                || delete(memory::delete_item),
                "delete",
                "/api/v1/flex/memory/item",
            ),
            "Delete one memory item",
            None,
            &[
                ("namespace", "the namespace, a JSON array of strings"),
                ("key", "the item's key"),
            ],
            &[
                answer(204, "deleted", Body::Empty),
                BAD_PARAMETER,
                ITEM_NOT_FOUND,
            ],
        ),
        api(
            route(
                "searchMemory",
                Scope::RunsRead,
                || post(memory::search),
                "post",
                "/api/v1/flex/memory/search",
            ),
            "The items of up to 10 namespaces best matching a query: BM25, fused with embedding similarity where the deployment has an embedding model",
            Some("MemorySearchRequest"),
            &[],
            &[
                answer(
                    200,
                    "the items found, best first",
                    Body::Json("MemorySearchAnswer"),
                ),
                BAD_JSON,
                INVALID_MEMORY,
            ],
        ),
        api(
            route(
                "forgetMemory",
                Scope::Admin,
                || post(memory::forget),
                "post",
                "/api/v1/flex/memory/forget",
            ),
            "Delete every item under a namespace prefix, or every item one person wrote, in one audited call (admin)",
            Some("MemoryForgetRequest"),
            &[],
            &[
                answer(
                    200,
                    "how many items were deleted",
                    Body::Json("MemoryForgotten"),
                ),
                BAD_JSON,
                INVALID_MEMORY,
            ],
        ),
    ]
}
