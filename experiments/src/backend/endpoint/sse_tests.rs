//! The framer on split and oddly ended input; the tally's token counting by
//! ids, by continuous usage and by text, its reconciliation with the final
//! usage, and its failures.

use super::*;

fn frame_all(parts: &[&[u8]]) -> Vec<String> {
    let mut framer = SseFramer::default();
    let mut out: Vec<String> = parts.iter().flat_map(|p| framer.push(p)).collect();
    out.extend(framer.finish());
    out
}

#[test]
fn events_survive_any_split_and_line_ending() {
    let text = "data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":\"é\"}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
    let whole = frame_all(&[text.as_bytes()]);
    assert_eq!(whole, ["{\"a\":1}", "{\"b\":\"é\"}", "one\ntwo", "[DONE]"]);
    let bytes = text.as_bytes();
    for cut in 0..bytes.len() {
        assert_eq!(
            frame_all(&[&bytes[..cut], &bytes[cut..]]),
            whole,
            "cut at {cut}"
        );
    }
    let singles: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(frame_all(&singles), whole);
    assert_eq!(frame_all(&[b"data: a\r\rdata: b\r"]), ["a", "b"]);
    assert_eq!(
        frame_all(&[b"data: tail without blank line"]),
        ["tail without blank line"]
    );
}

fn tally(chunks: &[(&str, f64)]) -> Result<Streamed, RequestFailure> {
    let mut t = StreamTally::default();
    for (data, now) in chunks {
        t.on_data(data, *now)?;
    }
    t.finish()
}

const USAGE_3: &str = r#"{"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 16}}}"#;

#[test]
fn one_token_per_text_chunk_and_the_final_usage_agrees() {
    let s = tally(&[
        (
            r#"{"choices": [{"text": "a", "finish_reason": null}]}"#,
            1.0,
        ),
        (
            r#"{"choices": [{"text": "b", "finish_reason": null}]}"#,
            1.5,
        ),
        (
            r#"{"choices": [{"text": "c", "finish_reason": null}]}"#,
            2.0,
        ),
        (
            r#"{"choices": [{"text": "", "finish_reason": "length"}]}"#,
            2.0,
        ),
        (USAGE_3, 2.1),
        ("[DONE]", 2.2),
    ])
    .unwrap();
    assert_eq!(s.token_times_s, [1.0, 1.5, 2.0]);
    assert_eq!((s.finish_s, s.finish_reason.as_str()), (2.0, "length"));
    assert_eq!(s.cached_tokens, Some(16));
}

#[test]
fn merged_chunks_count_by_ids_or_continuous_usage_and_share_their_arrival() {
    let by_ids = tally(&[
        (r#"{"choices": [{"text": "ab", "token_ids": [5, 6]}]}"#, 1.0),
        (
            r#"{"choices": [{"text": "c", "token_ids": [7], "finish_reason": "length"}]}"#,
            1.4,
        ),
        (USAGE_3, 1.5),
        ("[DONE]", 1.5),
    ])
    .unwrap();
    assert_eq!(by_ids.token_times_s, [1.0, 1.0, 1.4]);
    let by_usage = tally(&[
        (r#"{"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}}"#, 1.0),
        (r#"{"choices": [{"text": "bc", "finish_reason": "length"}], "usage": {"completion_tokens": 3}}"#, 1.3),
        ("[DONE]", 1.4),
    ])
    .unwrap();
    assert_eq!(by_usage.token_times_s, [1.0, 1.3, 1.3]);
    assert_eq!(
        by_usage.cached_tokens, None,
        "no prompt_tokens_details sent"
    );
}

#[test]
fn the_final_usage_corrects_text_counting_both_ways() {
    // Two tokens in one chunk that text counting takes for one.
    let short = tally(&[
        (r#"{"choices": [{"text": "ab"}]}"#, 1.0),
        (
            r#"{"choices": [{"text": "c", "finish_reason": "length"}]}"#,
            2.0,
        ),
        (USAGE_3, 2.5),
        ("[DONE]", 2.5),
    ])
    .unwrap();
    assert_eq!(short.token_times_s, [1.0, 2.0, 2.0]);
    // One token's text split over two chunks.
    let usage_1 = r#"{"choices": [], "usage": {"completion_tokens": 1}}"#;
    let long = tally(&[
        (r#"{"choices": [{"text": "\u00e9"}]}"#, 1.0),
        (
            r#"{"choices": [{"text": "!", "finish_reason": "length"}]}"#,
            1.1,
        ),
        (usage_1, 1.2),
        ("[DONE]", 1.2),
    ])
    .unwrap();
    assert_eq!(long.token_times_s, [1.0]);
}

#[test]
fn chat_deltas_count_and_the_role_chunk_does_not() {
    let s = tally(&[
        (
            r#"{"choices": [{"delta": {"role": "assistant", "content": ""}}]}"#,
            0.5,
        ),
        (r#"{"choices": [{"delta": {"content": "x"}}]}"#, 1.0),
        (
            r#"{"choices": [{"delta": {}, "finish_reason": "stop"}]}"#,
            1.2,
        ),
        ("[DONE]", 1.3),
    ])
    .unwrap();
    assert_eq!(s.token_times_s, [1.0]);
    assert_eq!(s.finish_reason, "stop");
}

#[test]
fn broken_streams_are_errors_that_say_what_broke() {
    let not_json = tally(&[("{\"choices\": [", 1.0)]).unwrap_err();
    assert!(
        matches!(&not_json, RequestFailure::MalformedSse { message, excerpt }
            if message.starts_with("not JSON") && excerpt.contains("choices")),
        "{not_json}"
    );
    let bad_choices = tally(&[(r#"{"choices": 3}"#, 1.0)]).unwrap_err();
    assert!(bad_choices
        .to_string()
        .contains("`choices` is not an array"));
    let in_stream = tally(&[(r#"{"error": {"message": "engine died", "code": 500}}"#, 1.0)]);
    assert!(matches!(in_stream, Err(RequestFailure::InStream(m)) if m == "engine died"));
    let truncated = tally(&[(r#"{"choices": [{"text": "a"}]}"#, 1.0)]).unwrap_err();
    assert!(matches!(truncated, RequestFailure::Truncated { tokens: 1 }));
    let after = tally(&[("[DONE]", 1.0), (r#"{"choices": []}"#, 1.1)]).unwrap_err();
    assert!(after.to_string().contains("after [DONE]"));
}
