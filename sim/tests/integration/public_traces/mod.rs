//! Public production traces (Azure LLM 2023, Mooncake, BurstGPT): the
//! shipped samples load as their files say and Mooncake block ids become
//! shared token blocks (here); the format is sniffed and the rate scale,
//! window and options behave as `format.rs` promises (`options`);
//! malformed rows are errors that say where (`malformed`).

mod malformed;
mod options;

use crate::common::{config, sim_engine};
use sim::workload::{
    load_trace_as, parse_trace_as, PromptSource, TraceEntry, TraceError, TraceFormat, TraceLoad,
    TraceOptions, TracePrompt, TraceReplay, TraceWindow, MOONCAKE_BLOCK_TOKENS,
};
use sim::{run, VirtualClock};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

const AZURE_CODE: &str = "azure_llm_2023_code_head200.csv";
const AZURE_CONV: &str = "azure_llm_2023_conv_head300.csv";
const BURSTGPT: &str = "burstgpt_1_head400.csv";
const MOONCAKE: &str = "mooncake_conversation_head200.jsonl";

/// Every sample, its format and its number of data rows.
const SAMPLES: [(&str, TraceFormat, usize); 4] = [
    (AZURE_CODE, TraceFormat::Azure, 200),
    (AZURE_CONV, TraceFormat::Azure, 300),
    (BURSTGPT, TraceFormat::BurstGpt, 400),
    (MOONCAKE, TraceFormat::Mooncake, 200),
];

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/traces")
        .join(name)
}

