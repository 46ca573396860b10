//! Malformed rows of each format: errors that name the file, the line
//! and the field, whatever the line ends, comments and quoted breaks.

use super::*;

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
