use super::*;

#[test]
fn specs_parse_and_split_the_units_round_robin() {
    let s = ShardSpec::parse("2/3").unwrap();
    assert_eq!((s.index, s.count), (2, 3));
    assert_eq!(s.units(8, "points").unwrap(), vec![1, 4, 7]);
    let mut all: Vec<usize> = (1..=3)
        .flat_map(|k| ShardSpec { index: k, count: 3 }.units(8, "points").unwrap())
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..8).collect::<Vec<_>>());
    assert_eq!(
        ShardSpec::parse("1/1").unwrap().units(3, "points").unwrap(),
        [0, 1, 2]
    );
}

#[test]
fn bad_specs_say_what_to_give() {
    for (text, needle) in [
        ("0/4", "count from 1"),
        ("5/4", "more than N"),
        ("1/0", "N = 0"),
        ("3", "expected K/N"),
        ("a/4", "not a whole number"),
        ("-1/4", "not a whole number"),
    ] {
        let msg = ShardSpec::parse(text).unwrap_err().to_string();
        assert!(
            msg.contains(needle) && msg.contains("--shard"),
            "{text}: {msg}"
        );
    }
    let msg = ShardSpec::parse("3/9")
        .unwrap()
        .units(4, "conditions")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("at most 4") && msg.contains("4 conditions"),
        "{msg}"
    );
}

#[test]
fn first_difference_names_both_lines() {
    assert_eq!(first_difference("a\nb\n", "a\nc\n"), "`b` against `c`");
    assert_eq!(first_difference("a", "a\nx"), "`(end)` against `x`");
}

fn file(index: usize, date: &str, results: Vec<usize>) -> ShardFile<String, usize> {
    ShardFile {
        format: SHARD_FORMAT,
        kind: ShardKind::Run,
        shard: ShardSpec { index, count: 2 },
        args: "args".into(),
        fingerprint: "f".into(),
        units: 3,
        date_utc: date.into(),
        results,
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("exp-shard-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_set_is_read_checked_dated_and_put_in_order() {
    let root = scratch("set");
    let (a, b) = (root.join("a"), root.join("b"));
    write(&a, &file(1, "2026-12-04T10:00:00Z", vec![0, 2])).unwrap();
    write(&b, &file(2, "2026-12-03T23:59:59Z", vec![1])).unwrap();
    assert_eq!(kind_of(&a).unwrap(), ShardKind::Run);
    let set = read_set::<String, usize>(&[b.clone(), a.clone()], ShardKind::Run).unwrap();
    assert_eq!(set[0].1.shard.index, 1, "sorted by K");
    assert_eq!(earliest_date(&set), "2026-12-03T23:59:59Z");
    assert_eq!(results_in_order(set, 3, |r| *r).unwrap(), [0, 1, 2]);

    let msg = read_set::<String, usize>(std::slice::from_ref(&a), ShardKind::Run)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("2/2") && msg.contains("missing"), "{msg}");
    let msg = read_set::<String, usize>(&[a.clone(), a.clone()], ShardKind::Run)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("given twice"), "{msg}");
    let msg = read_set::<String, usize>(&[a.clone(), b.clone()], ShardKind::Plan)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("exp run NAME") && msg.contains("not of `exp plan"),
        "{msg}"
    );

    let mut other = file(2, "2026-12-04T10:00:00Z", vec![1]);
    other.fingerprint = "g".into();
    write(&b, &other).unwrap();
    let msg = read_set::<String, usize>(&[a.clone(), b.clone()], ShardKind::Run)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("`f` against `g`"), "{msg}");

    write(&b, &file(2, "2026-12-04T10:00:00Z", vec![])).unwrap();
    let set = read_set::<String, usize>(&[a.clone(), b.clone()], ShardKind::Run).unwrap();
    let msg = results_in_order(set, 3, |r| *r).unwrap_err().to_string();
    assert!(msg.contains("2 results for 3 units"), "{msg}");

    std::fs::write(b.join(SHARD_FILE), "(format: 1, kind: Run)").unwrap();
    let msg = kind_of(&b).unwrap_err().to_string();
    assert!(msg.contains("shard format 1"), "{msg}");
    let msg = kind_of(&root.join("nowhere")).unwrap_err().to_string();
    assert!(
        msg.contains("shard.ron") && msg.contains("OUT/NAME"),
        "{msg}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
