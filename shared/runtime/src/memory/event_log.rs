//! A run's event log as the in-memory store holds it.
//!
//! A process holding ten thousand runs keeps every frame of each, so frames
//! are kept small and cheap to write:
//! - as compact binary records (`postcard`: field values in order, lengths
//!   as varints), not as JSON objects: no keys, no string escaping, no
//!   number formatting; a payload is its JSON text, copied as it is;
//! - one allocation per append (a step's frames together), exactly sized,
//!   not one per frame nor a growing buffer copied as it doubles;
//! - without what the log knows already: the sequence number (a frame's
//!   place in the log), the run id, correlation id and trace id (the same on
//!   every frame of a run); they are put back when a frame is read;
//! - and compressed (LZ4) in blocks: once the frames written since the last
//!   block reach [`BLOCK_BYTES`], and when the run settles. A running run's
//!   older frames are read rarely (a late stream's replay; a live stream
//!   reads the newest, still plain), and their repeated values compress
//!   several times. Each byte is compressed once: a block is never
//!   reopened, and an append never decompresses anything.
//!
//! Invariants:
//! - `ends` holds the end offset of each frame in the log's whole text (the
//!   blocks' texts, then the chunks, one after another), so frame `n`
//!   (sequence `n + 1`) is `text[ends[n - 1]..ends[n]]`;
//! - the blocks cover `0..plain_start` of that text, in order, each ending
//!   at a frame's end; the chunks cover the rest.
//! - The records are this process's own (a log is never written to disk nor
//!   read by another build), so their layout may change between versions.

use baton_core::basics::trace_context::{SpanId, TraceId};
use baton_core::wire::event::{EventDraft, EventFrame, EventType, FrameProvenance};
use baton_core::wire::frame_payload::FramePayload;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// The plain text a running run's log holds before it is compressed as a
/// block: about two node steps' frames. Smaller blocks compress worse;
/// larger ones keep more of ten thousand running runs' logs plain.
pub(super) const BLOCK_BYTES: usize = 4096;

#[derive(Default)]
pub(super) struct CompactEventLog {
    /// The older frames' text, LZ4-compressed, in blocks, oldest first.
    blocks: Vec<CompressedBlock>,
    /// The newer frames' JSON, one chunk per append.
    chunks: Vec<Box<[u8]>>,
    /// The end of each frame in the uncompressed text.
    ends: Vec<u32>,
}

/// Frames' text, compressed: it is `start..start + length` of the log's
/// whole text.
struct CompressedBlock {
    start: u32,
    length: u32,
    compressed: Box<[u8]>,
}

impl CompactEventLog {
    /// How many frames the log holds (the last sequence number).
    pub(super) fn len(&self) -> u64 {
        self.ends.len() as u64
    }

    /// Where the plain chunks begin in the whole text.
    fn plain_start(&self) -> usize {
        self.blocks
            .last()
            .map_or(0, |block| (block.start + block.length) as usize)
    }

    /// Appends `drafts` with the next sequence numbers; returns the last.
    /// A frame's trace id is left out when it is the run's (`run_trace_id`,
    /// put back when the frame is read).
    pub(super) fn append(&mut self, drafts: &[EventDraft], run_trace_id: Option<TraceId>) -> u64 {
        if drafts.is_empty() {
            return self.len();
        }
        let offset = self.ends.last().copied().unwrap_or(0);
        let mut chunk = Vec::with_capacity(512 * drafts.len());
        for draft in drafts {
            let mut frame = StoredFrame::of(draft);
            if frame.trace_id.is_some() && frame.trace_id == run_trace_id {
                frame.trace_id = None;
            }
            // Encoding into a vector fails only on a value this format
            // cannot write (a sequence of unknown length, `deserialize_any`
            // types); a frame is strings, numbers, options and vectors.
            let before = chunk.len();
            if let Err(error) = postcard::to_io(&frame, &mut chunk) {
                chunk.truncate(before);
                tracing::error!(%error, event_type = %draft.event_type.as_str(), "a frame could not be encoded; the run's log is missing it");
                continue;
            }
            let end = offset as usize + chunk.len();
            self.ends.push(u32::try_from(end).unwrap_or(u32::MAX));
        }
        self.chunks.push(chunk.into_boxed_slice());
        let whole_length = self.ends.last().copied().unwrap_or(0) as usize;
        if whole_length - self.plain_start() >= BLOCK_BYTES {
            self.compress_chunks();
        }
        self.len()
    }

