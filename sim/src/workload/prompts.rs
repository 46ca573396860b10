//! Where prompt token ids come from.
//!
//! Contract: a [`PromptSource`] turns a seeded RNG and a length into exactly
//! that many token ids, deterministically. Random token ids are the default;
//! with a tokenizer, prompts are random common English words: each word is
//! encoded once, with a leading space, and prompts concatenate the words' ids
//! and cut at the length asked for. Because byte-level BPE tokenizers (Qwen3's)
//! split text into words before merging, this is what encoding the joined text
//! gives, apart from the first word's leading space and the cut last word.

use super::words::COMMON_WORDS;
use rand::distr::{Distribution, Uniform};
use rand::rngs::StdRng;
use rand::Rng;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PromptError {
    #[error("{}: cannot load the tokenizer: {message}", path.display())]
    Tokenizer { path: PathBuf, message: String },
    #[error("tokenizer: encoding {word:?} failed: {message}")]
    Encode { word: String, message: String },
    #[error("random token range {low}..{high} is empty: give low < high")]
    EmptyRange { low: u32, high: u32 },
}

/// Qwen3's ordinary tokens are `0..151_643`; ids from 151,643 up are special.
pub const QWEN3_REGULAR_VOCAB: u32 = 151_643;

#[derive(Debug, Clone, PartialEq)]
pub enum PromptSource {
    /// Uniform token ids in `low..high`.
    RandomTokens { low: u32, high: u32 },
    /// Random words; `words[i]` holds the ids of `" " + COMMON_WORDS[i]`.
    Words { words: Vec<Vec<u32>> },
}

impl Default for PromptSource {
    /// Random ids among Qwen3's ordinary tokens.
    fn default() -> Self {
        Self::RandomTokens {
            low: 0,
            high: QWEN3_REGULAR_VOCAB,
        }
    }
}

impl PromptSource {
    /// Uniform ids in `0..vocab_size` (use the model's vocabulary size, e.g. a
    /// tiny test model's, so every id is valid).
    pub fn random_tokens(vocab_size: u32) -> Result<Self, PromptError> {
        Self::random_token_range(0, vocab_size)
    }

    pub fn random_token_range(low: u32, high: u32) -> Result<Self, PromptError> {
        if low >= high {
            return Err(PromptError::EmptyRange { low, high });
        }
        Ok(Self::RandomTokens { low, high })
    }

    /// Random English words through the tokenizer in `path` (a Hugging Face
    /// `tokenizer.json`).
    pub fn from_tokenizer_file(path: &Path) -> Result<Self, PromptError> {
        let tokenizer =
            tokenizers::Tokenizer::from_file(path).map_err(|e| PromptError::Tokenizer {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        Self::from_tokenizer(&tokenizer).map_err(|e| match e {
            PromptError::Encode { word, message } => PromptError::Tokenizer {
                path: path.to_path_buf(),
                message: format!("encoding {word:?}: {message}"),
            },
            other => other,
        })
    }

    /// Random English words through `tokenizer`.
    pub fn from_tokenizer(tokenizer: &tokenizers::Tokenizer) -> Result<Self, PromptError> {
        let mut words = Vec::with_capacity(COMMON_WORDS.len());
        for word in COMMON_WORDS {
            let text = format!(" {word}");
            let encoding =
                tokenizer
                    .encode(text.as_str(), false)
                    .map_err(|e| PromptError::Encode {
                        word: text.clone(),
                        message: e.to_string(),
                    })?;
            if !encoding.get_ids().is_empty() {
                words.push(encoding.get_ids().to_vec());
            }
        }
        if words.is_empty() {
            return Err(PromptError::Encode {
                word: COMMON_WORDS.join(" "),
                message: "the tokenizer produced no tokens for any word".to_string(),
            });
        }
        Ok(Self::Words { words })
    }

    /// Appends exactly `len` token ids to `out`.
    pub fn fill(&self, rng: &mut StdRng, len: usize, out: &mut Vec<u32>) {
        out.reserve(len);
        match self {
            Self::RandomTokens { low, high } => match Uniform::new(*low, *high) {
                // One 32-bit draw per token, against two for `random_range`.
                Ok(ids) => {
                    let start = out.len();
                    out.resize(start + len, *low);
                    for id in &mut out[start..] {
                        *id = ids.sample(rng);
                    }
                }
                // Unreachable: constructors reject an empty range; fall back
                // to the lowest id rather than panic.
                Err(_) => out.extend(std::iter::repeat_n(*low, len)),
            },
            Self::Words { words } => {
                let target = out.len() + len;
                while out.len() < target {
                    let word = &words[rng.random_range(0..words.len())];
                    let take = word.len().min(target - out.len());
                    out.extend_from_slice(&word[..take]);
                }
            }
        }
    }

    /// `len` fresh token ids.
    pub fn make(&self, rng: &mut StdRng, len: usize) -> Vec<u32> {
        let mut out = Vec::with_capacity(len);
        self.fill(rng, len, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn random_tokens_stay_in_range_and_repeat_with_the_seed() {
        let src = PromptSource::random_token_range(10, 20).unwrap();
        let a = src.make(&mut StdRng::seed_from_u64(1), 500);
        let b = src.make(&mut StdRng::seed_from_u64(1), 500);
        assert_eq!(a.len(), 500);
        assert_eq!(a, b);
        assert!(a.iter().all(|t| (10..20).contains(t)));
        assert_ne!(a, src.make(&mut StdRng::seed_from_u64(2), 500));
    }

    #[test]
    fn empty_range_is_rejected() {
        assert!(matches!(
            PromptSource::random_tokens(0),
            Err(PromptError::EmptyRange { low: 0, high: 0 })
        ));
    }

    #[test]
    fn words_are_cut_to_the_exact_length() {
        let src = PromptSource::Words {
            words: vec![vec![1, 2, 3], vec![4]],
        };
        let mut rng = StdRng::seed_from_u64(0);
        for len in [0, 1, 2, 7, 100] {
            let p = src.make(&mut rng, len);
            assert_eq!(p.len(), len);
            assert!(p.iter().all(|t| (1..=4).contains(t)));
        }
    }
}
