//! Ranking a namespace's items for a query. Lexical: BM25 over the items'
//! namespace, key and text (the `bm25` crate's scorer over [`Words`], lowercased words less a
//! short list of English stop words; written here, a few lines: the
//! crate's own tokenizer carries the stemmers and stop words of every
//! language, 1.4 MB the api function cannot take), always.
//! Semantic: the cosine similarity of the query's embedding with each
//! item's, when both are given (an item embedded by another model than
//! the query's is left out of that ranking). The two rankings are fused by
//! reciprocal rank fusion (each item scores `1 / (60 + rank)` per ranking
//! it appears in), so neither scale has to match the other's.

use std::collections::BTreeMap;

use bm25::{Document, SearchEngine, SearchEngineBuilder, Tokenizer};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::item::MemoryItem;

/// Words that say nothing of what an item is about.
const STOP_WORDS: [&str; 48] = [
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for",
    "from", "how", "i", "in", "is", "it", "its", "no", "not", "of", "on", "or", "our", "should",
    "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to",
    "was", "we", "what", "when", "which", "who", "with", "you",
];

/// The lexical tokenizer: lowercased runs of letters and digits, less
/// [`STOP_WORDS`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Words;

impl Tokenizer for Words {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        input_text
            .split(|character: char| !character.is_alphanumeric())
            .filter(|word| !word.is_empty())
            .map(str::to_lowercase)
            .filter(|word| !STOP_WORDS.contains(&word.as_str()))
            .collect()
    }
}

/// Reciprocal rank fusion's constant (the usual one).
const FUSION_CONSTANT: f64 = 60.0;

/// A query's embedding and the model that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryEmbedding {
    pub model: String,
    pub vector: Vec<f32>,
}

/// How an item was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    Lexical,
    Embedding,
    Both,
}

/// An item as search ranks it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RankedItem {
    pub item: MemoryItem,
    /// Its fused score (higher first).
    pub score: f64,
    pub found_by: FoundBy,
}

/// The best `limit` of `items` for `query`, best first (ties by namespace
/// and key). Items neither ranking finds (no word in common, no embedding)
/// are left out.
pub fn rank(
    mut items: Vec<MemoryItem>,
    query: &str,
    embedding: Option<&QueryEmbedding>,
    limit: usize,
) -> Vec<RankedItem> {
    if items.is_empty() || limit == 0 {
        return Vec::new();
    }
    // In namespace and key order: `rank_texts` breaks ties by position.
    items.sort_by(|left, right| order_key(left).cmp(&order_key(right)));
    let texts: Vec<String> = items.iter().map(searched_words).collect();
    let vectors: Vec<Option<&[f32]>> = items
        .iter()
        .map(|item| {
            item.embedding.as_deref().filter(|_| {
                embedding.is_some_and(|query| {
                    item.embedding_model.as_deref() == Some(query.model.as_str())
                })
            })
        })
        .collect();
    let ranked = rank_texts(
        &texts,
        query,
        embedding.map(|query| (query.vector.as_slice(), vectors.as_slice())),
        limit,
    );
    let mut items: Vec<Option<MemoryItem>> = items.into_iter().map(Some).collect();
    ranked
        .into_iter()
        .filter_map(|found| {
            items[found.index].take().map(|item| RankedItem {
                item,
                score: found.score,
                found_by: found.found_by,
            })
        })
        .collect()
}

/// The query's vector and each text's (`None`: not embedded), in the
/// texts' order.
pub type TextVectors<'a> = (&'a [f32], &'a [Option<&'a [f32]>]);

/// One text [`rank_texts`] found: its position, fused score and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankedText {
    pub index: usize,
    pub score: f64,
    pub found_by: FoundBy,
}

/// The best `limit` of `texts` for `query`, best first (ties by position):
/// BM25 over the texts, fused by reciprocal rank fusion with the cosine
/// similarity of each text's vector (`None`: not embedded) to the query's,
/// when `embedded` gives them. What memory's items and the registry's
/// capabilities are both ranked by.
pub fn rank_texts(
    texts: &[String],
    query: &str,
    embedded: Option<TextVectors<'_>>,
    limit: usize,
) -> Vec<RankedText> {
    if texts.is_empty() || limit == 0 {
        return Vec::new();
    }
    let mut fused: BTreeMap<usize, (f64, bool, bool)> = BTreeMap::new();
    for (rank, index) in lexical_order(texts, query).into_iter().enumerate() {
        let entry = fused.entry(index).or_insert((0.0, false, false));
        entry.0 += 1.0 / (FUSION_CONSTANT + rank as f64 + 1.0);
        entry.1 = true;
    }
    if let Some((query_vector, vectors)) = embedded {
        for (rank, index) in embedding_order(vectors, query_vector)
            .into_iter()
            .enumerate()
        {
            let entry = fused.entry(index).or_insert((0.0, false, false));
            entry.0 += 1.0 / (FUSION_CONSTANT + rank as f64 + 1.0);
            entry.2 = true;
        }
    }
    let mut ranked: Vec<RankedText> = fused
        .into_iter()
        .map(|(index, (score, lexical, semantic))| RankedText {
            index,
            score,
            found_by: match (lexical, semantic) {
                (true, true) => FoundBy::Both,
                (false, true) => FoundBy::Embedding,
                _ => FoundBy::Lexical,
            },
        })
        .collect();
    ranked.sort_by(|left, right| {
        right
            .score
            .total_cmp(&left.score)
            .then_with(|| left.index.cmp(&right.index))
    });
    ranked.truncate(limit);
    ranked
}

fn order_key(item: &MemoryItem) -> (String, &str) {
    (item.namespace_key(), item.key.as_str())
}

