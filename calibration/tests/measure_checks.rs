//! Measuring with zero timed repetitions is refused (there is no median of
//! nothing), not run once in silence.

use calibration::measure::time_shape;
use calibration::{measure, Grid, MeasureError};
use engine::testing::FixedTokenRunner;
use engine::{BatchShape, SeqShape};

#[test]
fn zero_reps_is_an_error_naming_the_option_and_the_fix() {
    let mut runner = FixedTokenRunner::new(1024, 100);
    let err = measure(&mut runner, &Grid::small(128), 16, 0, 0, |_, _| {}).unwrap_err();
    assert!(matches!(err, MeasureError::NoReps), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("--reps 0") && msg.contains("--reps 1 or more"),
        "{msg}"
    );
    assert_eq!(runner.batches, 0, "nothing was executed");

    let shape = BatchShape {
        seqs: vec![SeqShape {
            new_tokens: 8,
            context_before: 0,
            samples: true,
        }],
    };
    assert!(matches!(
        time_shape(&mut runner, &shape, 16, 1, 0),
        Err(MeasureError::NoReps)
    ));
    let seconds = time_shape(&mut runner, &shape, 16, 0, 3).expect("three reps");
    assert!(seconds >= 0.0);
    assert_eq!(runner.batches, 3, "exactly the timed executions ran");
}
