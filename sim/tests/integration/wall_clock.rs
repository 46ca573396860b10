//! The same loop on the wall clock: real waiting, measured steps.

use crate::common;

use common::{config, sim_engine};
use engine::Request;
use sim::workload::{ScriptEntry, Scripted, Trigger};
use sim::{run, WallClock};

#[test]
fn the_wall_clock_waits_for_arrivals_and_measures_steps() {
    let entries = vec![
        ScriptEntry::new(Request::new(0, vec![3; 64], 3), "a", Trigger::At(0.0)),
        ScriptEntry::new(Request::new(1, vec![4; 64], 3), "b", Trigger::At(0.02)),
    ];
    let mut engines = vec![sim_engine(config())];
    let mut clock = WallClock::new();
    let records = run(
        &mut engines,
        &mut clock,
        &mut Scripted::new(entries).unwrap(),
    )
    .unwrap();
    let b = records.request(1).unwrap();
    assert!(
        b.token_times_s[0] >= 0.02,
        "b cannot start before it arrives"
    );
    assert_eq!(b.output_tokens(), 3);
    for w in records.steps.windows(2) {
        assert!(w[1].start_s >= w[0].start_s + w[0].duration_s);
    }
}
