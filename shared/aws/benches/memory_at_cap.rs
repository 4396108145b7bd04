//! Memory search on DynamoDB (moto) at 100, 1,000 and 10,000 items in one
//! namespace (10,000 is the default cap, `BATON_MEMORY_NAMESPACE_CAP`):
//! what a search costs end to end through `MemoryService` (the namespace's
//! query pages, then BM25 in the process), median of a few rounds each.
//! The items are written through the adapter (one transaction each, the
//! namespace's counter moved with it), 16 at a time; sentences of twelve
//! words from a fixed vocabulary.
//!
//!   cargo bench -p baton-aws --bench memory_at_cap
//!
//! moto is one Python process, slower per page than DynamoDB: the page
//! count is what carries over (one query page per 1 MB of items).
//! `BATON_MEMORY_BENCH_LARGEST` lowers the largest size. Needs
//! `moto_server` on the PATH.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_aws::DynamoRunStore;
use baton_memory::item::Provenance;
use baton_runtime::clock::SystemClock;
use baton_runtime::services::memory::{MemoryService, MemoryWrite};
use futures_util::StreamExt;
use moto_server::{MotoServer, unique_name};
use serde_json::json;

const WORDS: [&str; 24] = [
    "warm", "plain", "tone", "voice", "brief", "formal", "navy", "white", "logo", "claim",
    "source", "legal", "offer", "price", "launch", "winter", "summer", "audience", "student",
    "manager", "short", "long", "headline", "story",
];
const ROUNDS: usize = 5;
const TENANT: &str = "bench-tenant";

fn sentence(index: usize) -> String {
    let mut state = (index as u64)
        .wrapping_mul(2_654_435_761)
        .wrapping_add(12_345);
    (0..12)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            WORDS[((state >> 33) % WORDS.len() as u64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::main]
async fn main() {
    let largest: usize = std::env::var("BATON_MEMORY_BENCH_LARGEST")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(10_000);
    let moto = MotoServer::start().unwrap();
    let connection = baton_aws::AwsConnection::to_emulator(&moto.endpoint).await;
    let store = Arc::new(DynamoRunStore::new(
        &connection,
        unique_name("baton-memory-bench"),
    ));
    store.create_table_if_missing().await.unwrap();
    let memory = Arc::new(MemoryService::new(
        store,
        None,
        Arc::new(SystemClock),
        10_000,
    ));
    println!("| items | written in | search median ({ROUNDS} rounds) |");
    println!("| --- | --- | --- |");
    for size in [100, 1_000, 10_000]
        .into_iter()
        .filter(|size| *size <= largest)
    {
        let namespace = vec!["bench".to_string(), format!("size-{size}")];
        let started = Instant::now();
        futures_util::stream::iter(0..size)
            .map(|index| {
                let (memory, namespace) = (memory.clone(), namespace.clone());
                async move {
                    memory
                        .put(
                            TENANT,
                            MemoryWrite {
                                namespace,
                                key: format!("item-{index:05}"),
                                value: json!(sentence(index)),
                                text: None,
                                expires_at: None,
                                provenance: Provenance::default(),
                            },
                        )
                        .await
                        .unwrap();
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        let written = started.elapsed();
        let mut samples = Vec::new();
        for _ in 0..ROUNDS {
            let searched = Instant::now();
            let found = memory
                .search(
                    TENANT,
                    std::slice::from_ref(&namespace),
                    "a warm plain tone for the student audience",
                    5,
                )
                .await
                .unwrap();
            samples.push(searched.elapsed());
            assert_eq!(found.len(), 5);
        }
        println!(
            "| {size} | {:.1} s | {:.1} ms |",
            written.as_secs_f64(),
            median(samples).as_secs_f64() * 1000.0
        );
    }
}
