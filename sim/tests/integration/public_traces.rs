//! Public production traces (Azure LLM 2023, Mooncake, BurstGPT): the
//! shipped samples load as their files say, the format is sniffed, the rate
//! scale and window behave as `format.rs` promises, Mooncake block ids become
//! shared token blocks, and malformed rows and options are errors that say
//! where.

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

/// Writes `text` to a temp file, loads it (as `format`, and sniffed) and
/// checks the error's Display starts `file:line: field `field``.
fn assert_row_error(format: TraceFormat, case: &str, text: &str, line: usize, field: &str) {
    let ext = if format == TraceFormat::Mooncake {
        "jsonl"
    } else {
        "csv"
    };
    let file = TempTrace::new(&format!("{format}.{ext}"), text);
    let expected = format!("{}:{line}: field `{field}`: ", file.0.display());
    for given in [Some(format), None] {
        let err = load_trace_as(&file.0, given, &TraceOptions::default())
            .err()
            .unwrap_or_else(|| panic!("{format} {case}: loaded"));
        let shown = err.to_string();
        assert!(
            matches!(&err, TraceError::Field { line: l, field: f, .. } if *l == line && f == field),
            "{format} {case} ({given:?}): {shown}"
        );
        assert!(
            shown.starts_with(&expected),
            "{format} {case}: {shown:?} should start {expected:?}"
        );
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

#[test]
fn sniffing_picks_each_samples_format() {
    for (name, format, rows) in SAMPLES {
        let path = sample(name);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(TraceFormat::sniff(&text, &path).unwrap(), format, "{name}");
        let sniffed = load(name, None, &TraceOptions::default());
        assert_eq!(sniffed.format, format, "{name}");
        assert_eq!(sniffed.rows, rows, "{name}");
        assert_eq!(
            sniffed,
            load(name, Some(format), &TraceOptions::default()),
            "{name}"
        );
    }
}

#[test]
fn sniffing_reads_servetwin_traces_and_refuses_unknown_headers() {
    let options = TraceOptions::default();
    let csv = "# made by hand\narrival_s,prompt_tokens,output_tokens\n1,10,2\n3,20,4\n";
    let jsonl = "{\"arrival_s\": 1, \"prompt_tokens\": 10, \"output_tokens\": 2}\n";
    for (text, name) in [(csv, "t.csv"), (jsonl, "t.jsonl"), (jsonl, "t.txt")] {
        let load = parse_trace_as(text, Path::new(name), None, &options).unwrap();
        assert_eq!(load.format, TraceFormat::Servetwin, "{name}");
        assert_eq!(
            load.entries[0].arrival_s, 1.0,
            "servetwin times are not moved"
        );
    }
    // A servetwin trace is scaled from 0 of its own clock, not its first row.
    let half = parse_trace_as(csv, Path::new("t.csv"), None, &scaled(2.0, None)).unwrap();
    let at: Vec<f64> = half.entries.iter().map(|e| e.arrival_s).collect();
    assert_eq!(at, vec![0.5, 1.5]);

    for (text, name) in [
        ("time,prompt,output\n1,2,3\n", "u.csv"),
        ("Timestamp,Model,Request tokens\n1,a,2\n", "u.csv"),
        ("{\"ts\": 0, \"len\": 3}\n", "u.jsonl"),
        ("{not json\n", "u.jsonl"),
        ("", "u.csv"),
        ("# only a comment\n\n", "u.csv"),
    ] {
        let err = parse_trace_as(text, Path::new(name), None, &options).unwrap_err();
        let shown = err.to_string();
        assert!(matches!(err, TraceError::Sniff { .. }), "{text:?}: {shown}");
        assert!(shown.starts_with(&format!("{name}: ")), "{shown}");
        assert!(shown.contains("azure, mooncake, burstgpt"), "{shown}");
    }
    let unknown = sample("unknown.csv");
    let file = TempTrace::new("unknown.csv", "when,what\n0,1\n");
    let err = load_trace_as(&file.0, None, &options).unwrap_err();
    assert!(matches!(err, TraceError::Sniff { .. }), "{err}");
    assert!(err.to_string().contains("when,what"), "{err}");
    // A missing file is an I/O error naming it.
    let err = load_trace_as(&unknown, None, &options).unwrap_err();
    assert!(matches!(err, TraceError::Io { .. }) && err.to_string().contains("unknown.csv"));
}

#[test]
fn format_names_read_back_and_unknown_names_list_the_known() {
    for f in TraceFormat::ALL {
        assert_eq!(TraceFormat::from_name(f.name()).unwrap(), f);
        assert_eq!(f.to_string().parse::<TraceFormat>().unwrap(), f);
        assert_eq!(TraceFormat::from_name_or_auto(f.name()).unwrap(), Some(f));
    }
    assert_eq!(
        TraceFormat::from_name(" BurstGPT ").unwrap(),
        TraceFormat::BurstGpt
    );
    assert_eq!(TraceFormat::from_name_or_auto("AUTO").unwrap(), None);
    let err = TraceFormat::from_name("parquet").unwrap_err();
    assert!(matches!(err, TraceError::UnknownFormat { .. }));
    assert!(
        err.to_string()
            .contains("servetwin, azure, mooncake, burstgpt"),
        "{err}"
    );
    assert!(TraceFormat::from_name("auto").is_err());
    let err = TraceFormat::from_name_or_auto("parquet").unwrap_err();
    assert!(err.to_string().contains("auto, servetwin"), "{err}");
}

#[test]
fn rate_scale_two_halves_every_arrival() {
    for (name, format, _) in SAMPLES {
        let once = load(name, Some(format), &scaled(1.0, None));
        let twice = load(name, Some(format), &scaled(2.0, None));
        assert_eq!(once.entries.len(), twice.entries.len(), "{name}");
        assert!(once.entries.iter().any(|e| e.arrival_s > 0.0));
        for (a, b) in once.entries.iter().zip(&twice.entries) {
            assert_eq!(b.arrival_s, a.arrival_s / 2.0, "{name}");
            assert_eq!((&b.prompt, b.output_tokens), (&a.prompt, a.output_tokens));
        }
        let slower = load(name, Some(format), &scaled(0.5, None));
        let last = |l: &TraceLoad| l.entries.last().unwrap().arrival_s;
        assert_eq!(last(&slower), last(&once) * 2.0, "{name}");
    }
}

#[test]
fn a_window_keeps_exactly_the_rows_inside_and_starts_at_zero() {
    for (name, format, rows) in SAMPLES {
        let all = load(name, Some(format), &TraceOptions::default());
        // From the time of the 50th kept entry to that of the 150th: the
        // start is inside, the end outside.
        let start_s = all.entries[50].arrival_s;
        let end = all.entries[150].arrival_s;
        let window = TraceWindow {
            start_s,
            duration_s: end - start_s,
        };
        assert!(window.duration_s > 0.0, "{name}");
        let inside: Vec<&TraceEntry> = all
            .entries
            .iter()
            .filter(|e| start_s <= e.arrival_s && e.arrival_s < start_s + window.duration_s)
            .collect();
        assert!(inside.len() >= 50, "{name}: {}", inside.len());
        for scale in [1.0, 2.0, 0.25] {
            let cut = load(name, Some(format), &scaled(scale, Some(window)));
            assert_eq!(cut.rows, rows, "{name}");
            assert_eq!(cut.entries.len(), inside.len(), "{name} x{scale}");
            assert_eq!(
                cut.entries[0].arrival_s, 0.0,
                "{name}: the start row is at 0"
            );
            for (c, a) in cut.entries.iter().zip(&inside) {
                assert_eq!(c.arrival_s, (a.arrival_s - start_s) / scale, "{name}");
                assert_eq!((&c.prompt, c.output_tokens), (&a.prompt, a.output_tokens));
                assert_eq!(c.tag, a.tag);
            }
            // Every row is counted once.
            assert_eq!(
                cut.entries.len() + cut.outside_window + cut.failed + cut.empty_prompt,
                rows,
                "{name}"
            );
        }
    }
    // BurstGPT: the failed rows counted are those inside the window.
    let (header, file_rows) = csv_rows(BURSTGPT);
    let t = header.iter().position(|h| h == "Timestamp").unwrap();
    let resp = header.iter().position(|h| h == "Response tokens").unwrap();
    let window = TraceWindow {
        start_s: 1000.0,
        duration_s: 10_000.0,
    };
    let times: Vec<(f64, bool)> = file_rows
        .iter()
        .map(|r| (r[t].parse::<f64>().unwrap() - 5.0, r[resp] == "0"))
        .collect();
    let in_window = |t: f64| (1000.0..11_000.0).contains(&t);
    let cut = load(BURSTGPT, None, &scaled(3.0, Some(window)));
    let failed = times.iter().filter(|(t, f)| *f && in_window(*t)).count();
    let kept = times.iter().filter(|(t, f)| !*f && in_window(*t)).count();
    assert!(failed > 0);
    assert_eq!((cut.failed, cut.entries.len()), (failed, kept));
    assert_eq!(
        cut.outside_window,
        times.iter().filter(|(t, _)| !in_window(*t)).count()
    );

    // An infinite duration keeps everything from the start on; a window past
    // the end keeps nothing and is no error.
    let rest = TraceWindow {
        start_s: 60.0,
        duration_s: f64::INFINITY,
    };
    let all = load(AZURE_CONV, None, &TraceOptions::default());
    let after = all.entries.iter().filter(|e| e.arrival_s >= 60.0).count();
    assert_eq!(
        load(AZURE_CONV, None, &scaled(1.0, Some(rest)))
            .entries
            .len(),
        after
    );
    let past = TraceWindow {
        start_s: 1e6,
        duration_s: 10.0,
    };
    let none = load(MOONCAKE, None, &scaled(1.0, Some(past)));
    assert_eq!((none.entries.len(), none.outside_window), (0, 200));
}

#[test]
fn malformed_azure_rows_name_file_line_and_field() {
    let head = "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n";
    let row = |r: &str| format!("{head}{r}\r\n");
    let cases = [
        (
            "bad date",
            row("2023-11-31 18:15:47.0000000,10,5"),
            "TIMESTAMP",
        ),
        (
            "bad month",
            row("2023-13-01 18:15:47.0000000,10,5"),
            "TIMESTAMP",
        ),
        (
            "bad time",
            row("2023-11-16 24:00:00.0000000,10,5"),
            "TIMESTAMP",
        ),
        ("no time", row("2023-11-16,10,5"), "TIMESTAMP"),
        (
            "ten fraction digits",
            row("2023-11-16 18:15:47.0000000001,10,5"),
            "TIMESTAMP",
        ),
        (
            "out of order",
            row("2023-11-16 18:15:46.6805899,10,5"),
            "TIMESTAMP",
        ),
        (
            "bad number",
            row("2023-11-16 18:15:47.0,1x0,5"),
            "ContextTokens",
        ),
        (
            "fractional count",
            row("2023-11-16 18:15:47.0,10.5,5"),
            "ContextTokens",
        ),
        (
            "zero prompt",
            row("2023-11-16 18:15:47.0,0,5"),
            "ContextTokens",
        ),
        (
            "empty field",
            row("2023-11-16 18:15:47.0,,5"),
            "ContextTokens",
        ),
        (
            "negative tokens",
            row("2023-11-16 18:15:47.0,10,-5"),
            "GeneratedTokens",
        ),
        (
            "missing field",
            row("2023-11-16 18:15:47.0,10"),
            "GeneratedTokens",
        ),
    ];
    for (case, text, field) in &cases {
        assert_row_error(TraceFormat::Azure, case, text, 3, field);
    }
    let err = parse_trace_as(
        &row("2023-11-16 18:15:47.0,10,-5"),
        Path::new("a.csv"),
        None,
        &TraceOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("\"-5\" is negative; expected a whole number >= 1"),
        "{err}"
    );
    // Comment and blank lines count in the line number.
    let text = format!("# head of the conv trace\r\n\r\n{head}2023-11-16 18:15:47.0,10,x\r\n");
    assert_row_error(
        TraceFormat::Azure,
        "after a comment",
        &text,
        5,
        "GeneratedTokens",
    );
    // A header without a needed column names it, on line 1.
    let text = "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n";
    assert_row_error(TraceFormat::Azure, "no column", text, 1, "GeneratedTokens");
    // Offsets are honoured: 18:15:47 at +01:00 is before 18:15:46.68 UTC.
    let text = row("2023-11-16T18:15:47.0+01:00,10,5");
    assert_row_error(TraceFormat::Azure, "offset", &text, 3, "TIMESTAMP");
    let ok = row("2023-11-16T19:15:47.5+01:00,10,5");
    let load = parse_trace_as(&ok, Path::new("a.csv"), None, &TraceOptions::default()).unwrap();
    assert_eq!(load.entries[1].arrival_s, 819_410_000.0 / 1e9);
}

#[test]
fn malformed_burstgpt_rows_name_file_line_and_field() {
    let head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
                5,ChatGPT,472,18,490,Conversation log\n";
    let row = |r: &str| format!("{head}{r}\n");
    let cases = [
        (
            "bad number",
            row("4x5,ChatGPT,1087,230,1317,Conversation log"),
            "Timestamp",
        ),
        (
            "negative time",
            row("-45,ChatGPT,1087,230,1317,Conversation log"),
            "Timestamp",
        ),
        (
            "out of order",
            row("4,ChatGPT,1087,230,1317,Conversation log"),
            "Timestamp",
        ),
        (
            "negative tokens",
            row("45,ChatGPT,-1087,230,1317,Conversation log"),
            "Request tokens",
        ),
        ("missing field", row("45,ChatGPT,1087"), "Response tokens"),
        (
            "empty field",
            row("45,ChatGPT,1087,,1317,Conversation log"),
            "Response tokens",
        ),
        (
            "bad total",
            row("45,ChatGPT,1087,230,many,Conversation log"),
            "Total tokens",
        ),
        // A failed row is skipped only once it reads.
        (
            "bad failed row",
            row("45,ChatGPT,x,0,0,Conversation log"),
            "Request tokens",
        ),
    ];
    for (case, text, field) in &cases {
        assert_row_error(TraceFormat::BurstGpt, case, text, 3, field);
    }
    let text = "Timestamp,Model,Request tokens\n5,ChatGPT,10\n";
    let err = parse_trace_as(
        text,
        Path::new("b.csv"),
        Some(TraceFormat::BurstGpt),
        &TraceOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("b.csv:1: field `Response tokens`: missing column"),
        "{err}"
    );
    // Too many fields: the line is named.
    let text = row("45,ChatGPT,1,2,3,API log,extra");
    let err =
        parse_trace_as(&text, Path::new("b.csv"), None, &TraceOptions::default()).unwrap_err();
    assert!(matches!(err, TraceError::Line { line: 3, .. }), "{err}");
}

#[test]
fn malformed_mooncake_rows_name_file_line_and_field() {
    let head = "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n";
    let row = |r: &str| format!("{head}\n{r}\n");
    let cases = [
        (
            "bad number",
            row(
                r#"{"timestamp": "soon", "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}"#,
            ),
            "timestamp",
        ),
        (
            "negative time",
            row(
                r#"{"timestamp": -1, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}"#,
            ),
            "timestamp",
        ),
        (
            "out of order",
            row(
                r#"{"timestamp": 999, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}"#,
            ),
            "timestamp",
        ),
        (
            "negative tokens",
            row(
                r#"{"timestamp": 1000, "input_length": -600, "output_length": 5, "hash_ids": [0, 1]}"#,
            ),
            "input_length",
        ),
        (
            "zero tokens",
            row(
                r#"{"timestamp": 1000, "input_length": 600, "output_length": 0, "hash_ids": [0, 1]}"#,
            ),
            "output_length",
        ),
        (
            "missing field",
            row(r#"{"timestamp": 1000, "input_length": 600, "hash_ids": [0, 1]}"#),
            "output_length",
        ),
        (
            "too few ids",
            row(r#"{"timestamp": 1000, "input_length": 600, "output_length": 5, "hash_ids": [0]}"#),
            "hash_ids",
        ),
        (
            "bad id",
            row(
                r#"{"timestamp": 1000, "input_length": 600, "output_length": 5, "hash_ids": [0, -1]}"#,
            ),
            "hash_ids",
        ),
        (
            "missing ids",
            row(r#"{"timestamp": 1000, "input_length": 600, "output_length": 5}"#),
            "hash_ids",
        ),
    ];
    for (case, text, field) in &cases {
        assert_row_error(TraceFormat::Mooncake, case, text, 3, field);
    }
    let text = row("{\"timestamp\": 1000,");
    let file = TempTrace::new("broken.jsonl", &text);
    let err = load_trace_as(
        &file.0,
        Some(TraceFormat::Mooncake),
        &TraceOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(err, TraceError::Line { line: 3, .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3: invalid JSON", file.0.display())),
        "{err}"
    );
}

#[test]
fn invalid_options_are_errors_naming_the_option() {
    let window = |start_s, duration_s| {
        Some(TraceWindow {
            start_s,
            duration_s,
        })
    };
    let cases: Vec<(TraceOptions, &str)> = vec![
        (scaled(0.0, None), "rate_scale"),
        (scaled(-1.0, None), "rate_scale"),
        (scaled(f64::NAN, None), "rate_scale"),
        (scaled(f64::INFINITY, None), "rate_scale"),
        (scaled(1.0, window(0.0, 0.0)), "window duration_s"),
        (scaled(1.0, window(10.0, -5.0)), "window duration_s"),
        (scaled(1.0, window(0.0, f64::NAN)), "window duration_s"),
        (scaled(1.0, window(-1.0, 10.0)), "window start_s"),
        (scaled(1.0, window(f64::NAN, 10.0)), "window start_s"),
        (scaled(1.0, window(f64::INFINITY, 10.0)), "window start_s"),
        (
            TraceOptions {
                block_tokens: 0,
                ..TraceOptions::default()
            },
            "block_tokens",
        ),
        (
            TraceOptions {
                vocab_size: 1,
                ..TraceOptions::default()
            },
            "vocab_size",
        ),
    ];
    let text = std::fs::read_to_string(sample(BURSTGPT)).unwrap();
    for (options, name) in &cases {
        assert!(options.check().is_err(), "{name}");
        for err in [
            parse_trace_as(&text, Path::new("b.csv"), None, options).unwrap_err(),
            load_trace_as(&sample(MOONCAKE), None, options).unwrap_err(),
            // Options are checked before the file is read.
            load_trace_as(Path::new("/nonexistent/t.csv"), None, options).unwrap_err(),
        ] {
            let shown = err.to_string();
            assert!(
                matches!(err, TraceError::Option { option, .. } if option == *name),
                "{name}: {shown}"
            );
            assert!(
                shown.starts_with(&format!("trace option {name} = ")),
                "{shown}"
            );
        }
    }
    assert!(TraceOptions::default().check().is_ok());
}

#[test]
fn crlf_line_ends_comments_and_quoted_breaks_keep_line_numbers() {
    // The csv crate's own line count lags after `\r\n` and comment lines;
    // the readers count the line a row starts on themselves.
    let text = "# servetwin trace\r\n\r\narrival_s,prompt_tokens,output_tokens,tag\r\n\
                0,10,2,\"two\r\nlines\"\r\n1,10,0,x\r\n";
    let err = sim::workload::trace::parse_csv(text, Path::new("t.csv")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("t.csv:6: field `output_tokens`"),
        "{err}"
    );
    let text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n\
                5,\"Chat\r\nGPT\",1,2,3,API log\r\n# a note\r\n6,ChatGPT,1,x,3,API log\r\n";
    let err = parse_trace_as(text, Path::new("b.csv"), None, &TraceOptions::default()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("b.csv:5: field `Response tokens`"),
        "{err}"
    );
    let text = "\r\n# a note\r\nTIMESTAMP,GeneratedTokens\r\n";
    let err = parse_trace_as(
        text,
        Path::new("a.csv"),
        Some(TraceFormat::Azure),
        &TraceOptions::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("a.csv:3: field `ContextTokens`: missing column"),
        "{err}"
    );
}
