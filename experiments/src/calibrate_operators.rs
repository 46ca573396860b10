//! `exp calibrate --operators`: measure what the operator cost model
//! (`calibration::operators`) is fitted on, on this machine's GPU, fit it,
//! and write the operator profile that `--cost-model operators
//! --operator-profile FILE` prices runs with.
//!
//! Contract: runs `engine-bench` (`--engine-bench`, by default the one beside
//! this executable; built with `--features cuda`) three times, each runner in
//! a process of its own: the whole-GPU steps and kernel-group costs of
//! `--slice-models` (`--family M --operators`), the whole-GPU steps of the
//! other `--models`, and the steps of `--slice-models` on each of
//! `--sm-counts` (green contexts). The rows go to `OUT.measured/`
//! (`engine_family.csv`, `operators/groups.csv`, `operators/gemm_shapes.csv`,
//! on the whole GPU `operators/decode_mix.csv`, and `engine-bench.log` with
//! every line it printed); that folder must not
//! hold an earlier run's rows. Then the fit and its hold-outs as `exp
//! transfer-check` does them (`transfer.csv`, `transfer_groups.csv`,
//! `transfer_error.{png,svg}` in the same folder), and the profile to `--out`.
//! The GPU is the one engine-bench names in its first runner's line
//! (`--gpu` must agree with it when given): any GPU of the datasheet table
//! the CUDA runner runs on. Its slices are described by the copy bandwidth
//! their runners measured (engine_family.csv's `copy_bandwidth_tb_s`), the
//! whole GPU by its datasheet. Fails, saying what to do, when engine-bench
//! is missing, the GPU is not in the table or is not the one `--gpu` names,
//! or a measurement fails; what was measured
//! stays in the folder.

use crate::calibrate::datasheet_key;
use crate::transfer_check::{fit_and_write, TransferArgs};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The granularity of a green context's SMs (the driver gives 8, 16, 24, ...).
pub const SM_STEP: usize = 8;

/// What to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Every size measured on the whole GPU.
    pub models: Vec<String>,
    /// The sizes whose kernel groups are timed, and which run on the slices.
    pub slice_models: Vec<String>,
    pub sm_counts: Vec<usize>,
}

impl Plan {
    /// The engine-bench argument lists, in the order they run.
    pub fn commands(&self, out: &Path) -> Vec<Vec<String>> {
        let out = out.display().to_string();
        let list = |m: &[String]| m.join(",");
        let others: Vec<String> = self
            .models
            .iter()
            .filter(|m| !self.slice_models.contains(m))
            .cloned()
            .collect();
        let mut v = vec![vec![
            "--family".into(),
            list(&self.slice_models),
            "--operators".into(),
            "--out".into(),
            out.clone(),
        ]];
        if !others.is_empty() {
            v.push(vec![
                "--family".into(),
                list(&others),
                "--out".into(),
                out.clone(),
            ]);
        }
        if !self.sm_counts.is_empty() {
            let counts: Vec<String> = self.sm_counts.iter().map(usize::to_string).collect();
            v.push(vec![
                "--family".into(),
                list(&self.slice_models),
                "--sm-counts".into(),
                counts.join(","),
                "--out".into(),
                out,
            ]);
        }
        v
    }

    /// Refuses a plan the fit cannot use, saying what to change.
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.slice_models.is_empty(),
            "--slice-models is empty: the kernel-group costs of at least one size are needed"
        );
        for m in &self.slice_models {
            anyhow::ensure!(
                self.models.contains(m),
                "--slice-models names {m}, which --models does not: every size is measured on the whole GPU too"
            );
        }
        for &n in &self.sm_counts {
            anyhow::ensure!(
                n >= SM_STEP && n % SM_STEP == 0,
                "--sm-counts {n}: a green context holds a multiple of {SM_STEP} SMs"
            );
        }
        Ok(())
    }

    /// Refuses slices as large as `gpu`'s whole SM count (the whole GPU is
    /// measured anyway).
    pub fn check_on(&self, gpu: &sim::GpuSpec) -> anyhow::Result<()> {
        for &n in &self.sm_counts {
            anyhow::ensure!(
                (n as u32) < gpu.sm_count,
                "--sm-counts {n}: the {} has {} SMs; a slice must have fewer",
                gpu.name,
                gpu.sm_count
            );
        }
        Ok(())
    }
}

/// The device and SM count of an engine-bench runner line (`[MODEL] LABEL:
/// DEVICE with N SMs, copy bandwidth ...`).
pub fn runner_device(line: &str) -> Option<(String, u32)> {
    let (_, rest) = line.split_once("] ")?;
    let (_, rest) = rest.split_once(": ")?;
    let (device, rest) = rest.split_once(" with ")?;
    let (sms, _) = rest.split_once(" SMs, copy bandwidth")?;
    Some((device.trim().to_string(), sms.trim().parse().ok()?))
}

