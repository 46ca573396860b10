//! Settings of one experiment run: engine options plus experiment parameters.
//!
//! Contract: every value a user can change goes through [`Settings::set`]
//! with a `key` and its text form (from `--set key=value` or a RON file), so
//! both sources accept and reject exactly the same things. A key is an
//! experiment parameter (declared by the experiment as a [`ParamSpec`]) or an
//! [`EngineConfig`] field; experiment parameters win where names collide (an
//! experiment that sweeps an engine option takes it as a list). An unknown key
//! fails listing the valid keys; a malformed value names the key and the
//! expected type.

mod engine_keys;
mod parse;

use engine::EngineConfig;
use engine_keys::set_engine_key;
pub use engine_keys::ENGINE_KEYS;
use parse::{bad, parse_default, parse_param};
use serde::Serialize;
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum SettingsError {
    #[error("unknown setting `{key}`; valid keys: {valid}")]
    UnknownKey { key: String, valid: String },
    #[error("setting `{key}` = `{value}`: expected {expected}")]
    BadValue {
        key: String,
        value: String,
        expected: String,
    },
    #[error("`{0}` is not of the form key=value")]
    NotKeyValue(String),
    #[error("{path}:{line}:{column}: {message}")]
    RonSyntax {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    RonContent { path: String, message: String },
    #[error("{path}: {message}")]
    Io { path: String, message: String },
}

/// How a parameter's text is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A non-negative integer.
    Count,
    /// Comma-separated non-negative integers (at least one).
    CountList,
    /// A non-negative number.
    Number,
    /// Comma-separated chunk sizes: integers or `off`.
    ChunkList,
    /// Comma-separated words, each one of the given choices.
    Choices(&'static [&'static str]),
    /// One word of the given choices.
    Choice(&'static [&'static str]),
    /// A finite number > 0 (a rate scale: 0 or a negative one means nothing).
    Positive,
    /// A finite number > 0, or `all` (no limit, read as infinity).
    PositiveOrAll,
    /// A finite number > 0, or `inf` (read as infinity).
    PositiveOrInf,
    /// Comma-separated finite numbers > 0 (at least one).
    PositiveList,
    /// A file path; the default `""` means none given.
    Path,
}

/// One experiment parameter: its key, how it is read, its default and meaning.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub key: &'static str,
    pub kind: ParamKind,
    pub default: &'static str,
    pub help: &'static str,
}

/// A parsed parameter value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum ParamValue {
    Count(usize),
    Counts(Vec<usize>),
    Number(f64),
    Numbers(Vec<f64>),
    /// `None` is `off` (chunked prefill disabled).
    Chunks(Vec<Option<usize>>),
    Words(Vec<String>),
    Word(String),
    /// `None`: no file given.
    Path(Option<std::path::PathBuf>),
}

/// Engine options and experiment parameters of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    /// Base engine options; experiments override the options they sweep.
    pub engine: EngineConfig,
    params: BTreeMap<&'static str, ParamValue>,
    #[serde(skip)]
    specs: Vec<ParamSpec>,
}

impl Settings {
    /// The experiments' engine defaults (docs/experiments.md) plus each parameter's default.
    pub fn new(specs: &[ParamSpec]) -> Result<Self, SettingsError> {
        let params = specs
            .iter()
            .map(|s| Ok((s.key, parse_default(s)?)))
            .collect::<Result<_, SettingsError>>()?;
        Ok(Self {
            engine: EngineConfig::default(),
            params,
            specs: specs.to_vec(),
        })
    }