    /// Compresses what is still plain: the run has settled and its log is
    /// now read rarely. A later append starts new plain chunks.
    pub(super) fn seal(&mut self) {
        self.compress_chunks();
    }

    /// Whether every frame is compressed.
    #[cfg(test)]
    fn is_sealed(&self) -> bool {
        self.chunks.is_empty()
    }

    fn compress_chunks(&mut self) {
        if self.chunks.is_empty() {
            return;
        }
        let text = self.chunks.concat();
        let start = self.plain_start();
        self.blocks.push(CompressedBlock {
            start: u32::try_from(start).unwrap_or(u32::MAX),
            length: u32::try_from(text.len()).unwrap_or(u32::MAX),
            compressed: lz4_flex::compress(&text).into_boxed_slice(),
        });
        self.chunks = Vec::new();
    }

    /// The records of up to `limit` frames after `after_sequence` (copied,
    /// so the store's lock can be let go before they are decoded).
    pub(super) fn copy_after(
        &self,
        after_sequence: u64,
        limit: usize,
    ) -> Result<CopiedFrames, StoreError> {
        let first = usize::try_from(after_sequence)
            .unwrap_or(usize::MAX)
            .min(self.ends.len());
        let last = first.saturating_add(limit).min(self.ends.len());
        let first_sequence = first as u64 + 1;
        if first == last {
            return Ok(CopiedFrames {
                records: Vec::new(),
                ends: Vec::new(),
                first_sequence,
            });
        }
        let start = if first == 0 {
            0
        } else {
            self.ends[first - 1] as usize
        };
        let end = self.ends[last - 1] as usize;
        let ends = self.ends[first..last]
            .iter()
            .map(|frame_end| *frame_end as usize - start)
            .collect();
        let mut text = Vec::with_capacity(end - start);
        for block in &self.blocks {
            let (block_start, block_end) =
                (block.start as usize, (block.start + block.length) as usize);
            if block_end > start && block_start < end {
                let plain = lz4_flex::decompress(&block.compressed, block.length as usize)
                    .map_err(|error| {
                        StoreError::Corrupt(format!("a run's compressed event log: {error}"))
                    })?;
                let from = start.max(block_start) - block_start;
                let to = end.min(block_end) - block_start;
                text.extend_from_slice(&plain[from..to]);
            }
        }
        let mut chunk_start = self.plain_start();
        for chunk in &self.chunks {
            let chunk_end = chunk_start + chunk.len();
            if chunk_end > start && chunk_start < end {
                let from = start.max(chunk_start) - chunk_start;
                let to = end.min(chunk_end) - chunk_start;
                text.extend_from_slice(&chunk[from..to]);
            }
            chunk_start = chunk_end;
            if chunk_start >= end {
                break;
            }
        }
        Ok(CopiedFrames {
            records: text,
            ends,
            first_sequence,
        })
    }
}

/// The ids every frame of a run shares, kept once beside its log.
pub(super) struct RunIds<'a> {
    pub run_id: &'a str,
    pub correlation_id: &'a str,
    /// The run's trace id (runs stored before traces have none).
    pub trace_id: Option<TraceId>,
}

/// A frame as the log keeps it: an [`EventFrame`]'s fields but its
/// sequence number and the run's ids, written from the draft without
/// copying it. Fields are encoded in this order, each present (`postcard`
/// has no keys): no `skip_serializing_if` here.
#[derive(Serialize)]
struct StoredFrame<'a> {
    event_type: EventType,
    timestamp: &'a str,
    node_id: Option<&'a str>,
    plan_version: u32,
    message: Option<&'a str>,
    /// The payload's JSON text.
    payload: Option<&'a str>,
    facet_provenance: Option<&'a FrameProvenance>,
    parent_run_id: Option<&'a str>,
    trace_id: Option<TraceId>,
    span_id: Option<SpanId>,
}

