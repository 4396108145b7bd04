//! Memory search's ranking cost in the function (what a search adds to
//! reading a namespace): BM25 over 100, 1,000 and 10,000 items (10,000 is
//! the default namespace cap), and BM25 fused with 256-dimension
//! embeddings at the same sizes. Items are sentences drawn from a fixed
//! vocabulary (seeded), one query per run.
//!
//! `cargo bench -p baton-memory --bench search`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use baton_memory::item::{MemoryItem, Provenance};
use baton_memory::search::{QueryEmbedding, rank};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

const WORDS: [&str; 24] = [
    "warm", "plain", "tone", "voice", "brief", "formal", "navy", "white", "logo", "claim",
    "source", "legal", "offer", "price", "launch", "winter", "summer", "audience", "student",
    "manager", "short", "long", "headline", "story",
];
const DIMENSIONS: usize = 256;

/// A small deterministic generator (no dependency for a bench's inputs).
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn items(count: usize, embedded: bool) -> Vec<MemoryItem> {
    let mut sequence = Sequence(7);
    (0..count)
        .map(|index| {
            let text: Vec<&str> = (0..12)
                .map(|_| WORDS[(sequence.next() % WORDS.len() as u64) as usize])
                .collect();
            let embedding = embedded.then(|| {
                (0..DIMENSIONS)
                    .map(|_| (sequence.next() % 1000) as f32 / 1000.0)
                    .collect()
            });
            MemoryItem {
                namespace: vec!["client".into(), "bench".into()],
                key: format!("item-{index:05}"),
                value: json!(text.join(" ")),
                text: text.join(" "),
                provenance: Provenance::default(),
                created_at: "2026-12-07T00:00:00Z".into(),
                updated_at: "2026-12-07T00:00:00Z".into(),
                expires_at: None,
                embedding_model: embedded.then(|| "bench".to_string()),
                embedding,
            }
        })
        .collect()
}

fn search(criterion: &mut Criterion) {
    let mut group = criterion.benchmark_group("memory_search");
    group.sample_size(10);
    let query_embedding = QueryEmbedding {
        model: "bench".into(),
        vector: (0..DIMENSIONS)
            .map(|index| (index % 7) as f32 / 7.0)
            .collect(),
    };
    for count in [100, 1_000, 10_000] {
        let lexical = items(count, false);
        group.bench_with_input(
            BenchmarkId::new("bm25", count),
            &lexical,
            |bencher, items| {
                bencher.iter(|| {
                    rank(
                        items.clone(),
                        "a warm plain tone for the student audience",
                        None,
                        5,
                    )
                })
            },
        );
        let embedded = items(count, true);
        group.bench_with_input(
            BenchmarkId::new("bm25_and_embeddings", count),
            &embedded,
            |bencher, items| {
                bencher.iter(|| {
                    rank(
                        items.clone(),
                        "a warm plain tone for the student audience",
                        Some(&query_embedding),
                        5,
                    )
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
