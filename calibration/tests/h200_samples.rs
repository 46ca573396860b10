//! The fit on the grid measured on the H200: results/h200/calibration_samples.csv,
//! the 120 points of `Grid::gpu_default` measured on 2026-11-30 at 21:03 UTC by
//! the engine of commit 3067d47 (with uncommitted changes: `-dirty`), on which the
//! shipped profile calibration/profiles/h200-qwen3-0.6b.ron was fitted, refitted
//! by the current code.

use calibration::features::DENSE_START;
use calibration::fit::{least_squares_problem, NNLS_SWEEPS};
use calibration::nnls::nnls;
use calibration::{fit, samples_from_csv, Grid, Provenance, Sample};
use nalgebra::{DMatrix, DVector};
use sim::{GpuSpec, ModelShape};
use std::path::Path;

fn h200() -> GpuSpec {
    GpuSpec {
        name: "h200-sxm".into(),
        bf16_flops: 989.4e12,
        mem_bandwidth: 4.8e12,
        mem_bytes: 141e9,
        sm_count: 132,
        source: "test literal".into(),
    }
}

/// The measured samples, paired with the grid shapes they were measured on.
fn h200_samples() -> Vec<Sample> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../results/h200/calibration_samples.csv"
    );
    let text = std::fs::read_to_string(path).expect("committed samples");
    samples_from_csv(&text, Path::new(path), &Grid::gpu_default())
        .expect("samples were measured on Grid::gpu_default")
}

fn provenance() -> Provenance {
    Provenance {
        device: "NVIDIA H200".into(),
        model: "qwen3-0.6b".into(),
        engine_commit: "test".into(),
        date: "2026-11-30".into(),
        method: "refit".into(),
        samples: 0,
        holdout_error_pct_median: 0.0,
        holdout_error_pct_p90: 0.0,
    }
}

#[test]
fn refit_of_the_h200_grid_is_accurate_and_its_curves_never_fall() {
    let samples = h200_samples();
    let fitted = fit(&samples, h200(), ModelShape::qwen3_0_6b(), provenance()).unwrap();
    let p = &fitted.profile;
    eprintln!(
        "held-out median {:.2} %, p90 {:.2} %",
        p.provenance.holdout_error_pct_median, p.provenance.holdout_error_pct_p90
    );
    // These points scored 5.5 % and 12.4 % (the shipped profile's provenance)
    // when a short chunk's keys shared the decodes' coefficient; with a
    // coefficient of their own (features::CHUNK_KV) 6.6 % and 11.7 %: the
    // eager-step constant no longer bends to those chunks, which moves
    // held-out points of other shapes by 1 to 2 points either way, and the
    // chunks themselves, 7 to 11 % over at 2,000 to 3,000 cached before, are
    // priced within 3 % (asserted below). Earlier calibrations that day, of
    // earlier engines on other lent H200s, scored from 3.9 % / 9.0 % to
    // 6.2 % / 17.1 %. The p90 comes from host-bound
    // eager steps: in these points 24 decodes at context 3,000 (17 % over the
    // fit) and a 64-token prefill beside one decode (16 %). Their launches
    // take longer than their GPU work, and the lent machines differ there (a
    // 64-token prefill alone took 1.42 ms at 08:18 UTC, 1.87 at 13:32, 2.31
    // at 13:40, 1.53 at 15:18 and 1.36 at 21:03), which no GPU cost term
    // follows.
    // Validation on real runs with this profile: every step priced within
    // 1.2 % median, 2.3 % p90 (results/h200/VALIDATION.md).
    assert!(p.provenance.holdout_error_pct_median < 7.0);
    assert!(p.provenance.holdout_error_pct_p90 < 12.5);
    let tile = calibration::features::tile_tokens(&ModelShape::qwen3_0_6b());
    let chunks: Vec<&Sample> = samples
        .iter()
        .filter(|s| {
            s.shape
                .seqs
                .iter()
                .all(|q| !q.is_decode() && calibration::features::on_decode_path(q, tile))
        })
        .collect();
    assert_eq!(chunks.len(), 8, "16 and 32 tokens over 512 to 3,000 cached");
    for s in chunks {
        let predicted = sim::CostModel::step_seconds(p, &s.shape);
        let error = (predicted / s.seconds - 1.0).abs() * 100.0;
        assert!(error < 3.0, "{:?}: {error:.1} %", s.shape);
    }
    for curve in [&p.dense, &p.lm_head] {
        for w in curve.windows(2) {
            assert!(w[1].seconds >= w[0].seconds, "{curve:?}");
        }
    }
}

/// Least squares of `b` on the columns `cols` of `a` (SVD, so a rank-deficient
/// set still gets the minimum-norm solution); the other coefficients are 0.
fn lstsq_on(a: &DMatrix<f64>, b: &DVector<f64>, cols: &[usize]) -> DVector<f64> {
    let sub = a.select_columns(cols);
    let z = sub
        .svd(true, true)
        .solve(b, 1e-13)
        .expect("SVD with both factors");
    let mut x = DVector::zeros(a.ncols());
    for (k, &j) in cols.iter().enumerate() {
        x[j] = z[k];
    }
    x
}

