//! `exp`: run named experiments (see `exp list`).
fn main() -> anyhow::Result<()> {
    experiments::run_cli(std::env::args_os())
}
