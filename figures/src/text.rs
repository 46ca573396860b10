//! Line breaking for the subtitle and category labels.
//!
//! Contract: [`wrap`] keeps explicit `\n` breaks, then breaks each line at
//! spaces so that every piece measures at most `width`; a single word wider
//! than `width` stays whole on its own line (names must stay searchable),
//! and no line is empty unless the input line was.

/// Breaks `text` into lines no wider than `width` by `measure`.
pub(crate) fn wrap(text: &str, width: u32, measure: impl Fn(&str) -> u32) -> Vec<String> {
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut current = String::new();
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            if current.is_empty() {
                current.push_str(word);
                continue;
            }
            let candidate = format!("{current} {word}");
            if measure(&candidate) <= width {
                current = candidate;
            } else {
                lines.push(std::mem::take(&mut current));
                current.push_str(word);
            }
        }
        lines.push(current);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten units per character.
    fn measure(s: &str) -> u32 {
        10 * s.chars().count() as u32
    }

    #[test]
    fn wraps_at_spaces_within_the_width() {
        let lines = wrap("sim: h200-sxm, roofline; model qwen3-0.6b", 150, measure);
        assert_eq!(lines, ["sim: h200-sxm,", "roofline; model", "qwen3-0.6b"]);
        assert!(lines.iter().all(|l| measure(l) <= 150));
    }

    #[test]
    fn keeps_explicit_breaks_and_long_words_whole() {
        let lines = wrap("short\na-very-long-name next", 80, measure);
        assert_eq!(lines, ["short", "a-very-long-name", "next"]);
        assert_eq!(wrap("", 80, measure), [""]);
    }
}