fn load(name: &str, format: Option<TraceFormat>, options: &TraceOptions) -> TraceLoad {
    let path = sample(name);
    load_trace_as(&path, format, options).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn scaled(rate_scale: f64, window: Option<TraceWindow>) -> TraceOptions {
    TraceOptions {
        rate_scale,
        window,
        ..TraceOptions::default()
    }
}

/// A sample CSV's data rows, split by hand (no sample quotes a field).
fn csv_rows(name: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(sample(name)).unwrap();
    let mut lines = text.lines().map(|l| {
        l.trim_end_matches('\r')
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
    let header = lines.next().unwrap();
    (header, lines.collect())
}

/// A sample CSV's column `name`, as numbers, one per data row.
fn column(name: &str, column: &str) -> Vec<usize> {
    let (header, rows) = csv_rows(name);
    let i = header.iter().position(|h| h == column).unwrap();
    rows.iter().map(|r| r[i].parse().unwrap()).collect()
}

fn mooncake_rows() -> Vec<serde_json::Value> {
    std::fs::read_to_string(sample(MOONCAKE))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn length(e: &TraceEntry) -> usize {
    match &e.prompt {
        TracePrompt::Length(n) => *n,
        TracePrompt::Tokens(t) => t.len(),
    }
}

fn tokens(e: &TraceEntry) -> &[u32] {
    match &e.prompt {
        TracePrompt::Tokens(t) => t,
        TracePrompt::Length(_) => panic!("expected token ids, got a length"),
    }
}

/// A trace file under the temp dir with a name no other test uses; removed
/// when dropped.
struct TempTrace(PathBuf);

impl TempTrace {
    fn new(name: &str, text: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "servetwin-public-traces-{}-{n}-{name}",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for TempTrace {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn azure_samples_load_every_row_with_the_files_lengths() {
    for (name, rows) in [(AZURE_CODE, 200), (AZURE_CONV, 300)] {
        let load = load(name, Some(TraceFormat::Azure), &TraceOptions::default());
        assert_eq!(load.format, TraceFormat::Azure);
        assert_eq!((load.rows, load.entries.len()), (rows, rows), "{name}");
        assert_eq!(
            (load.outside_window, load.failed, load.empty_prompt),
            (0, 0, 0)
        );
        let context = column(name, "ContextTokens");
        let generated = column(name, "GeneratedTokens");
        for (i, e) in load.entries.iter().enumerate() {
            assert_eq!(e.prompt, TracePrompt::Length(context[i]), "{name} row {i}");
            assert_eq!(e.output_tokens, generated[i], "{name} row {i}");
            assert_eq!((e.salt.as_ref(), e.tag.as_ref()), (None, None));
        }
        assert_eq!(load.entries[0].arrival_s, 0.0, "{name}");
        assert!(load
            .entries
            .windows(2)
            .all(|w| w[0].arrival_s <= w[1].arrival_s));
    }
    // Arrivals are the time since the first row, to the file's 100 ns.
    let code = load(AZURE_CODE, None, &TraceOptions::default());
    let at = |i: usize| code.entries[i].arrival_s;
    // 18:17:03.9799600, 18:17:04.0319600, 18:17:04.0781490; the last row
    // 18:20:23.0695450.
    assert_eq!(at(1), 52_000_000.0 / 1e9);
    assert_eq!(at(2), 98_189_000.0 / 1e9);
    assert_eq!(at(199), 199_089_585_000.0 / 1e9);
    let conv = load(AZURE_CONV, None, &TraceOptions::default());
    // 18:15:46.6805900 then 18:15:50.9951690.
    assert_eq!(conv.entries[1].arrival_s, 4_314_579_000.0 / 1e9);
}

#[test]
fn burstgpt_sample_skips_failed_rows_and_tags_model_and_log_type() {
    let load = load(
        BURSTGPT,
        Some(TraceFormat::BurstGpt),
        &TraceOptions::default(),
    );
    let (header, rows) = csv_rows(BURSTGPT);
    let col = |c: &str| header.iter().position(|h| h == c).unwrap();
    let (t, model, req, resp, log) = (
        col("Timestamp"),
        col("Model"),
        col("Request tokens"),
        col("Response tokens"),
        col("Log Type"),
    );
    // The sample's failures: 17 rows with Response tokens 0 (and Request
    // tokens 0 too); no other row has 0 request tokens.
    let kept: Vec<&Vec<String>> = rows.iter().filter(|r| r[resp] != "0").collect();
    assert_eq!((rows.len(), kept.len()), (400, 383));
    assert_eq!(load.rows, 400);
    assert_eq!(
        (load.failed, load.empty_prompt, load.outside_window),
        (17, 0, 0)
    );
    assert_eq!(load.entries.len(), 383);
    let first: f64 = rows[0][t].parse().unwrap();
    assert_eq!(first, 5.0);
    for (e, r) in load.entries.iter().zip(&kept) {
        let t: f64 = r[t].parse().unwrap();
        assert_eq!(e.arrival_s, t - first);
        assert_eq!(e.prompt, TracePrompt::Length(r[req].parse().unwrap()));
        assert_eq!(e.output_tokens, r[resp].parse::<usize>().unwrap());
        assert_eq!(e.tag, Some(format!("{}/{}", r[model], r[log])));
    }
    assert_eq!(load.entries[0].arrival_s, 0.0);
    assert_eq!(
        load.entries[0].tag.as_deref(),
        Some("ChatGPT/Conversation log")
    );
    assert_eq!(
        load.entries[2].tag.as_deref(),
        Some("GPT-4/Conversation log")
    );
}

#[test]
fn burstgpt_rows_with_a_response_but_no_prompt_are_counted_apart() {
    let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                10,ChatGPT,5,3,8,API log\n\
                11,ChatGPT,0,0,0,API log\n\
                12,ChatGPT,0,4,4,API log\n\
                13,GPT-4,7,0,7,API log\n\
                14,GPT-4,6,2,8,\n";
    let load = parse_trace_as(text, Path::new("b.csv"), None, &TraceOptions::default()).unwrap();
    assert_eq!(load.format, TraceFormat::BurstGpt);
    assert_eq!((load.rows, load.failed, load.empty_prompt), (5, 2, 1));
    let kept: Vec<(f64, usize, usize)> = load
        .entries
        .iter()
        .map(|e| (e.arrival_s, length(e), e.output_tokens))
        .collect();
    assert_eq!(kept, vec![(0.0, 5, 3), (4.0, 6, 2)]);
    // A row without a `Log Type` is tagged by its model alone.
    assert_eq!(load.entries[1].tag.as_deref(), Some("GPT-4"));
}

#[test]
fn mooncake_sample_loads_with_one_token_block_per_hash_id() {
    let load = load(
        MOONCAKE,
        Some(TraceFormat::Mooncake),
        &TraceOptions::default(),
    );
    let rows = mooncake_rows();
    assert_eq!((load.rows, load.entries.len(), rows.len()), (200, 200, 200));
    for (i, (e, r)) in load.entries.iter().zip(&rows).enumerate() {
        let input = r["input_length"].as_u64().unwrap() as usize;
        assert_eq!(tokens(e).len(), input, "row {i}");
        assert_eq!(e.output_tokens as u64, r["output_length"].as_u64().unwrap());
        assert_eq!(e.arrival_s, r["timestamp"].as_f64().unwrap() / 1000.0);
        let ids = r["hash_ids"].as_array().unwrap().len();
        assert_eq!(ids, input.div_ceil(MOONCAKE_BLOCK_TOKENS), "row {i}");
    }
    assert_eq!(load.entries[0].arrival_s, 0.0);
    // The first rows all open with hash id 0 and then go their own ways.
    let (a, b) = (tokens(&load.entries[0]), tokens(&load.entries[1]));
    let n = MOONCAKE_BLOCK_TOKENS;
    assert_eq!(a[..n], b[..n]);
    assert_ne!(a[n..2 * n], b[n..2 * n]);
}

#[test]
fn mooncake_shared_hash_ids_give_identical_token_blocks() {
    let n = MOONCAKE_BLOCK_TOKENS;
    assert_eq!(n, 512, "the Mooncake README's block size");
    assert_eq!(TraceOptions::default().block_tokens, n);
    let text = format!(
        "{{\"timestamp\": 0, \"input_length\": {a}, \"output_length\": 1, \"hash_ids\": [7, 8, 9]}}\n\
         {{\"timestamp\": 5, \"input_length\": {b}, \"output_length\": 1, \"hash_ids\": [7, 8, 10, 11]}}\n\
         {{\"timestamp\": 6, \"input_length\": {c}, \"output_length\": 1, \"hash_ids\": [7, 12]}}\n\
         {{\"timestamp\": 7, \"input_length\": {d}, \"output_length\": 1, \"hash_ids\": [7, 8, 9]}}\n",
        a = 3 * n,
        b = 3 * n + 40,
        c = n + 1,
        d = 2 * n + 10,
    );
    let options = TraceOptions::default();
    let load = parse_trace_as(&text, Path::new("m.jsonl"), None, &options).unwrap();
    assert_eq!(load.format, TraceFormat::Mooncake);
    let p: Vec<&[u32]> = load.entries.iter().map(tokens).collect();
    assert_eq!(
        p.iter().map(|t| t.len()).collect::<Vec<_>>(),
        [3 * n, 3 * n + 40, n + 1, 2 * n + 10]
    );
    // a and b share blocks 7, 8: exactly the first 2 * 512 tokens.
    assert_eq!(p[0][..2 * n], p[1][..2 * n]);
    assert_ne!(p[0][2 * n..3 * n], p[1][2 * n..3 * n]);
    assert_ne!(
        p[0][2 * n],
        p[1][2 * n],
        "block 9 and block 10 differ at once"
    );
    // c shares block 7 only.
    assert_eq!(p[0][..n], p[2][..n]);
    assert_ne!(p[0][n..n + 1], p[2][n..n + 1]);
    // A cut last block is the start of the same id's full block.
    assert_eq!(p[3][..], p[0][..2 * n + 10]);
    // Blocks within one prompt differ from each other.
    assert_ne!(p[0][..n], p[0][n..2 * n]);
    assert!(p
        .iter()
        .all(|t| t.iter().all(|&id| id < options.vocab_size)));

    // The same ids under another seed are other tokens, and a smaller vocab
    // bounds them.
    let other = TraceOptions {
        content_seed: 1,
        vocab_size: 100,
        ..TraceOptions::default()
    };
    let again = parse_trace_as(&text, Path::new("m.jsonl"), None, &other).unwrap();
    let q = tokens(&again.entries[0]);
    assert_ne!(q[..n], p[0][..n]);
    assert!(q.iter().all(|&id| id < 100));
    assert_eq!(q[..2 * n], tokens(&again.entries[1])[..2 * n]);

    // Another block size: hash_ids must hold ceil(input / block) ids.
    let small = TraceOptions {
        block_tokens: 4,
        ..TraceOptions::default()
    };
    let text = "{\"timestamp\": 0, \"input_length\": 6, \"output_length\": 1, \"hash_ids\": [1, 2]}\n\
                {\"timestamp\": 1, \"input_length\": 9, \"output_length\": 1, \"hash_ids\": [1, 3, 4]}\n";
    let load = parse_trace_as(text, Path::new("m.jsonl"), None, &small).unwrap();
    let (a, b) = (tokens(&load.entries[0]), tokens(&load.entries[1]));
    assert_eq!((a.len(), b.len()), (6, 9));
    assert_eq!(a[..4], b[..4]);
    assert_ne!(a[4..6], b[4..6]);
}

#[test]
fn replayed_mooncake_prompts_hit_the_prefix_cache_where_hash_ids_match() {
    let n = MOONCAKE_BLOCK_TOKENS;
    // Seconds apart, so each request finishes before the next arrives.
    let text = format!(
        "{{\"timestamp\": 0, \"input_length\": {}, \"output_length\": 2, \"hash_ids\": [1, 2]}}\n\
         {{\"timestamp\": 10000, \"input_length\": {}, \"output_length\": 2, \"hash_ids\": [1, 2, 3]}}\n\
         {{\"timestamp\": 20000, \"input_length\": {}, \"output_length\": 2, \"hash_ids\": [1, 4]}}\n\
         {{\"timestamp\": 30000, \"input_length\": {}, \"output_length\": 2, \"hash_ids\": [5, 2]}}\n",
        2 * n,
        2 * n + 100,
        2 * n,
        2 * n,
    );
    let load = parse_trace_as(&text, Path::new("m.jsonl"), None, &TraceOptions::default()).unwrap();
    let source = PromptSource::random_tokens(1000).unwrap();
    let mut replay = TraceReplay::new(load.entries, &source, 0, 1, 0).unwrap();
    let mut engines = vec![sim_engine(config())];
    let records = run(&mut engines, &mut VirtualClock::new(), &mut replay).unwrap();
    let cached: Vec<usize> = (0..4)
        .map(|id| records.request(id).unwrap().cached_tokens)
        .collect();
    // Block 2 after block 5 is not the prefix 1, 2: no hit for the last one.
    assert_eq!(cached, vec![0, 2 * n, n, 0]);
}
