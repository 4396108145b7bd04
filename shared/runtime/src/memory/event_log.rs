//! A run's event log as the in-memory store holds it.
//!
//! A process holding ten thousand runs keeps every frame of each, so frames
//! are kept small:
//! - as compact JSON, not as `serde_json::Value` payloads (several times
//!   their text in memory);
//! - one allocation per append (a step's frames together), exactly sized,
//!   not one per frame nor a growing buffer copied as it doubles;
//! - without the run id, correlation id and trace id, the same on every
//!   frame of a run: they are put back when a frame is read;
//! - and, once the run has settled, compressed (LZ4): a settled run's log is
//!   read rarely (a late stream's replay), and its repeated keys and ids
//!   compress several times.
//!
//! Invariant: `ends` holds the end offset of each frame in the log's whole
//! text (the chunks one after another, or the sealed text uncompressed), so
//! frame `n` (sequence `n + 1`) is `text[ends[n - 1]..ends[n]]`.

use baton_core::event::{EventDraft, EventFrame};
use baton_core::trace_context::TraceId;

use crate::error::StoreError;

#[derive(Default)]
pub(super) struct CompactEventLog {
    /// The frames' JSON, one chunk per append (none while sealed).
    chunks: Vec<Box<[u8]>>,
    /// The end of each frame in the uncompressed text.
    ends: Vec<u32>,
    /// The whole text, LZ4-compressed, while the run is settled.
    sealed: Option<Box<[u8]>>,
}

impl CompactEventLog {
    /// How many frames the log holds (the last sequence number).
    pub(super) fn len(&self) -> u64 {
        self.ends.len() as u64
    }

    /// Appends `drafts` with the next sequence numbers; returns the last.
    /// Fails (changing nothing) only when a sealed log cannot be read back.
    pub(super) fn append(&mut self, drafts: Vec<EventDraft>) -> Result<u64, StoreError> {
        if drafts.is_empty() {
            return Ok(self.len());
        }
        self.unseal()?;
        let offset = self.ends.last().copied().unwrap_or(0);
        let mut chunk = Vec::with_capacity(512 * drafts.len());
        for draft in drafts {
            let frame = draft.into_frame(self.len() + 1, "", "");
            // Serializing a frame built from typed payloads cannot fail.
            if serde_json::to_writer(&mut chunk, &frame).is_ok() {
                let end = offset as usize + chunk.len();
                self.ends.push(u32::try_from(end).unwrap_or(u32::MAX));
            }
        }
        self.chunks.push(chunk.into_boxed_slice());
        Ok(self.len())
    }

    /// Compresses the log: the run has settled and its log is now read
    /// rarely. An append unseals it.
    pub(super) fn seal(&mut self) {
        if self.sealed.is_none() && !self.chunks.is_empty() {
            let text = self.chunks.concat();
            self.sealed = Some(lz4_flex::compress(&text).into_boxed_slice());
            self.chunks = Vec::new();
        }
    }

    fn unseal(&mut self) -> Result<(), StoreError> {
        if let Some(compressed) = &self.sealed {
            let text = self.plain_text_of(compressed)?;
            self.chunks = vec![text.into_boxed_slice()];
            self.sealed = None;
        }
        Ok(())
    }

    fn plain_text_of(&self, compressed: &[u8]) -> Result<Vec<u8>, StoreError> {
        let length = self.ends.last().copied().unwrap_or(0) as usize;
        lz4_flex::decompress(compressed, length)
            .map_err(|error| StoreError::Corrupt(format!("a settled run's event log: {error}")))
    }

    /// The text of up to `limit` frames after `after_sequence`, and where
    /// each ends in it (copied, so the store's lock can be let go before
    /// they are decoded).
    pub(super) fn copy_after(
        &self,
        after_sequence: u64,
        limit: usize,
    ) -> Result<(Vec<u8>, Vec<usize>), StoreError> {
        let first = usize::try_from(after_sequence)
            .unwrap_or(usize::MAX)
            .min(self.ends.len());
        let last = first.saturating_add(limit).min(self.ends.len());
        if first == last {
            return Ok((Vec::new(), Vec::new()));
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
        let text = match &self.sealed {
            Some(compressed) => self.plain_text_of(compressed)?[start..end].to_vec(),
            None => self.chunks_between(start, end),
        };
        Ok((text, ends))
    }

    /// Bytes `start..end` of the whole text, gathered from the chunks.
    fn chunks_between(&self, start: usize, end: usize) -> Vec<u8> {
        let mut text = Vec::with_capacity(end - start);
        let mut chunk_start = 0;
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
        text
    }
}

/// The ids every frame of a run shares, kept once beside its log.
pub(super) struct RunIds<'a> {
    pub run_id: &'a str,
    pub correlation_id: &'a str,
    /// The run's trace id (runs stored before traces have none).
    pub trace_id: Option<TraceId>,
}

/// Decodes frames copied by [`CompactEventLog::copy_after`], putting back
/// the run's ids.
pub(super) fn decode_frames(
    text: &[u8],
    ends: &[usize],
    ids: &RunIds<'_>,
) -> Result<Vec<EventFrame>, StoreError> {
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let mut frame: EventFrame = serde_json::from_slice(&text[start..end])
                .map_err(|error| StoreError::Corrupt(format!("an event frame: {error}")))?;
            start = end;
            frame.run_id = ids.run_id.to_string();
            frame.correlation_id = ids.correlation_id.to_string();
            if let Some(trace_id) = ids.trace_id {
                frame.trace_id.get_or_insert(trace_id);
            }
            Ok(frame)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::event::EventType;
    use serde_json::json;

    fn draft(text: &str) -> EventDraft {
        EventDraft::new(EventType::Delta, "2026-11-26T00:00:00.000Z", 1)
            .message(text)
            .payload(json!({"text": text}))
    }

    #[test]
    fn frames_read_back_the_same_plain_and_sealed_and_after_unsealing() {
        let mut log = CompactEventLog::default();
        assert_eq!(log.append(vec![draft("one"), draft("two")]).unwrap(), 2);
        assert_eq!(log.append(vec![draft("three")]).unwrap(), 3);
        assert_eq!(log.append(Vec::new()).unwrap(), 3);
        let read = |log: &CompactEventLog, after: u64, limit: usize| {
            let (text, ends) = log.copy_after(after, limit).unwrap();
            let ids = RunIds {
                run_id: "run-1",
                correlation_id: "corr-1",
                trace_id: None,
            };
            decode_frames(&text, &ends, &ids).unwrap()
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
        assert!(
            log.chunks.is_empty(),
            "a sealed log holds only its compressed text"
        );
        assert_eq!(read(&log, 0, 10), plain);
        assert_eq!(read(&log, 1, 1), plain[1..2].to_vec());
        assert!(read(&log, 3, 10).is_empty());
        assert_eq!(log.append(vec![draft("four")]).unwrap(), 4);
        let after_unsealing = read(&log, 2, 10);
        assert_eq!(after_unsealing[0], plain[2]);
        assert_eq!(after_unsealing[1].message.as_deref(), Some("four"));
    }
}
