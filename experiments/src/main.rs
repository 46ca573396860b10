//! `exp`: run named experiments (work in progress).
fn main() -> anyhow::Result<()> {
    Ok(())
}
