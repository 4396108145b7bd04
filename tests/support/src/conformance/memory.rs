//! What every `MemoryStore` adapter must do, through the `MemoryService`
//! that every caller uses: an item is kept, read and replaced by
//! namespace and key (its creation time kept); a namespace takes no new key
//! past its cap, a replaced key still goes in, and a deletion frees a
//! place; a prefix lists its namespace and those under it, not a sibling
//! that merely starts with the same letters; search reads one namespace and
//! ranks the item sharing the query's words first; an expired item is
//! answered by nothing, and retention removes it where the store has no
//! TTL of its own; deleting a prefix, or every item one person wrote, is
//! one call; tenants stay apart.

use std::sync::Arc;
use std::time::Duration;

use baton_memory::item::Provenance;
use baton_runtime::clock::OffsetClock;
use baton_runtime::ports::MemoryStore;
use baton_runtime::services::memory::{MemoryError, MemoryService, MemoryWrite};
use serde_json::{Value, json};

use super::check;

fn namespace(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| part.to_string()).collect()
}

fn write(parts: &[&str], key: &str, value: Value, person: Option<&str>) -> MemoryWrite {
    MemoryWrite {
        namespace: namespace(parts),
        key: key.to_string(),
        value,
        text: None,
        expires_at: None,
        provenance: Provenance {
            person: person.map(str::to_string),
            ..Provenance::default()
        },
    }
}