/// The exact NNLS solution by the active-set method of Lawson and Hanson: the
/// least-squares solution on the active set that meets the Karush-Kuhn-Tucker
/// conditions (x >= 0; gradient zero on the active set, pointing outward off
/// it). The problem is convex, so that set is the one an enumeration of every
/// active set would find. Columns are scaled to unit norm first.
fn exact_nnls(rows: &[Vec<f64>], rhs: &[f64]) -> Vec<f64> {
    let n = rows[0].len();
    let a = DMatrix::from_fn(rows.len(), n, |i, j| rows[i][j]);
    let b = DVector::from_column_slice(rhs);
    let norms: Vec<f64> = (0..n).map(|j| a.column(j).norm()).collect();
    let live: Vec<usize> = (0..n).filter(|&j| norms[j] > 0.0).collect();
    let scaled = DMatrix::from_fn(a.nrows(), n, |i, j| {
        if norms[j] > 0.0 {
            a[(i, j)] / norms[j]
        } else {
            0.0
        }
    });
    let mut x = DVector::<f64>::zeros(n);
    let mut active: Vec<usize> = Vec::new();
    for _ in 0..10 * n {
        let w = scaled.transpose() * (&b - &scaled * &x);
        let Some(&j) = live
            .iter()
            .filter(|j| !active.contains(j) && w[**j] > 1e-12)
            .max_by(|p, q| w[**p].total_cmp(&w[**q]))
        else {
            break;
        };
        active.push(j);
        loop {
            let z = lstsq_on(&scaled, &b, &active);
            if active.iter().all(|&k| z[k] > 0.0) {
                x = z;
                break;
            }
            // Step from x toward z until the first active coefficient hits 0.
            let alpha = active
                .iter()
                .filter(|&&k| z[k] <= 0.0)
                .map(|&k| x[k] / (x[k] - z[k]))
                .fold(1.0, f64::min);
            x = &x + (z - &x) * alpha;
            active.retain(|&k| x[k] > 1e-15);
            for k in 0..n {
                if !active.contains(&k) {
                    x[k] = 0.0;
                }
            }
        }
    }
    // The KKT conditions hold: no inactive coefficient could lower the residual.
    let w = scaled.transpose() * (&b - &scaled * &x);
    for &j in &live {
        if active.contains(&j) {
            assert!(
                x[j] > 0.0 && w[j].abs() < 1e-9,
                "{j}: x {} w {}",
                x[j],
                w[j]
            );
        } else {
            assert!(w[j] <= 1e-9, "{j}: w {}", w[j]);
        }
    }
    (0..n)
        .map(|j| if norms[j] > 0.0 { x[j] / norms[j] } else { 0.0 })
        .collect()
}

fn residual(rows: &[Vec<f64>], rhs: &[f64], x: &[f64]) -> f64 {
    rows.iter()
        .zip(rhs)
        .map(|(r, b)| (r.iter().zip(x).map(|(a, x)| a * x).sum::<f64>() - b).powi(2))
        .sum::<f64>()
        .sqrt()
}

/// The fit's solver reaches the exact optimum of the shipped samples'
/// problem. The optimum is not unique along one direction: every step has at
/// least one token, so the first dense increment (the cost of the first
/// token) is the sum of the two step-overhead columns, and any split of a
/// constant between "overhead" and "first token" prices every step the same.
/// So the residual and every prediction must agree, and the coefficients
/// must agree up to a multiple of that direction.
#[test]
fn the_fits_nnls_solver_gives_the_exact_solution_on_the_h200_grid() {
    let (rows, rhs) = least_squares_problem(&h200_samples(), &ModelShape::qwen3_0_6b());
    let solved = nnls(&rows, &rhs, NNLS_SWEEPS);
    let exact = exact_nnls(&rows, &rhs);
    let (r_solved, r_exact) = (
        residual(&rows, &rhs, &solved),
        residual(&rows, &rhs, &exact),
    );
    assert!(
        (r_solved - r_exact).abs() <= 1e-10 * r_exact,
        "residual {r_solved} vs exact {r_exact}"
    );
    for r in &rows {
        let predict = |x: &[f64]| r.iter().zip(x).map(|(a, x)| a * x).sum::<f64>();
        assert!((predict(&solved) - predict(&exact)).abs() < 1e-9);
    }
    // The degenerate direction: graph overhead + eager overhead - first token.
    let (graph, eager, first_token) = (0, 1, DENSE_START);
    assert!(rows
        .iter()
        .all(|r| (r[graph] + r[eager] - r[first_token]).abs() < 1e-9));
    let t = solved[graph] - exact[graph];
    let mut along = vec![0.0; solved.len()];
    (along[graph], along[eager], along[first_token]) = (t, t, -t);
    let b_norm = rhs.iter().map(|b| b * b).sum::<f64>().sqrt();
    for (j, ((s, e), d)) in solved.iter().zip(&exact).zip(&along).enumerate() {
        // Each coefficient's difference, off that direction, as the change
        // it makes to the fitted values (its column's norm times it).
        let column = rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt();
        let off = (s - e - d).abs() * column;
        assert!(
            off <= 1e-8 * b_norm,
            "coefficient {j}: {s:e} vs exact {e:e}"
        );
    }
}
