//! The fit on the grid measured on the H200: results/h200/calibration_samples.csv,
//! the 120 points of `Grid::gpu_default` measured on 2026-11-30 at 21:03 UTC by
//! the engine of commit 3067d47 (with uncommitted changes: `-dirty`), on which the
//! shipped profile calibration/profiles/h200-qwen3-0.6b.ron was fitted, refitted
//! by the current code.

use calibration::features::DENSE_START;
use calibration::fit::{least_squares_problem, NNLS_SWEEPS};
use calibration::nnls::nnls;
use calibration::{fit, samples_from_csv, Grid, Provenance, Sample};
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

/// Columns of a matrix, each a vector of its rows.
type Columns = Vec<Vec<f64>>;

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// `b − A x` for `A` given by its columns.
fn residual_vector(a: &Columns, b: &[f64], x: &[f64]) -> Vec<f64> {
    let mut r = b.to_vec();
    for (col, &xj) in a.iter().zip(x) {
        for (ri, cij) in r.iter_mut().zip(col) {
            *ri -= cij * xj;
        }
    }
    r
}

/// Least squares of `b` on the columns `cols` of `a` by Householder QR with
/// column pivoting: a column that adds nothing to those before it (its
/// remaining norm below 1e-12 of the first's) gets 0, so a rank-deficient
/// set still gets a solution (a basic one); the other coefficients are 0.
fn lstsq_on(a: &Columns, b: &[f64], cols: &[usize]) -> Vec<f64> {
    let mut r: Columns = cols.iter().map(|&j| a[j].clone()).collect();
    let mut order: Vec<usize> = (0..cols.len()).collect();
    let mut qtb = b.to_vec();
    let m = b.len();
    let mut rank = 0;
    let mut first_norm = 0.0;
    for k in 0..cols.len().min(m) {
        // Pivot: the column with the most left below row k.
        let tail = |c: &Vec<f64>| c[k..].iter().map(|v| v * v).sum::<f64>();
        let p = (k..r.len())
            .max_by(|&p, &q| tail(&r[p]).total_cmp(&tail(&r[q])))
            .expect("k < columns");
        r.swap(k, p);
        order.swap(k, p);
        let norm = tail(&r[k]).sqrt();
        if k == 0 {
            first_norm = norm;
        }
        if norm <= 1e-12 * first_norm {
            break;
        }
        // The reflector that maps r[k][k..] onto ∓norm e_k.
        let alpha = if r[k][k] > 0.0 { -norm } else { norm };
        let mut v = r[k][k..].to_vec();
        v[0] -= alpha;
        let vv = dot(&v, &v);
        let reflect = |x: &mut [f64]| {
            let f = 2.0 * dot(&v, x) / vv;
            for (xi, vi) in x.iter_mut().zip(&v) {
                *xi -= f * vi;
            }
        };
        for col in r.iter_mut().skip(k) {
            reflect(&mut col[k..]);
        }
        reflect(&mut qtb[k..]);
        rank = k + 1;
    }
    // Back substitution on the leading rank × rank triangle.
    let mut z = vec![0.0; rank];
    for i in (0..rank).rev() {
        let s: f64 = (i + 1..rank).map(|j| r[j][i] * z[j]).sum();
        z[i] = (qtb[i] - s) / r[i][i];
    }
    let mut x = vec![0.0; a.len()];
    for (i, &zi) in z.iter().enumerate() {
        x[cols[order[i]]] = zi;
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
    let columns: Columns = (0..n)
        .map(|j| rows.iter().map(|r| r[j]).collect())
        .collect();
    let norms: Vec<f64> = columns.iter().map(|c| dot(c, c).sqrt()).collect();
    let live: Vec<usize> = (0..n).filter(|&j| norms[j] > 0.0).collect();
    let scaled: Columns = columns
        .into_iter()
        .zip(&norms)
        .map(|(c, &norm)| {
            if norm > 0.0 {
                c.iter().map(|v| v / norm).collect()
            } else {
                c
            }
        })
        .collect();
    let gradient = |x: &[f64]| -> Vec<f64> {
        let r = residual_vector(&scaled, rhs, x);
        scaled.iter().map(|c| dot(c, &r)).collect()
    };
    let mut x = vec![0.0; n];
    let mut active: Vec<usize> = Vec::new();
    for _ in 0..10 * n {
        let w = gradient(&x);
        let Some(&j) = live
            .iter()
            .filter(|j| !active.contains(j) && w[**j] > 1e-12)
            .max_by(|p, q| w[**p].total_cmp(&w[**q]))
        else {
            break;
        };
        active.push(j);
        loop {
            let z = lstsq_on(&scaled, rhs, &active);
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
            for (xk, zk) in x.iter_mut().zip(&z) {
                *xk += (zk - *xk) * alpha;
            }
            active.retain(|&k| x[k] > 1e-15);
            for (k, xk) in x.iter_mut().enumerate() {
                if !active.contains(&k) {
                    *xk = 0.0;
                }
            }
        }
    }
    // The KKT conditions hold: no inactive coefficient could lower the residual.
    let w = gradient(&x);
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

/// The exact solver's least squares: a column that repeats another gets 0
/// and the rest still fit `b` exactly where `b` lies in their span.
#[test]
fn pivoted_least_squares_solves_a_rank_deficient_set_exactly() {
    // Columns: (1, 0, 0), (0, 1, 0), 2 × the first, (1, 1, 1).
    let a: Columns = vec![
        vec![1.0, 0.0, 0.0],
        vec![0.0, 1.0, 0.0],
        vec![2.0, 0.0, 0.0],
        vec![1.0, 1.0, 1.0],
    ];
    let b = [3.0, 5.0, 2.0];
    let x = lstsq_on(&a, &b, &[0, 1, 2, 3]);
    let r = residual_vector(&a, &b, &x);
    assert!(dot(&r, &r).sqrt() < 1e-12, "{x:?}");
    // One of the two parallel columns carries it all; (1, 1, 1) takes 2.
    assert!((x[3] - 2.0).abs() < 1e-12, "{x:?}");
    assert!(x[0] == 0.0 || x[2] == 0.0, "{x:?}");
    assert!((x[0] + 2.0 * x[2] - 1.0).abs() < 1e-12, "{x:?}");
    // Off its columns a coefficient is 0; b outside their span is fitted
    // in least squares (the residual is orthogonal to them).
    let x = lstsq_on(&a, &b, &[0, 1]);
    assert_eq!((x[2], x[3]), (0.0, 0.0));
    assert!(
        (x[0] - 3.0).abs() < 1e-12 && (x[1] - 5.0).abs() < 1e-12,
        "{x:?}"
    );
}
