//! Token pieces to text deltas: a token can end inside a multi-byte
//! character, so bytes are held until they form whole characters.

/// Collects token bytes and hands out the longest complete UTF-8 prefix.
#[derive(Debug, Default)]
pub struct Utf8PieceJoiner {
    pending: Vec<u8>,
}

impl Utf8PieceJoiner {
    /// Adds `bytes` and returns the text that is now complete (maybe empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let complete_length = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(error) if error.error_len().is_none() => error.valid_up_to(),
            // Bytes that can never become valid: pass them on replaced.
            Err(_) => {
                let text = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                return text;
            }
        };
        let rest = self.pending.split_off(complete_length);
        let complete = std::mem::replace(&mut self.pending, rest);
        String::from_utf8(complete).unwrap_or_default()
    }

    /// Whatever is still held at the end, replaced where incomplete.
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_character_split_across_tokens_comes_out_whole() {
        let mut joiner = Utf8PieceJoiner::default();
        let bytes = "é✓".as_bytes();
        assert_eq!(joiner.push(&bytes[..1]), "");
        assert_eq!(joiner.push(&bytes[1..3]), "é");
        assert_eq!(joiner.push(&bytes[3..]), "✓");
        assert_eq!(joiner.push(b"{\"a\""), "{\"a\"");
        assert_eq!(joiner.finish(), "");
    }

    #[test]
    fn invalid_bytes_are_replaced_not_held_forever() {
        let mut joiner = Utf8PieceJoiner::default();
        assert_eq!(joiner.push(&[0xff, b'a']), "\u{fffd}a");
        assert_eq!(joiner.push(&[0xe2, 0x9c]), "");
        assert_eq!(joiner.finish(), "\u{fffd}");
    }
}