/// Runs the suite against `store`; `unique` keeps runs of it apart;
/// `expires_by_itself` says the store's own TTL removes expired items
/// (retention's pass then removes none).
pub async fn memory_store_conformance(
    store: Arc<dyn MemoryStore>,
    unique: &str,
    expires_by_itself: bool,
) -> Result<(), String> {
    let clock = Arc::new(OffsetClock::new());
    let memory = MemoryService::new(store, None, clock.clone(), 3);
    let tenant = format!("memory-{unique}");
    let other = format!("memory-other-{unique}");
    fn failed(what: &'static str) -> impl Fn(MemoryError) -> String {
        move |error| format!("{what}: {error}")
    }

    // Kept, read, replaced with its creation time kept.
    let first = memory
        .put(
            &tenant,
            write(
                &["client", "a", "tone"],
                "voice",
                json!("Warm and plain, never shouting"),
                Some("ada"),
            ),
        )
        .await
        .map_err(failed("put"))?;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let replaced = memory
        .put(
            &tenant,
            write(
                &["client", "a", "tone"],
                "voice",
                json!("Warm, plain and short"),
                Some("ada"),
            ),
        )
        .await
        .map_err(failed("replace"))?;
    check(
        replaced.created_at == first.created_at,
        "a replaced item keeps its creation time",
    )?;
    let read = memory
        .get(&tenant, &namespace(&["client", "a", "tone"]), "voice")
        .await
        .map_err(failed("get"))?;
    check(
        read.as_ref().map(|item| &item.value) == Some(&json!("Warm, plain and short")),
        "get answers the replaced value",
    )?;
    check(
        memory
            .get(&other, &namespace(&["client", "a", "tone"]), "voice")
            .await
            .map_err(failed("get other"))?
            .is_none(),
        "another tenant does not see it",
    )?;

    // The cap: three keys, a fourth refused, a replacement still in.
    for key in ["colours", "legal"] {
        memory
            .put(
                &tenant,
                write(
                    &["client", "a", "tone"],
                    key,
                    json!(format!("about {key}")),
                    Some("bea"),
                ),
            )
            .await
            .map_err(failed("put under the cap"))?;
    }
    let refused = memory
        .put(
            &tenant,
            write(&["client", "a", "tone"], "fourth", json!("x"), None),
        )
        .await;
    check(
        matches!(refused, Err(MemoryError::NamespaceFull { cap: 3 })),
        &format!("a fourth key is refused at a cap of 3 ({refused:?})"),
    )?;
    memory
        .put(
            &tenant,
            write(
                &["client", "a", "tone"],
                "legal",
                json!("Every claim needs a source"),
                Some("bea"),
            ),
        )
        .await
        .map_err(failed("a replacement at the cap"))?;
    check(
        memory
            .delete(&tenant, &namespace(&["client", "a", "tone"]), "colours")
            .await
            .map_err(failed("delete"))?,
        "delete finds the item",
    )?;
    check(
        !memory
            .delete(&tenant, &namespace(&["client", "a", "tone"]), "colours")
            .await
            .map_err(failed("delete again"))?,
        "a second delete finds nothing",
    )?;
    memory
        .put(
            &tenant,
            write(
                &["client", "a", "tone"],
                "fourth",
                json!("The brand colours are navy and white"),
                None,
            ),
        )
        .await
        .map_err(failed("put after a deletion freed a place"))?;

    // Prefixes: the namespace and those under it, not a sibling.
    memory
        .put(
            &tenant,
            write(&["client", "a"], "name", json!("Client A"), None),
        )
        .await
        .map_err(failed("put"))?;
    memory
        .put(
            &tenant,
            write(&["client", "ab"], "name", json!("Client AB"), Some("ada")),
        )
        .await
        .map_err(failed("put"))?;
    memory
        .put(
            &other,
            write(&["client", "a"], "name", json!("the other tenant's"), None),
        )
        .await
        .map_err(failed("put other"))?;
    let listed = memory
        .list(&tenant, &namespace(&["client", "a"]), 100)
        .await
        .map_err(failed("list"))?;
    let names: Vec<String> = listed
        .iter()
        .map(|item| format!("{}/{}", item.namespace.join("/"), item.key))
        .collect();
    check(
        names
            == [
                "client/a/name",
                "client/a/tone/fourth",
                "client/a/tone/legal",
                "client/a/tone/voice",
            ],
        &format!("a prefix lists its namespace then those under it, by key: {names:?}"),
    )?;
    let everything = memory
        .list(&tenant, &[], 100)
        .await
        .map_err(failed("list all"))?;
    check(
        everything.len() == 5,
        &format!(
            "an empty prefix lists the tenant's 5 items ({})",
            everything.len()
        ),
    )?;

    // Search: one namespace, the item sharing the query's words first.
    let found = memory
        .search(
            &tenant,
            &[namespace(&["client", "a", "tone"])],
            "what tone of voice: warm or plain?",
            3,
        )
        .await
        .map_err(failed("search"))?;
    check(
        found.first().map(|ranked| ranked.item.key.as_str()) == Some("voice"),
        &format!("search ranks the item sharing the query's words first: {found:?}"),
    )?;
    check(
        found
            .iter()
            .all(|ranked| ranked.item.namespace == namespace(&["client", "a", "tone"])),
        "search reads only the namespace named",
    )?;

    // Expiry: answered by nothing once past, removed by retention.
    let mut expiring = write(&["session"], "note", json!("soon gone"), None);
    expiring.expires_at = Some(
        baton_runtime::ports::Clock::now(clock.as_ref())
            .plus(Duration::from_secs(60))
            .rfc3339(),
    );
    memory
        .put(&tenant, expiring)
        .await
        .map_err(failed("put expiring"))?;
    check(
        memory
            .get(&tenant, &namespace(&["session"]), "note")
            .await
            .map_err(failed("get"))?
            .is_some(),
        "an item before its expiry is answered",
    )?;
    clock.advance(Duration::from_secs(120));
    check(
        memory
            .get(&tenant, &namespace(&["session"]), "note")
            .await
            .map_err(failed("get"))?
            .is_none(),
        "an expired item is not answered",
    )?;
    check(
        memory
            .list(&tenant, &namespace(&["session"]), 10)
            .await
            .map_err(failed("list"))?
            .is_empty(),
        "an expired item is not listed",
    )?;
    let removed = memory
        .remove_expired(100)
        .await
        .map_err(failed("remove expired"))?;
    check(
        removed == usize::from(!expires_by_itself),
        &format!("retention removes the expired item where the store has no TTL ({removed})"),
    )?;

    // One call deletes a prefix, or every item of one person.
    let under = memory
        .forget_under(&tenant, &namespace(&["client", "a"]))
        .await
        .map_err(failed("forget under"))?;
    check(
        under == 4,
        &format!("a prefix's deletion takes its 4 items ({under})"),
    )?;
    let of_ada = memory
        .forget_person(&tenant, "ada")
        .await
        .map_err(failed("forget person"))?;
    check(
        of_ada == 1,
        &format!("a person's deletion takes the 1 item left that they wrote ({of_ada})"),
    )?;
    let left = memory
        .list(&tenant, &[], 100)
        .await
        .map_err(failed("list"))?;
    check(left.is_empty(), &format!("nothing else is left: {left:?}"))?;
    check(
        memory
            .list(&other, &[], 100)
            .await
            .map_err(failed("list other"))?
            .len()
            == 1,
        "the other tenant's item is untouched",
    )?;
    // A deleted namespace takes new keys again up to its cap.
    for key in ["one", "two", "three"] {
        memory
            .put(
                &tenant,
                write(&["client", "a", "tone"], key, json!(key), None),
            )
            .await
            .map_err(failed("put after the namespace was deleted"))?;
    }
    Ok(())
}
