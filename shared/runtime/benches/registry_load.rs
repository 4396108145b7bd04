//! Start-up cost of loading and validating the repository's registry (every
//! facet schema compiled, every capability checked): part of each function's
//! cold start.
//!
//! `cargo bench -p baton-runtime --bench registry_load`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};

#[global_allocator]
static GLOBAL_ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn bench_registry_load(criterion: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../registry");
    criterion.bench_function("load_repository_registry", |bencher| {
        bencher.iter(|| baton_runtime::registry_loader::load_registry(&root).unwrap())
    });
}

criterion_group!(benches, bench_registry_load);
criterion_main!(benches);