/// The datasheet entry of the GPU engine-bench ran on, from its log: the
/// first whole-GPU runner line; it must be `wanted` when given.
fn gpu_of_log(log: &str, wanted: Option<&str>) -> anyhow::Result<String> {
    let (device, sms) = log
        .lines()
        .filter(|l| l.contains("] whole GPU: "))
        .find_map(runner_device)
        .context("engine-bench named no device (no whole-GPU runner line in its output)")?;
    let key = datasheet_key(&device);
    match (key, wanted) {
        (Some(k), Some(w)) if k != w => anyhow::bail!(
            "--gpu {w}, but engine-bench ran on {device} ({k} in the datasheet table): \
             drop --gpu or name {k}"
        ),
        (_, Some(w)) => Ok(w.to_string()),
        (Some(k), None) => Ok(k.to_string()),
        (None, None) => anyhow::bail!(
            "engine-bench ran on {device} ({sms} SMs), which is not in the datasheet table: \
             pass --gpu NAME of a table entry with the same SM count, bandwidth and FLOP/s"
        ),
    }
}

/// `OUT.measured`: where the rows and the fit's tables go, beside `--out`.
pub fn measured_dir(out: &Path) -> PathBuf {
    out.with_extension("measured")
}

/// The engine-bench beside this executable.
fn default_engine_bench() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding exp's own executable")?;
    Ok(exe.with_file_name("engine-bench"))
}

/// Runs the plan, fits, writes the profile to `out`.
pub fn run(
    plan: &Plan,
    engine_bench: Option<&Path>,
    gpu: Option<&str>,
    out: &Path,
    fit_starts: usize,
    quiet: bool,
) -> anyhow::Result<()> {
    if let Some(g) = gpu {
        calibration::datasheet::lookup(g)?;
    }
    plan.check()?;
    let bench = match engine_bench {
        Some(p) => p.to_path_buf(),
        None => default_engine_bench()?,
    };
    anyhow::ensure!(
        bench.is_file(),
        "no engine-bench at {}: build it with `cargo build --release --features cuda -p engine \
         --bin engine-bench` (it goes beside exp) or pass --engine-bench PATH",
        bench.display()
    );
    let dir = measured_dir(out);
    if dir.join("engine_family.csv").exists() {
        anyhow::bail!(
            "{} already holds measured rows, which this run would append to: move it away or \
             choose another --out",
            dir.display()
        );
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let log_path = dir.join("engine-bench.log");
    let mut log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let started = Instant::now();
    let commands = plan.commands(&dir);
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new_spinner();
        b.set_style(ProgressStyle::with_template(
            "{spinner} [{elapsed}] {prefix} {msg}",
        )?);
        b
    };
    let mut gpu_key: Option<String> = None;
    for (i, args) in commands.iter().enumerate() {
        bar.set_prefix(format!("engine-bench {}/{}", i + 1, commands.len()));
        writeln!(log, "$ {} {}", bench.display(), args.join(" "))?;
        run_logged(&bench, args, &mut log, &bar).with_context(|| {
            format!(
                "engine-bench {} failed; what it measured is in {} and its output in {}",
                args.join(" "),
                dir.display(),
                log_path.display()
            )
        })?;
        if gpu_key.is_none() {
            // The first command runs on the whole GPU: its device decides
            // the datasheet entry before the slices take their time.
            let text = std::fs::read_to_string(&log_path)
                .with_context(|| format!("reading {}", log_path.display()))?;
            let key = gpu_of_log(&text, gpu)?;
            plan.check_on(&calibration::datasheet::lookup(&key)?)?;
            gpu_key = Some(key);
        }
    }
    let gpu_key = gpu_key.context("the plan ran no engine-bench command")?;
    bar.finish_and_clear();
    let measured_s = started.elapsed().as_secs_f64();
    // Decode mixes, where the plan measured them (engine-bench --decode-mix).
    let mixes = dir.join("operators/decode_mix.csv");
    let decode_mixes = if mixes.exists() {
        vec![format!("{gpu_key}={}", mixes.display())]
    } else {
        Vec::new()
    };
    let args = TransferArgs {
        family: dir.join("engine_family.csv"),
        groups: dir.join("operators/groups.csv"),
        gemm_shapes: dir.join("operators/gemm_shapes.csv"),
        gpu: gpu_key,
        held_out_gpus: Vec::new(),
        decode_mixes,
        lone_blocks: Vec::new(),
        fit_starts,
        out: dir.clone(),
        quiet,
    };
    fit_and_write(&args, "exp calibrate --operators")?;
    let fitted = dir.join("operator_profile.ron");
    std::fs::copy(&fitted, out)
        .with_context(|| format!("copying {} to {}", fitted.display(), out.display()))?;
    if !quiet {
        eprintln!(
            "measured in {measured_s:.0} s, fitted in {:.0} s; wrote {} (price runs with \
             --cost-model operators --operator-profile {})",
            started.elapsed().as_secs_f64() - measured_s,
            out.display(),
            out.display()
        );
    }
    Ok(())
}

