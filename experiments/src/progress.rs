//! The progress bar of `exp run` (on stderr, hidden by `--quiet`).
//!
//! Contract: simulated conditions run at once and take moments, so the bar
//! counts conditions; a backend that runs conditions one at a time (real
//! mode) is counted in requests finished of all conditions' total, with the
//! condition being run and its engine steps per second in the message,
//! updated from the backend's [`ProgressEvent`]s.

use crate::backend::ProgressEvent;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Instant;

fn styled(bar: &ProgressBar, unit: &str) {
    let template = format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}} ({{elapsed}})");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
}

/// A bar counting conditions of experiment `name`; hidden when `quiet`.
pub fn conditions_bar(quiet: bool, name: &str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0).with_prefix(name.to_string());
    styled(&bar, "conditions");
    bar
}

/// Switches `bar` to counting requests, `total` of them.
pub fn count_requests(bar: &ProgressBar, total: usize) {
    styled(bar, "requests");
    bar.set_length(total as u64);
    bar.set_position(0);
}

/// One condition's progress on a request-counting bar.
pub struct ConditionProgress<'a> {
    pub bar: &'a ProgressBar,
    /// Requests of the conditions run before this one.
    pub done_before: usize,
    /// This condition's place (1-based) and the number of conditions.
    pub index: usize,
    pub conditions: usize,
    pub started: Instant,
}

impl ConditionProgress<'_> {
    /// Shows `event`: requests done overall, condition i/n, steps per
    /// second (requests per second from a backend that sees no steps).
    pub fn show(&self, event: ProgressEvent) {
        self.bar
            .set_position((self.done_before + event.requests_done) as u64);
        let seconds = self.started.elapsed().as_secs_f64();
        let (count, unit) = match event.steps {
            0 => (event.requests_done as f64, "requests/s"),
            steps => (steps as f64, "steps/s"),
        };
        let rate = if seconds > 0.0 { count / seconds } else { 0.0 };
        self.bar.set_message(format!(
            "(condition {}/{}, {rate:.1} {unit})",
            self.index, self.conditions
        ));
    }
}
