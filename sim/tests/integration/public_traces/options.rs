//! Trace formats by name and sniffed, the rate scale and window, and
//! options a replay refuses, naming the option.

use super::*;

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