/// Runs `bench args`, every line of its output into `log` and the latest on
/// the spinner; an exit status other than success is an error.
fn run_logged(
    bench: &Path,
    args: &[String],
    log: &mut std::fs::File,
    bar: &ProgressBar,
) -> anyhow::Result<()> {
    let mut child = Command::new(bench)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", bench.display()))?;
    let stdout = child.stdout.take().context("engine-bench's stdout")?;
    let stderr = child.stderr.take().context("engine-bench's stderr")?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let pump = |stream: Box<dyn std::io::Read + Send>, tx: std::sync::mpsc::Sender<String>| {
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
    };
    let threads = [
        pump(Box::new(stdout), tx.clone()),
        pump(Box::new(stderr), tx),
    ];
    for line in rx {
        writeln!(log, "{line}")?;
        bar.set_message(line);
        bar.tick();
    }
    for t in threads {
        let _ = t.join();
    }
    let status = child.wait().context("waiting for engine-bench")?;
    anyhow::ensure!(status.success(), "exit status {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            models: vec!["qwen3-0.6b".into(), "qwen3-8b".into(), "qwen3-32b".into()],
            slice_models: vec!["qwen3-0.6b".into(), "qwen3-8b".into()],
            sm_counts: vec![16, 32],
        }
    }

    #[test]
    fn groups_on_the_slice_models_then_the_others_then_the_slices() {
        let c = plan().commands(Path::new("d"));
        assert_eq!(
            c,
            [
                vec![
                    "--family",
                    "qwen3-0.6b,qwen3-8b",
                    "--operators",
                    "--out",
                    "d"
                ],
                vec!["--family", "qwen3-32b", "--out", "d"],
                vec![
                    "--family",
                    "qwen3-0.6b,qwen3-8b",
                    "--sm-counts",
                    "16,32",
                    "--out",
                    "d"
                ],
            ]
        );
        let whole_only = Plan {
            models: vec!["qwen3-8b".into()],
            slice_models: vec!["qwen3-8b".into()],
            sm_counts: vec![],
        };
        assert_eq!(whole_only.commands(Path::new("d")).len(), 1);
    }

    #[test]
    fn a_plan_the_fit_cannot_use_is_refused() {
        assert!(plan().check().is_ok());
        let e = Plan {
            sm_counts: vec![12],
            ..plan()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("--sm-counts 12") && e.contains("multiple of 8"),
            "{e}"
        );
        let h100 = calibration::datasheet::lookup("h100-sxm").unwrap();
        assert!(plan().check_on(&h100).is_ok());
        let e = Plan {
            sm_counts: vec![136],
            ..plan()
        }
        .check_on(&h100)
        .unwrap_err()
        .to_string();
        assert!(e.contains("132 SMs"), "{e}");
        let e = Plan {
            slice_models: vec!["qwen3-4b".into()],
            ..plan()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.contains("qwen3-4b") && e.contains("--models"), "{e}");
        assert!(Plan {
            slice_models: vec![],
            ..plan()
        }
        .check()
        .is_err());
    }

    #[test]
    fn the_gpu_is_the_one_engine_bench_names() {
        let line = "[qwen3-0.6b] whole GPU: NVIDIA H100 80GB HBM3 with 132 SMs, copy bandwidth \
                    2.74 TB/s, 5384 KV blocks";
        assert_eq!(
            runner_device(line),
            Some(("NVIDIA H100 80GB HBM3".to_string(), 132))
        );
        let slice =
            "[qwen3-8b] 16 SMs: NVIDIA H200 with 16 SMs, copy bandwidth 1.50 TB/s, 5384 KV blocks";
        let log = format!("$ engine-bench --family ...\n{slice}\n[x] starting\n{line}\n");
        assert_eq!(gpu_of_log(&log, None).unwrap(), "h100-sxm");
        assert_eq!(gpu_of_log(&log, Some("h100-sxm")).unwrap(), "h100-sxm");
        let e = gpu_of_log(&log, Some("h200-sxm")).unwrap_err().to_string();
        assert!(
            e.contains("--gpu h200-sxm") && e.contains("h100-sxm"),
            "{e}"
        );
        let odd = "[m] whole GPU: NVIDIA GB200 with 152 SMs, copy bandwidth 7 TB/s";
        let e = gpu_of_log(odd, None).unwrap_err().to_string();
        assert!(
            e.contains("not in the datasheet table") && e.contains("--gpu"),
            "{e}"
        );
        assert!(gpu_of_log(odd, Some("h200-sxm")).is_ok());
        assert!(gpu_of_log("nothing here", None).is_err());
    }

    #[test]
    fn the_measurements_go_beside_the_profile() {
        assert_eq!(
            measured_dir(Path::new("cal/h200.ron")),
            PathBuf::from("cal/h200.measured")
        );
    }
}
