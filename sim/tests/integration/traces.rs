//! Trace files: parsing, errors that name line and field, replay.

use sim::workload::trace::{parse_csv, parse_jsonl, write_csv};
use sim::workload::{load_trace, PromptSource, TraceError, TracePrompt, TraceReplay};
use sim::Workload;
use std::path::Path;

fn csv(text: &str) -> Result<Vec<sim::workload::TraceEntry>, TraceError> {
    parse_csv(text, Path::new("t.csv"))
}
fn jsonl(text: &str) -> Result<Vec<sim::workload::TraceEntry>, TraceError> {
    parse_jsonl(text, Path::new("t.jsonl"))
}

/// The error's line and field, and its message.
fn located(err: TraceError) -> (usize, String, String) {
    let text = err.to_string();
    match err {
        TraceError::Field { line, field, .. } => (line, field, text),
        TraceError::Line { line, .. } => (line, String::new(), text),
        other => panic!("not located: {other}"),
    }
}

#[test]
fn csv_rows_parse_with_optional_fields() {
    let text = "# comment\narrival_s,prompt_tokens,token_ids,output_tokens,salt,prefix_group,prefix_tokens,tag\n\
                0.5,100,,8,,doc,64,warm\n\n1.0,,1 2 3,4,alice,,,\n";
    let e = csv(text).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].arrival_s, 0.5);
    assert_eq!(e[0].prompt, TracePrompt::Length(100));
    assert_eq!(e[0].prefix_group.as_deref(), Some("doc"));
    assert_eq!(e[0].prefix_tokens, Some(64));
    assert_eq!(e[0].tag.as_deref(), Some("warm"));
    assert_eq!(e[1].prompt, TracePrompt::Tokens(vec![1, 2, 3]));
    assert_eq!(e[1].salt.as_deref(), Some("alice"));
}

#[test]
fn quoted_csv_fields_may_hold_commas_quotes_and_line_breaks() {
    let text = "arrival_s,prompt_tokens,output_tokens,tag,salt\n\
                0.5,10,2,\"warm, cached\",\"tenant \"\"a\"\"\"\n\
                1,10,2,\"two\nlines\",  spaced  \n";
    let e = csv(text).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].tag.as_deref(), Some("warm, cached"));
    assert_eq!(e[0].salt.as_deref(), Some("tenant \"a\""));
    assert_eq!(e[1].tag.as_deref(), Some("two\nlines"));
    assert_eq!(e[1].salt.as_deref(), Some("spaced"));
    // A row after a quoted line break is numbered by the line it starts on.
    let bad = format!("{text}2,10,0,x,y\n");
    let (l, f, msg) = located(csv(&bad).unwrap_err());
    assert_eq!((l, f.as_str()), (5, "output_tokens"), "{msg}");
}

#[test]
fn written_csv_traces_read_back_to_the_same_entries() {
    let text =
        "arrival_s,prompt_tokens,token_ids,output_tokens,salt,prefix_group,prefix_tokens,tag\n\
                0.1,100,,8,,doc,64,warm\n0.30000000000000004,,1 2 3,4,alice,,,\n";
    let mut entries = csv(text).unwrap();
    entries[0].tag = Some("a, \"quoted\" tag\nover two lines".to_string());
    entries[1].salt = Some("#not a comment".to_string());
    let mut out = Vec::new();
    write_csv(&mut out, &entries).unwrap();
    let written = String::from_utf8(out).unwrap();
    assert!(
        written.starts_with(
            "arrival_s,prompt_tokens,token_ids,output_tokens,salt,prefix_group,prefix_tokens,tag\n"
        ),
        "{written}"
    );
    assert_eq!(csv(&written).unwrap(), entries, "{written}");
    let mut none = Vec::new();
    write_csv(&mut none, &[]).unwrap();
    assert!(csv(std::str::from_utf8(&none).unwrap()).unwrap().is_empty());
}

