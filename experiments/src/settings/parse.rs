//! Reading a parameter's text as its [`ParamKind`]: the one parser behind
//! `--set`, RON files and the declared defaults, so all three accept and
//! reject the same values. A value that is out of range (a rate of 0, a
//! window of 0 s, a format nobody reads) is an error naming the key, the
//! value and what to give instead, never a value silently clamped.

use super::{ParamKind, ParamSpec, ParamValue, SettingsError};

impl ParamKind {
    pub(super) fn expected(&self) -> String {
        match self {
            ParamKind::Count => "a non-negative integer".into(),
            ParamKind::CountList => "comma-separated positive integers, e.g. 1,4,16".into(),
            ParamKind::Number => "a non-negative number".into(),
            ParamKind::ChunkList => {
                "comma-separated token counts or `off`, e.g. 512,2048,off".into()
            }
            ParamKind::Choices(c) => format!("comma-separated values from {{{}}}", c.join(", ")),
            ParamKind::Choice(c) => format!("one of {}", c.join(", ")),
            ParamKind::Positive => "a finite number > 0".into(),
            ParamKind::PositiveOrAll => "a finite number > 0, or `all`".into(),
            ParamKind::PositiveOrInf => "a finite number > 0, or `inf`".into(),
            ParamKind::PositiveList => "comma-separated numbers > 0, e.g. 10,20,40".into(),
            ParamKind::Path => "a file path".into(),
        }
    }
}

pub(super) fn bad(key: &str, value: &str, expected: impl Into<String>) -> SettingsError {
    SettingsError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

fn list_items(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim)
}

/// A parameter's default: its text parsed, except that a path parameter's
/// empty default is "no file".
pub(super) fn parse_default(spec: &ParamSpec) -> Result<ParamValue, SettingsError> {
    if spec.kind == ParamKind::Path && spec.default.is_empty() {
        return Ok(ParamValue::Path(None));
    }
    parse_param(spec, spec.default)
}

/// A finite number > 0 (`infinite`, when given, too, as infinity).
fn positive(v: &str, infinite: Option<&str>) -> Option<f64> {
    if infinite == Some(v) {
        return Some(f64::INFINITY);
    }
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0)
}

pub(super) fn parse_param(spec: &ParamSpec, value: &str) -> Result<ParamValue, SettingsError> {
    let err = || bad(spec.key, value, spec.kind.expected());
    let v = value.trim();
    if v.is_empty() {
        return Err(err());
    }
    Ok(match spec.kind {
        ParamKind::Choice(choices) => ParamValue::Word(
            choices
                .iter()
                .find(|c| **c == v)
                .map(|c| c.to_string())
                .ok_or_else(err)?,
        ),
        ParamKind::Positive => ParamValue::Number(positive(v, None).ok_or_else(err)?),
        ParamKind::PositiveOrAll => ParamValue::Number(positive(v, Some("all")).ok_or_else(err)?),
        ParamKind::PositiveOrInf => ParamValue::Number(positive(v, Some("inf")).ok_or_else(err)?),
        ParamKind::PositiveList => ParamValue::Numbers(
            list_items(v)
                .map(|s| positive(s, None).ok_or_else(err))
                .collect::<Result<_, _>>()?,
        ),
        ParamKind::Path => ParamValue::Path(Some(v.into())),
        ParamKind::Count => ParamValue::Count(v.parse().map_err(|_| err())?),
        ParamKind::Number => {
            let x: f64 = v.parse().map_err(|_| err())?;
            if !(x.is_finite() && x >= 0.0) {
                return Err(err());
            }
            ParamValue::Number(x)
        }
        ParamKind::CountList => ParamValue::Counts(
            list_items(v)
                .map(|s| s.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(err))
                .collect::<Result<_, _>>()?,
        ),
        ParamKind::ChunkList => ParamValue::Chunks(
            list_items(v)
                .map(|s| match s {
                    "off" => Ok(None),
                    n => n
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .map(Some)
                        .ok_or_else(err),
                })
                .collect::<Result<_, _>>()?,
        ),
        ParamKind::Choices(choices) => ParamValue::Words(
            list_items(v)
                .map(|s| {
                    choices
                        .iter()
                        .find(|c| **c == s)
                        .map(|c| c.to_string())
                        .ok_or_else(err)
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ParamKind) -> ParamSpec {
        ParamSpec {
            key: "k",
            kind,
            default: "1",
            help: "",
        }
    }

    #[test]
    fn number_lists_and_infinite_numbers_parse_and_impossible_ones_are_refused() {
        let list = spec(ParamKind::PositiveList);
        assert_eq!(
            parse_param(&list, "2.5, 10,40"),
            Ok(ParamValue::Numbers(vec![2.5, 10.0, 40.0]))
        );
        for v in ["0", "1,-2", "nan", "inf", "1,,2", ""] {
            let err = parse_param(&list, v).expect_err(v).to_string();
            assert!(err.contains("numbers > 0"), "{err}");
        }
        let inf = spec(ParamKind::PositiveOrInf);
        assert_eq!(
            parse_param(&inf, "inf"),
            Ok(ParamValue::Number(f64::INFINITY))
        );
        assert_eq!(parse_param(&inf, "50"), Ok(ParamValue::Number(50.0)));
        for v in ["0", "-3", "nan", "all", "infinity"] {
            let err = parse_param(&inf, v).expect_err(v).to_string();
            assert!(err.contains("`inf`"), "{err}");
        }
    }
}