    /// Every key accepted, experiment parameters first.
    pub fn valid_keys(&self) -> Vec<&'static str> {
        let mut keys: Vec<&'static str> = self.specs.iter().map(|s| s.key).collect();
        for (k, _) in ENGINE_KEYS {
            if !keys.contains(k) {
                keys.push(k);
            }
        }
        keys
    }

    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SettingsError> {
        let key = key.trim();
        if let Some(spec) = self.specs.iter().find(|s| s.key == key) {
            let parsed = parse_param(spec, value)?;
            self.params.insert(spec.key, parsed);
            return Ok(());
        }
        if set_engine_key(&mut self.engine, key, value)? {
            return Ok(());
        }
        Err(SettingsError::UnknownKey {
            key: key.to_string(),
            valid: self.valid_keys().join(", "),
        })
    }

    /// Applies one `key=value` argument.
    pub fn set_arg(&mut self, arg: &str) -> Result<(), SettingsError> {
        let (k, v) = arg
            .split_once('=')
            .ok_or_else(|| SettingsError::NotKeyValue(arg.to_string()))?;
        self.set(k, v)
    }

    fn get(&self, key: &str) -> Option<&ParamValue> {
        self.params.get(key)
    }

    fn kind_error(&self, key: &str, wanted: &str) -> SettingsError {
        bad(key, "(internal)", format!("parameter declared as {wanted}"))
    }

    pub fn count(&self, key: &str) -> Result<usize, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Count(n)) => Ok(*n),
            _ => Err(self.kind_error(key, "Count")),
        }
    }

    pub fn counts(&self, key: &str) -> Result<Vec<usize>, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Counts(n)) => Ok(n.clone()),
            _ => Err(self.kind_error(key, "CountList")),
        }
    }

    pub fn number(&self, key: &str) -> Result<f64, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Number(x)) => Ok(*x),
            _ => Err(self.kind_error(key, "Number")),
        }
    }

    pub fn numbers(&self, key: &str) -> Result<Vec<f64>, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Numbers(x)) => Ok(x.clone()),
            _ => Err(self.kind_error(key, "PositiveList")),
        }
    }

    pub fn chunks(&self, key: &str) -> Result<Vec<Option<usize>>, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Chunks(c)) => Ok(c.clone()),
            _ => Err(self.kind_error(key, "ChunkList")),
        }
    }

    pub fn words(&self, key: &str) -> Result<Vec<String>, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Words(w)) => Ok(w.clone()),
            _ => Err(self.kind_error(key, "Choices")),
        }
    }

    pub fn word(&self, key: &str) -> Result<String, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Word(w)) => Ok(w.clone()),
            _ => Err(self.kind_error(key, "Choice")),
        }
    }

    /// A [`ParamKind::Path`] parameter: `None` when no file was given.
    pub fn path(&self, key: &str) -> Result<Option<std::path::PathBuf>, SettingsError> {
        match self.get(key) {
            Some(ParamValue::Path(p)) => Ok(p.clone()),
            _ => Err(self.kind_error(key, "Path")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[
        ParamSpec {
            key: "concurrency",
            kind: ParamKind::CountList,
            default: "1,4",
            help: "",
        },
        ParamSpec {
            key: "chunk_tokens",
            kind: ParamKind::ChunkList,
            default: "512,off",
            help: "",
        },
        ParamSpec {
            key: "max_num_seqs",
            kind: ParamKind::CountList,
            default: "1,256",
            help: "",
        },
    ];

    #[test]
    fn every_engine_config_field_is_settable() {
        let text = ron::to_string(&EngineConfig::default()).expect("serializes");
        let mut cfg = EngineConfig::default();
        for (key, _) in ENGINE_KEYS {
            assert!(
                text.contains(&format!("{key}:")),
                "{key} is not an EngineConfig field"
            );
        }
        let fields = text.matches(':').count();
        assert_eq!(
            fields,
            ENGINE_KEYS.len(),
            "EngineConfig has fields not in ENGINE_KEYS: {text}"
        );
        assert!(set_engine_key(&mut cfg, "num_gpu_blocks", "100").unwrap());
        assert_eq!(cfg.num_gpu_blocks, Some(100));
    }

    #[test]
    fn parameters_shadow_engine_keys_and_parse_lists() {
        let mut s = Settings::new(SPECS).unwrap();
        s.set_arg("max_num_seqs=1,8").unwrap();
        assert_eq!(s.counts("max_num_seqs").unwrap(), vec![1, 8]);
        assert_eq!(s.engine.max_num_seqs, 256);
        s.set_arg("chunk_tokens=1024, off").unwrap();
        assert_eq!(s.chunks("chunk_tokens").unwrap(), vec![Some(1024), None]);
        s.set_arg("enable_prefix_caching=false").unwrap();
        assert!(!s.engine.enable_prefix_caching);
    }

    #[test]
    fn unknown_key_lists_valid_keys() {
        let mut s = Settings::new(SPECS).unwrap();
        let msg = s.set_arg("concurency=4").unwrap_err().to_string();
        assert!(msg.contains("concurency"), "{msg}");
        assert!(
            msg.contains("concurrency") && msg.contains("max_num_batched_tokens"),
            "{msg}"
        );
    }

    #[test]
    fn bad_values_name_key_and_type() {
        let mut s = Settings::new(SPECS).unwrap();
        let msg = s.set_arg("concurrency=four").unwrap_err().to_string();
        assert!(
            msg.contains("concurrency") && msg.contains("integers"),
            "{msg}"
        );
        let msg = s
            .set_arg("enable_chunked_prefill=yes")
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("enable_chunked_prefill") && msg.contains("true or false"),
            "{msg}"
        );
        assert!(matches!(
            s.set_arg("concurrency"),
            Err(SettingsError::NotKeyValue(_))
        ));
        assert!(s.set_arg("chunk_tokens=0").is_err());
    }

    const TRACE_SPECS: &[ParamSpec] = &[
        ParamSpec {
            key: "trace",
            kind: ParamKind::Path,
            default: "",
            help: "",
        },
        ParamSpec {
            key: "format",
            kind: ParamKind::Choice(&["auto", "azure"]),
            default: "auto",
            help: "",
        },
        ParamSpec {
            key: "rate_scale",
            kind: ParamKind::Positive,
            default: "1",
            help: "",
        },
        ParamSpec {
            key: "window_s",
            kind: ParamKind::PositiveOrAll,
            default: "all",
            help: "",
        },
    ];

    #[test]
    fn paths_choices_and_positive_numbers_parse() {
        let mut s = Settings::new(TRACE_SPECS).unwrap();
        assert_eq!(s.path("trace").unwrap(), None, "no file by default");
        assert_eq!(s.word("format").unwrap(), "auto");
        assert_eq!(s.number("window_s").unwrap(), f64::INFINITY);
        s.set_arg("trace=data/t.csv").unwrap();
        s.set_arg("format=azure").unwrap();
        s.set_arg("rate_scale=2.5").unwrap();
        s.set_arg("window_s=30").unwrap();
        assert_eq!(s.path("trace").unwrap(), Some("data/t.csv".into()));
        assert_eq!(s.word("format").unwrap(), "azure");
        assert_eq!(s.number("rate_scale").unwrap(), 2.5);
        assert_eq!(s.number("window_s").unwrap(), 30.0);
    }

    #[test]
    fn impossible_rates_windows_and_formats_are_refused_with_the_value() {
        let mut s = Settings::new(TRACE_SPECS).unwrap();
        for v in ["0", "-1", "nan", "inf", "all", "fast"] {
            let msg = s
                .set_arg(&format!("rate_scale={v}"))
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("`rate_scale` = `") && msg.contains(v) && msg.contains("> 0"),
                "{msg}"
            );
        }
        let msg = s.set_arg("window_s=0").unwrap_err().to_string();
        assert!(msg.contains("window_s") && msg.contains("`all`"), "{msg}");
        let msg = s.set_arg("format=parquet").unwrap_err().to_string();
        assert!(
            msg.contains("parquet") && msg.contains("auto, azure"),
            "{msg}"
        );
        assert!(s.set_arg("format=auto,azure").is_err(), "one format only");
        assert!(s.set_arg("trace=").is_err(), "an empty path");
        assert_eq!(
            s.number("rate_scale").unwrap(),
            1.0,
            "unchanged by failures"
        );
    }
}