#[test]
fn csv_errors_name_file_line_and_field() {
    let head = "arrival_s,prompt_tokens,output_tokens\n";
    let cases = [
        (format!("{head}0,10,2\nsoon,10,2\n"), 3, "arrival_s"),
        (format!("{head}0,10,0\n"), 2, "output_tokens"),
        (format!("{head}0,-5,2\n"), 2, "prompt_tokens"),
        (format!("{head}0,,2\n"), 2, "prompt_tokens"),
        (format!("{head}-1,10,2\n"), 2, "arrival_s"),
        (
            "arrival_s,prompt_tokens\n0,10\n".to_string(),
            2,
            "output_tokens",
        ),
        (
            "arrival_s,token_ids,output_tokens\n0,1 x 3,2\n".to_string(),
            2,
            "token_ids",
        ),
        (format!("{head}0,10\n"), 2, ""),
        (
            "arrival_s,prompt_tokens,output_tokens,colour\n".to_string(),
            1,
            "",
        ),
    ];
    for (text, line, field) in cases {
        let (l, f, msg) = located(csv(&text).unwrap_err());
        assert_eq!((l, f.as_str()), (line, field), "{msg}");
        assert!(msg.starts_with(&format!("t.csv:{line}:")), "{msg}");
    }
}

#[test]
fn jsonl_lines_parse_and_errors_name_line_and_field() {
    let ok = "{\"arrival_s\": 0, \"token_ids\": [5, 6], \"output_tokens\": 3, \"salt\": \"s\"}\n\
              {\"arrival_s\": 0.25, \"prompt_tokens\": 40, \"output_tokens\": 1, \"prefix_group\": 7}\n";
    let e = jsonl(ok).unwrap();
    assert_eq!(e[0].prompt, TracePrompt::Tokens(vec![5, 6]));
    assert_eq!(e[1].prefix_group.as_deref(), Some("7"));
    let cases = [
        ("{\"arrival_s\": \"x\", \"prompt_tokens\": 4, \"output_tokens\": 1}", "arrival_s"),
        ("{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"speed\": 2}", "speed"),
        ("{\"arrival_s\": 0, \"token_ids\": [1, -2], \"output_tokens\": 1}", "token_ids"),
        ("{\"arrival_s\": 0, \"prompt_tokens\": 4}", "output_tokens"),
        ("{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"prefix_tokens\": 2}", "prefix_tokens"),
        ("{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"prefix_group\": \"g\", \"prefix_tokens\": 9}", "prefix_tokens"),
        ("{\"arrival_s\": 0, \"prompt_tokens\": 4, \"token_ids\": [1], \"output_tokens\": 1}", "token_ids"),
    ];
    for (row, field) in cases {
        let text = format!("{}\n\n{row}\n", ok.lines().next().unwrap());
        let (l, f, msg) = located(jsonl(&text).unwrap_err());
        assert_eq!((l, f.as_str()), (3, field), "{msg}");
    }
    let (l, f, msg) = located(jsonl("{not json}\n").unwrap_err());
    assert_eq!((l, f.as_str()), (1, ""), "{msg}");
}

#[test]
fn load_trace_reads_files_by_extension_and_names_missing_files() {
    let dir = std::env::temp_dir().join(format!("sim-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.jsonl");
    std::fs::write(
        &path,
        "{\"arrival_s\": 1, \"prompt_tokens\": 3, \"output_tokens\": 2}\n",
    )
    .unwrap();
    assert_eq!(load_trace(&path).unwrap().len(), 1);
    let missing = load_trace(&dir.join("none.csv")).unwrap_err();
    assert!(matches!(missing, TraceError::Io { .. }) && missing.to_string().contains("none.csv"));
    assert!(matches!(
        load_trace(&dir.join("t.txt")),
        Err(TraceError::Format { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn replay_shares_prefixes_within_a_group_only() {
    let text = "arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_tokens,salt\n\
                0,40,1,a,32,\n1,40,1,a,32,t1\n2,40,1,b,32,\n3,20,1,a,,\n";
    let entries = csv(text).unwrap();
    let source = PromptSource::random_tokens(50_000).unwrap();
    let mut w = TraceReplay::new(entries.clone(), &source, 1, 1, 10).unwrap();
    let a = w.initial();
    let p = |i: usize| &a[i].request.prompt_token_ids;
    assert_eq!(a[0].request.id.0, 10);
    assert_eq!(a[1].request.arrival_time, 1.0);
    assert_eq!(a[1].request.cache_salt.as_deref(), Some("t1"));
    assert_eq!(p(0)[..32], p(1)[..32]);
    assert_ne!(p(0)[32..], p(1)[32..]);
    assert_ne!(p(0)[..32], p(2)[..32]);
    assert_eq!(
        p(3)[..],
        p(0)[..20],
        "without prefix_tokens the whole prompt is the group's"
    );
    assert_eq!(a[0].tag, "trace");
    let again = TraceReplay::new(entries, &source, 1, 1, 10).unwrap();
    assert_eq!(again.arrivals().len(), 4);
    assert_eq!(again.arrivals()[2], a[2]);
}