impl<'a> StoredFrame<'a> {
    fn of(draft: &'a EventDraft) -> Self {
        // Every field named: a field added to drafts is a compile error here.
        let EventDraft {
            event_type,
            timestamp,
            node_id,
            plan_version,
            message,
            payload,
            facet_provenance,
            parent_run_id,
            trace_id,
            span_id,
        } = draft;
        StoredFrame {
            event_type: *event_type,
            timestamp,
            node_id: node_id.as_deref(),
            plan_version: *plan_version,
            message: message.as_deref(),
            payload: payload.as_ref().map(FramePayload::json),
            facet_provenance: facet_provenance.as_ref(),
            parent_run_id: parent_run_id.as_deref(),
            trace_id: *trace_id,
            span_id: *span_id,
        }
    }
}

/// A frame read back from the log (the same fields, in the same order as
/// [`StoredFrame`]), before its sequence number and the run's ids are put
/// back.
#[derive(Deserialize)]
struct ReadFrame {
    event_type: EventType,
    timestamp: String,
    node_id: Option<String>,
    plan_version: u32,
    message: Option<String>,
    payload: Option<String>,
    facet_provenance: Option<FrameProvenance>,
    parent_run_id: Option<String>,
    trace_id: Option<TraceId>,
    span_id: Option<SpanId>,
}

/// Frames copied out of a log by [`CompactEventLog::copy_after`], to be
/// decoded once the store's lock is let go.
pub(super) struct CopiedFrames {
    /// The frames' records, one after another.
    records: Vec<u8>,
    /// Where each record ends in `records`.
    ends: Vec<usize>,
    /// The first frame's sequence number.
    first_sequence: u64,
}

impl CopiedFrames {
    /// The records' bytes (tests look inside them).
    #[cfg(test)]
    pub(super) fn records(&self) -> &[u8] {
        &self.records
    }

