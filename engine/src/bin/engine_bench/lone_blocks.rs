//! `engine-bench --lone-blocks`: decode attention whose blocks each have an
//! SM to themselves, to tell a block's latency from DRAM time.
//!
//! On the whole GPU a batch of 64 decodes runs its attention in waves of
//! blocks that share SMs, and the smallest group's kernel is as long as its
//! DRAM time: step times alone do not say how long one block takes. Here
//! every decode kernel that handles the model's shape runs unsplit (the
//! splits' target is one warp) at batches of 1, 4 and 16 decodes (8 to 128
//! blocks of a model with 8 KV heads: fewer than an H100's or H200's SMs)
//! over 300, 1,000 and 2,000 keys, and each batch once more with the
//! attention group left out (`SKIP_ATTENTION`, which with the fused RoPE
//! also leaves out the q/k-norm, RoPE and KV write). A row's attention cost
//! is its step minus that one. Rows are appended to `lone_blocks.csv`:
//! `model, sm_count, copy_bandwidth_tb_s, kernel, batch, context, blocks,
//! ms_median, no_attention_ms, date, commit`. A step that fails is reported
//! on stderr and left out; the others are written.

use crate::steps::{decode_mix, Workload};
use crate::table::{self, RunInfo};
use anyhow::Context as _;
use engine::model::Qwen3Config;
use engine::runner::cuda::{CudaRunner, CudaTuning, DecodeKernel, SKIP_ATTENTION};
use std::fmt::Write as _;
use std::path::Path;

pub(crate) const FILE: &str = "lone_blocks.csv";
pub(crate) const HEADER: &str = "model,sm_count,copy_bandwidth_tb_s,kernel,batch,context,blocks,ms_median,no_attention_ms,date,commit";
/// Decodes of a timed step: with 8 KV heads, 8 to 128 blocks.
pub(crate) const BATCHES: [usize; 3] = [1, 4, 16];
/// Median keys the timed steps attend to.
pub(crate) const CONTEXTS: [usize; 3] = [300, 1000, 2000];

/// `--lone-blocks`: every case on `r`, a runner of `cfg` (module docs), each
/// line on stderr, the rows appended to `out/lone_blocks.csv`; an error if
/// any case failed (after writing the others).
pub(crate) fn run(
    r: &mut CudaRunner,
    cfg: &Qwen3Config,
    model: &str,
    wl: &Workload,
    out: &Path,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating --out {}", out.display()))?;
    let info = RunInfo::of_runner(model, r, engine::date::utc_now());
    let chosen = *r.tuning();
    let (head_dim, kv_heads) = (cfg.head_dim, cfg.num_key_value_heads);
    let group = cfg.num_attention_heads / kv_heads;
    let kernels: Vec<DecodeKernel> = DecodeKernel::ALL
        .into_iter()
        .filter(|k| k.fuses_rope(head_dim) && k.supports(head_dim, group, kv_heads))
        .collect();
    let mut rows = String::new();
    let mut ok = true;
    for &b in &BATCHES {
        r.set_tuning(CudaTuning {
            profile_skip: SKIP_ATTENTION,
            ..chosen
        })?;
        // The step without attention attends to nothing: one context does.
        let base = match decode_mix(r, &vec![CONTEXTS[0]; b], wl) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("lone blocks: batch {b} without attention: FAILED: {e:#}");
                ok = false;
                continue;
            }
        };
        eprintln!(
            "lone blocks: batch {b} without attention: {:.3} ms",
            base * 1e3
        );
        for &k in &kernels {
            r.set_tuning(CudaTuning {
                decode_kernel: Some(k),
                decode_target_warps: 1,
                ..chosen
            })?;
            for &c in &CONTEXTS {
                let what = format!("lone blocks: batch {b} {} {c} keys", k.name());
                match decode_mix(r, &vec![c; b], wl) {
                    Ok(s) => {
                        let blocks = k.grid(b, kv_heads, 1).0;
                        eprintln!(
                            "{what}, {blocks} blocks: {:.3} ms, attention {:.3} ms",
                            s * 1e3,
                            (s - base) * 1e3
                        );
                        let _ = writeln!(
                            rows,
                            "{},{},{:.3},{},{b},{c},{blocks},{:.4},{:.4},{},{}",
                            info.model_cell(),
                            info.sm_count,
                            info.copy_bandwidth_tb_s,
                            k.name(),
                            s * 1e3,
                            base * 1e3,
                            info.date,
                            info.commit
                        );
                    }
                    Err(e) => {
                        eprintln!("{what}: FAILED: {e:#}");
                        ok = false;
                    }
                }
            }
        }
    }
    r.set_tuning(chosen)?;
    let path = out.join(FILE);
    table::append_with_header(&path, HEADER, &rows)
        .with_context(|| format!("appending to {}", path.display()))?;
    anyhow::ensure!(ok, "some lone-block cases failed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::CONTEXT_RANGE;

    #[test]
    fn every_case_is_a_step_the_bench_can_time_with_blocks_fewer_than_an_h100s_sms() {
        for &c in &CONTEXTS {
            assert!(CONTEXT_RANGE.contains(&c), "{c}");
        }
        for k in DecodeKernel::ALL {
            // Qwen3's 8 KV heads, unsplit.
            assert!(k.grid(*BATCHES.last().unwrap(), 8, 1).0 <= 132, "{k:?}");
        }
        assert!(BATCHES.iter().all(|&b| b <= crate::args::MAX_BATCH));
    }

    #[test]
    fn the_header_has_a_column_for_each_cell_of_a_row() {
        let row =
            "qwen3-0.6b,132,3.730,BlockW4U4,16,2000,128,1.2345,1.0000,2026-12-07T00:00:00Z,abc1234";
        assert_eq!(HEADER.split(',').count(), row.split(',').count());
    }
}
