//! Per-tenant work against history on DynamoDB (moto): a submission (with
//! a live-run and a submission-rate limit), the live-run check and a page
//! of one status, at 10 and at 100,000 past runs of the tenant. Prints the
//! store calls each makes and the DynamoDB requests they sent (counted by a
//! proxy between the SDK and moto), the same at both sizes, and the median
//! time; for reference, counting live runs by paging the runs list (the
//! check before the counter), up to 5,000 past runs (see `REFERENCE_AT_MOST`).
//!
//!   cargo bench -p baton-aws --bench tenant_history
//!
//! The past runs are their listing items (the runs list and the list of
//! their status), written by `BatchWriteItem`: the operations measured read
//! nothing else of them. moto is one Python process that sorts a partition
//! at each query, so its times at 100,000 say little about DynamoDB's; the
//! request counts are what carries over. `BATON_HISTORY_RUNS` overrides the
//! large size. Needs `moto_server` on the PATH.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // bench code

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use baton_aws::DynamoRunStore;
use baton_core::state::run::RunStatus;
use baton_test_support::tenant_history::{measure_tenant_operations, print_figures};
use moto_server::{MotoServer, unique_name};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TENANT: &str = "bench-tenant";
const ROUNDS: usize = 15;

/// The paging reference is measured up to this many past runs: moto sorts
/// the whole partition at each of its pages, so at 100,000 its 1,001
/// queries would take the better part of an hour (the SQLite bench measures
/// it at 100,000). `BATON_HISTORY_REFERENCE_RUNS` adds a middle size that has it.
const REFERENCE_AT_MOST: usize = 5_000;

/// A TCP proxy to `upstream` counting the DynamoDB requests that pass
/// (each carries `x-amz-target: DynamoDB_20120810.{Operation}`).
async fn counting_proxy(upstream: String, requests: Arc<AtomicUsize>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut client, _) = listener.accept().await.unwrap();
            let mut server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let requests = requests.clone();
            tokio::spawn(async move {
                let (mut client_read, mut client_write) = client.split();
                let (mut server_read, mut server_write) = server.split();
                let upstream_side = async {
                    let pattern = b"x-amz-target: dynamodb_20120810.";
                    let mut carried: Vec<u8> = Vec::new();
                    let mut buffer = vec![0_u8; 64 * 1024];
                    loop {
                        let read = client_read.read(&mut buffer).await.unwrap_or(0);
                        if read == 0 {
                            break;
                        }
                        carried.extend(buffer[..read].iter().map(u8::to_ascii_lowercase));
                        let found = carried
                            .windows(pattern.len())
                            .filter(|window| window == pattern)
                            .count();
                        requests.fetch_add(found, Ordering::SeqCst);
                        let keep = carried.len().min(pattern.len() - 1);
                        carried.drain(..carried.len() - keep);
                        if server_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                    let _ = server_write.shutdown().await;
                };
                let downstream_side = async {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                    let _ = client_write.shutdown().await;
                };
                tokio::join!(upstream_side, downstream_side);
            });
        }
    });
    format!("http://{address}")
}

/// Writes `count` ended runs' listing items (both partitions), a year old.
async fn seed_past_runs(client: &aws_sdk_dynamodb::Client, table: &str, count: usize) {
    let year_ago = 1_735_689_600_000_u64;
    let mut writes = Vec::new();
    for index in 0..count {
        let listing = baton_core::state::listing::RunListing {
            run_id: format!("past-{index:06}"),
            status: RunStatus::Completed,
            objective: "a past run".into(),
            created_at: baton_core::basics::instant::Instant::from_unix_millis(
                year_ago + index as u64 * 1000,
            )
            .rfc3339(),
            parent_run_id: None,
            forked_from_run_id: None,
            thread_id: format!("thread-{index}"),
            submitted_by: None,
            workflow_name: "past".into(),
            usage: None,
        };
        let body = serde_json::to_string(&listing).unwrap();
        for pk in [
            format!("T#{TENANT}#RUNS"),
            format!("T#{TENANT}#RUNS#completed"),
        ] {
            writes.push(
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .item("pk", AttributeValue::S(pk))
                            .item("sk", AttributeValue::S(listing.ordering_key()))
                            .item("listing", AttributeValue::S(body.clone()))
                            .build()
                            .unwrap(),
                    )
                    .build(),
            );
        }
    }
    let batches: Vec<Vec<WriteRequest>> = writes.chunks(25).map(<[_]>::to_vec).collect();
    let mut pending = futures_util::stream::iter(batches.into_iter().map(|batch| {
        let client = client.clone();
        let table = table.to_string();
        async move {
            let mut unprocessed = Some(std::collections::HashMap::from([(table, batch)]));
            while let Some(items) = unprocessed.take().filter(|items| !items.is_empty()) {
                let written = client
                    .batch_write_item()
                    .set_request_items(Some(items))
                    .send()
                    .await
                    .unwrap();
                unprocessed = written.unprocessed_items;
            }
        }
    }))
    .buffer_unordered(8);
    use futures_util::StreamExt;
    while pending.next().await.is_some() {}
}

fn main() {
    let large = std::env::var("BATON_HISTORY_RUNS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(100_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let moto = MotoServer::start().unwrap();
        let configuration = moto.sdk_configuration().await;
        let direct = aws_sdk_dynamodb::Client::new(&configuration);
        let requests = Arc::new(AtomicUsize::new(0));
        let upstream = moto.endpoint.trim_start_matches("http://").to_string();
        let proxied = counting_proxy(upstream, requests.clone()).await;
        let connection = baton_aws::AwsConnection::to_emulator(&proxied).await;
        println!("tenant history on DynamoDB (moto): {ROUNDS} rounds per operation, medians");
        let middle: Option<usize> = std::env::var("BATON_HISTORY_REFERENCE_RUNS")
            .ok()
            .and_then(|text| text.parse().ok());
        for past_runs in std::iter::once(10).chain(middle).chain([large]) {
            let table = unique_name("baton-history");
            let store = DynamoRunStore::new(&connection, &table);
            store.create_table_if_missing().await.unwrap();
            let seeding = std::time::Instant::now();
            seed_past_runs(&direct, &table, past_runs).await;
            eprintln!(
                "seeded {past_runs} past runs in {:.1} s",
                seeding.elapsed().as_secs_f64()
            );
            let read_requests = {
                let requests = requests.clone();
                move || requests.load(Ordering::SeqCst)
            };
            let figures = measure_tenant_operations(
                Arc::new(store),
                TENANT,
                ROUNDS,
                Some(&read_requests),
                past_runs <= REFERENCE_AT_MOST,
            )
            .await;
            print_figures("dynamodb", past_runs, &figures);
        }
    });
}