    /// Decodes the frames, putting back their sequence numbers and the
    /// run's ids.
    pub(super) fn decode(&self, ids: &RunIds<'_>) -> Result<Vec<EventFrame>, StoreError> {
        let corrupt = |what: String| StoreError::Corrupt(format!("an event frame: {what}"));
        let mut start = 0;
        let mut sequence = self.first_sequence;
        self.ends
            .iter()
            .map(|&end| {
                let read: ReadFrame = postcard::from_bytes(&self.records[start..end])
                    .map_err(|error| corrupt(error.to_string()))?;
                let payload = read
                    .payload
                    .map(FramePayload::from_json_text)
                    .transpose()
                    .map_err(|error| corrupt(format!("its payload: {error}")))?;
                let frame = EventDraft {
                    event_type: read.event_type,
                    timestamp: read.timestamp,
                    node_id: read.node_id,
                    plan_version: read.plan_version,
                    message: read.message,
                    payload,
                    facet_provenance: read.facet_provenance,
                    parent_run_id: read.parent_run_id,
                    trace_id: read.trace_id.or(ids.trace_id),
                    span_id: read.span_id,
                }
                .into_frame(sequence, ids.run_id, ids.correlation_id);
                start = end;
                sequence += 1;
                Ok(frame)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::wire::event::EventType;
    use serde_json::json;

    fn draft(text: &str) -> EventDraft {
        EventDraft::new(EventType::Delta, "2026-11-26T00:00:00.000Z", 1)
            .message(text)
            .payload(json!({"text": text}))
    }

    #[test]
    fn frames_read_back_the_same_plain_and_sealed_and_after_more_appends() {
        let mut log = CompactEventLog::default();
        assert_eq!(log.append(&[draft("one"), draft("two")], None), 2);
        assert_eq!(log.append(&[draft("three")], None), 3);
        assert_eq!(log.append(&[], None), 3);
        let read = |log: &CompactEventLog, after: u64, limit: usize| {
            let ids = RunIds {
                run_id: "run-1",
                correlation_id: "corr-1",
                trace_id: None,
            };
            log.copy_after(after, limit).unwrap().decode(&ids).unwrap()
        };
        let plain = read(&log, 0, 10);
        assert_eq!(
            read(&log, 1, 2),
            plain[1..3].to_vec(),
            "a read across chunks"
        );
        assert_eq!(plain.len(), 3);
        assert_eq!(plain[1].id, 2);
        assert_eq!(plain[1].message.as_deref(), Some("two"));
        assert_eq!(
            (plain[2].run_id.as_str(), plain[2].correlation_id.as_str()),
            ("run-1", "corr-1")
        );
        log.seal();
        assert!(log.is_sealed(), "a sealed log holds only compressed text");
        assert_eq!(read(&log, 0, 10), plain);
        assert_eq!(read(&log, 1, 1), plain[1..2].to_vec());
        assert!(read(&log, 3, 10).is_empty());
        assert_eq!(log.append(&[draft("four")], None), 4);
        let after_unsealing = read(&log, 2, 10);
        assert_eq!(after_unsealing[0], plain[2]);
        assert_eq!(after_unsealing[1].message.as_deref(), Some("four"));
    }

    #[test]
    fn a_frame_with_every_field_set_reads_back_as_the_frame_its_draft_makes() {
        use baton_core::contracts::compiler::FacetProvenance;
        use std::sync::Arc;
        let mut full = EventDraft::new(EventType::NodeComplete, "2026-11-26T00:00:00.000Z", 2)
            .node("node_1")
            .message("done")
            .payload(json!({"output": {"a": "\"quoted\""}}))
            .provenance(FrameProvenance {
                input: Arc::new(Vec::new()),
                output: Arc::new(vec![FacetProvenance {
                    facet: "a".into(),
                    schema_pointer: "/properties/a".into(),
                    tightened_by_caller_contract: true,
                }]),
            });
        full.parent_run_id = Some("run-parent".into());
        full.trace_id = Some(TraceId(0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c));
        full.span_id = Some(SpanId(0x00f0_67aa_0ba9_02b7));
        let expected = full.clone().into_frame(1, "run-1", "corr-1");
        let mut log = CompactEventLog::default();
        log.append(&[full], None);
        let copied = log.copy_after(0, 10).unwrap();
        let stored = String::from_utf8_lossy(copied.records());
        assert!(
            !stored.contains("run-1") && !stored.contains("corr-1"),
            "the run's ids are not kept in each frame: {stored}"
        );
        let ids = RunIds {
            run_id: "run-1",
            correlation_id: "corr-1",
            trace_id: None,
        };
        assert_eq!(copied.decode(&ids).unwrap(), vec![expected]);
    }

    #[test]
    fn a_running_runs_older_frames_are_compressed_in_blocks_and_read_back_across_them() {
        let ids = RunIds {
            run_id: "run-1",
            correlation_id: "corr-1",
            trace_id: None,
        };
        let mut log = CompactEventLog::default();
        let mut expected = Vec::new();
        for append in 0..40 {
            let drafts: Vec<EventDraft> = (0..3)
                .map(|index| draft(&format!("frame {append}.{index} {}", "x".repeat(100))))
                .collect();
            for draft in &drafts {
                let sequence = expected.len() as u64 + 1;
                expected.push(draft.clone().into_frame(sequence, "run-1", "corr-1"));
            }
            log.append(&drafts, None);
        }
        // One more small append: it is the plain tail.
        let last = draft("the last frame");
        expected.push(last.clone().into_frame(121, "run-1", "corr-1"));
        log.append(&[last], None);
        assert!(log.blocks.len() >= 3, "{} blocks", log.blocks.len());
        assert!(
            !log.chunks.is_empty(),
            "the newest frames stay plain until they make a block"
        );
        let plain_text: usize = log.chunks.iter().map(|chunk| chunk.len()).sum();
        assert!(plain_text < BLOCK_BYTES, "{plain_text} bytes plain");
        let read = |log: &CompactEventLog, after: u64, limit: usize| {
            log.copy_after(after, limit).unwrap().decode(&ids).unwrap()
        };
        assert_eq!(read(&log, 0, 1_000), expected, "every frame, in order");
        for (after, limit) in [
            (0, 1),
            (5, 30),
            (29, 2),
            (60, 50),
            (100, 100),
            (119, 5),
            (120, 1),
        ] {
            let from = (after as usize).min(expected.len());
            let to = (from + limit).min(expected.len());
            assert_eq!(
                read(&log, after, limit),
                expected[from..to].to_vec(),
                "after {after}, {limit}"
            );
        }
        log.seal();
        assert!(log.is_sealed());
        assert_eq!(read(&log, 0, 1_000), expected);
    }
}
