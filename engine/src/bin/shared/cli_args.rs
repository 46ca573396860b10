//! Option parsing shared by the engine's GPU tools (`engine-bench`,
//! `cuda-check`; included with `#[path]`): an unknown option, or a value
//! option without its value, is an error that lists the options, given before
//! any slow start; then [`flag`] and [`value`] read the checked arguments.

/// Whether the flag `name` was given.
pub fn flag(args: &[String], name: &str) -> bool {
    args.iter().any(|a| a == name)
}

/// The value given after the option `name`, if it was given.
pub fn value(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// `Ok` when every argument is one of `flags`, or one of `value_options`
/// followed by a value (an argument that does not start with `--`).
pub fn check_args(args: &[String], value_options: &[&str], flags: &[&str]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if value_options.contains(&a) {
            if args.get(i + 1).is_none_or(|v| v.starts_with("--")) {
                return Err(format!("{a} needs a value"));
            }
            i += 2;
        } else if flags.contains(&a) {
            i += 1;
        } else {
            return Err(format!(
                "unknown option {a}; options: {} (with a value), {}",
                value_options.join(" "),
                flags.join(" ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_args, flag, value};

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn unknown_options_and_missing_values_are_errors() {
        let (values, flags) = (["--out", "--only-decode"], ["--tune", "--warm-graphs"]);
        let check = |s: &str| check_args(&args(s), &values, &flags);
        assert!(check("--out dir --only-decode 64 --warm-graphs").is_ok());
        assert!(check("").is_ok());
        let e = check("--only-decode 64 --warm-graph").unwrap_err();
        assert!(
            e.starts_with("unknown option --warm-graph; options: --out"),
            "{e}"
        );
        assert_eq!(
            check("--only-decode").unwrap_err(),
            "--only-decode needs a value"
        );
        assert_eq!(check("--out --tune").unwrap_err(), "--out needs a value");
        // A stray value is not an option.
        assert!(check("64").unwrap_err().starts_with("unknown option 64"));
    }

    #[test]
    fn flags_and_values_are_read_by_name() {
        let a = args("--out dir --tune");
        assert!(flag(&a, "--tune") && !flag(&a, "--warm-graphs"));
        assert_eq!(value(&a, "--out").as_deref(), Some("dir"));
        assert_eq!(value(&a, "--only-decode"), None);
    }
}