/// What BM25 reads of an item: its namespace's parts and key (so
/// `["people", …, "preferences"]` / `answer_format` is found by
/// "preferences" or "format"), then its text.
fn searched_words(item: &MemoryItem) -> String {
    let mut words = item.namespace.join(" ");
    words.push(' ');
    words.push_str(&item.key);
    words.push(' ');
    words.push_str(&item.text);
    words
}

/// The texts BM25 scores above zero for `query`, best first (ties by
/// position).
fn lexical_order(texts: &[String], query: &str) -> Vec<usize> {
    let documents: Vec<Document<usize>> = texts
        .iter()
        .enumerate()
        .map(|(index, text)| Document::new(index, text.clone()))
        .collect();
    let engine: SearchEngine<usize, u32, Words> =
        SearchEngineBuilder::with_tokenizer_and_documents(Words, documents).build();
    let mut found: Vec<(usize, f32)> = engine
        .search(query, texts.len())
        .into_iter()
        .filter(|result| result.score > 0.0)
        .map(|result| (result.document.id, result.score))
        .collect();
    found.sort_by(|left, right| {
        right
            .1
            .total_cmp(&left.1)
            .then_with(|| left.0.cmp(&right.0))
    });
    found.into_iter().map(|(index, _)| index).collect()
}

/// The embedded texts similar to the query at all (cosine above 0), most
/// similar first (ties by position).
fn embedding_order(vectors: &[Option<&[f32]>], query: &[f32]) -> Vec<usize> {
    let mut scored: Vec<(usize, f64)> = vectors
        .iter()
        .enumerate()
        .filter_map(|(index, vector)| {
            cosine((*vector)?, query)
                .filter(|similarity| *similarity > 0.0)
                .map(|similarity| (index, similarity))
        })
        .collect();
    scored.sort_by(|left, right| {
        right
            .1
            .total_cmp(&left.1)
            .then_with(|| left.0.cmp(&right.0))
    });
    scored.into_iter().map(|(index, _)| index).collect()
}

/// The cosine similarity of two vectors of one length, `None` when either
/// is zero or their lengths differ.
pub fn cosine(left: &[f32], right: &[f32]) -> Option<f64> {
    if left.len() != right.len() || left.is_empty() {
        return None;
    }
    let (mut dot, mut left_norm, mut right_norm) = (0.0_f64, 0.0_f64, 0.0_f64);
    for (a, b) in left.iter().zip(right) {
        let (a, b) = (f64::from(*a), f64::from(*b));
        dot += a * b;
        left_norm += a * a;
        right_norm += b * b;
    }
    if left_norm == 0.0 || right_norm == 0.0 {
        return None;
    }
    Some(dot / (left_norm.sqrt() * right_norm.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Provenance;
    use serde_json::json;

    fn item(key: &str, text: &str, embedding: Option<Vec<f32>>) -> MemoryItem {
        MemoryItem {
            namespace: vec!["client".into(), "guide".into()],
            key: key.into(),
            value: json!(text),
            text: text.into(),
            provenance: Provenance::default(),
            created_at: "2026-12-07T00:00:00Z".into(),
            updated_at: "2026-12-07T00:00:00Z".into(),
            expires_at: None,
            embedding_model: embedding.as_ref().map(|_| "embedder".to_string()),
            embedding,
        }
    }

    #[test]
    fn lexical_search_finds_the_item_that_shares_the_querys_words() {
        let items = vec![
            item("colours", "The brand colours are navy and white", None),
            item(
                "tone",
                "Write in a warm, plain tone; no exclamation marks",
                None,
            ),
            item("legal", "Every claim needs a source", None),
        ];
        let ranked = rank(items, "which tone should the writing take", None, 3);
        assert_eq!(ranked[0].item.key, "tone");
        assert_eq!(ranked[0].found_by, FoundBy::Lexical);
        assert!(ranked.iter().all(|found| found.item.key != "colours"));
        // The namespace and the key are read too: a word of either finds
        // every item they hold.
        let by_namespace = rank(
            vec![
                item("colours", "navy", None),
                item("answer_format", "bullets", None),
            ],
            "guide format",
            None,
            3,
        );
        assert_eq!(by_namespace.len(), 2);
        assert_eq!(by_namespace[0].item.key, "answer_format");
    }

    #[test]
    fn an_embedding_finds_what_no_word_shares_and_fusion_ranks_it() {
        let items = vec![
            item(
                "tone",
                "Warm and plain, never shouting",
                Some(vec![0.9, 0.1, 0.0]),
            ),
            item("colours", "Navy and white", Some(vec![0.0, 0.2, 0.9])),
            item(
                "voice",
                "voice of the brand: friendly",
                Some(vec![0.1, 0.9, 0.1]),
            ),
        ];
        let query = QueryEmbedding {
            model: "embedder".into(),
            vector: vec![1.0, 0.0, 0.0],
        };
        let ranked = rank(items.clone(), "how should copy sound", Some(&query), 3);
        assert_eq!(ranked[0].item.key, "tone", "{ranked:?}");
        assert_eq!(ranked[0].found_by, FoundBy::Embedding);
        // Found both ways outranks found one way.
        let ranked = rank(
            items,
            "voice",
            Some(&QueryEmbedding {
                model: "embedder".into(),
                vector: vec![0.1, 1.0, 0.0],
            }),
            3,
        );
        assert_eq!(ranked[0].item.key, "voice");
        assert_eq!(ranked[0].found_by, FoundBy::Both);
    }

    #[test]
    fn another_models_embeddings_are_not_compared() {
        let items = vec![item("tone", "warm", Some(vec![1.0, 0.0]))];
        let query = QueryEmbedding {
            model: "another".into(),
            vector: vec![1.0, 0.0],
        };
        assert!(rank(items, "cold", Some(&query), 3).is_empty());
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), Some(0.0));
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
    }
}
