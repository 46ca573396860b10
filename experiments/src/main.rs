//! `exp`: run named experiments (see `exp list`).

use std::process::ExitCode;

fn main() -> ExitCode {
    match experiments::run_cli(std::env::args_os()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // The cause chain on one line; no backtrace for user errors.
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
