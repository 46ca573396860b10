//! Levenberg–Marquardt over positive parameters, in log space.
//!
//! Contract: [`minimize`] finds `x > 0` minimising `Σ r_i(x)²` for residuals
//! given by a closure, starting at `x0`, with a forward-difference Jacobian in
//! `ln x`. It stops when a step improves the sum by less than a relative
//! 1e-10 or after `max_iter` iterations, and never returns a worse point than
//! it was given. [`minimize_from_starts`] runs it from `x0` and from a fixed,
//! seeded set of points around it, on rayon's threads, and keeps the best: the
//! same inputs give the same point on any machine.

/// Solves `a x = b` for a small dense symmetric positive system (Gaussian
/// elimination with partial pivoting); `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for c in 0..n {
        let piv = (c..n).max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))?;
        if a[piv][c].abs() < 1e-300 {
            return None;
        }
        a.swap(c, piv);
        b.swap(c, piv);
        let pivot_row = a[c].clone();
        for r in c + 1..n {
            let f = a[r][c] / pivot_row[c];
            for (x, p) in a[r][c..].iter_mut().zip(&pivot_row[c..]) {
                *x -= f * p;
            }
            b[r] -= f * b[c];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|k| a[r][k] * x[k]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    Some(x)
}

fn sum_sq(r: &[f64]) -> f64 {
    r.iter().map(|v| v * v).sum()
}

pub fn minimize<F: Fn(&[f64]) -> Vec<f64>>(residuals: F, x0: &[f64], max_iter: usize) -> Vec<f64> {
    descend(residuals, x0, max_iter).0
}

/// [`minimize`]'s end point and its `Σ r²`.
fn descend<F: Fn(&[f64]) -> Vec<f64>>(
    residuals: F,
    x0: &[f64],
    max_iter: usize,
) -> (Vec<f64>, f64) {
    let n = x0.len();
    let mut u: Vec<f64> = x0.iter().map(|v| v.ln()).collect();
    let eval = |u: &[f64]| residuals(&u.iter().map(|v| v.exp()).collect::<Vec<_>>());
    let mut r = eval(&u);
    let mut cost = sum_sq(&r);
    let mut lambda = 1e-3;
    for _ in 0..max_iter {
        let h = 1e-6;
        let jac: Vec<Vec<f64>> = (0..n)
            .map(|j| {
                let mut up = u.clone();
                up[j] += h;
                eval(&up).iter().zip(&r).map(|(a, b)| (a - b) / h).collect()
            })
            .collect();
        let mut jtj = vec![vec![0.0; n]; n];
        let mut jtr = vec![0.0; n];
        for a in 0..n {
            for b in 0..n {
                jtj[a][b] = jac[a].iter().zip(&jac[b]).map(|(x, y)| x * y).sum();
            }
            jtr[a] = -jac[a].iter().zip(&r).map(|(x, y)| x * y).sum::<f64>();
        }
        let mut improved = false;
        for _ in 0..20 {
            let mut damped = jtj.clone();
            for (a, row) in damped.iter_mut().enumerate() {
                row[a] += lambda * (jtj[a][a] + 1e-12);
            }
            let Some(step) = solve(damped, jtr.clone()) else {
                lambda *= 10.0;
                continue;
            };
            let trial: Vec<f64> = u
                .iter()
                .zip(&step)
                .map(|(a, s)| a + s.clamp(-3.0, 3.0))
                .collect();
            let tr = eval(&trial);
            let tc = sum_sq(&tr);
            if tc.is_finite() && tc < cost {
                let gain = (cost - tc) / cost.max(1e-300);
                u = trial;
                r = tr;
                cost = tc;
                lambda = (lambda / 3.0).max(1e-12);
                improved = gain > 1e-10;
                break;
            }
            lambda *= 10.0;
        }
        if !improved {
            break;
        }
    }
    (u.iter().map(|v| v.exp()).collect(), cost)
}

/// SplitMix64: a fixed sequence, so that the starts (and so the fit) are
/// the same on every machine and with every version of every crate.
fn split_mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `x0` and `starts` points around it: each coordinate of `x0` times
/// `e^(spread · u)`, `u` uniform in [−1, 1).
fn start_points(x0: &[f64], starts: usize, spread: f64) -> Vec<Vec<f64>> {
    let mut state = 0;
    let mut points = vec![x0.to_vec()];
    for _ in 0..starts {
        points.push(
            x0.iter()
                .map(|v| {
                    let u = (split_mix(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
                    v * (spread * (2.0 * u - 1.0)).exp()
                })
                .collect(),
        );
    }
    points
}

/// [`minimize`] from `x0` and from `starts` points around it (each
/// coordinate times `e^(±spread)` at most), on rayon's threads; the end point of
/// lowest `Σ r²`, the earlier start on a tie. Why: a cost with terms that
/// step (whole waves, tiles) or bend (smooth maxima) has several minima,
/// and one descent from `x0` stops in the first it meets.
pub fn minimize_from_starts<F: Fn(&[f64]) -> Vec<f64> + Sync>(
    residuals: F,
    x0: &[f64],
    starts: usize,
    spread: f64,
    max_iter: usize,
) -> Vec<f64> {
    use rayon::prelude::*;
    start_points(x0, starts, spread)
        .par_iter()
        .map(|start| descend(&residuals, start, max_iter))
        .collect::<Vec<_>>()
        .into_iter()
        .enumerate()
        .min_by(|(i, a), (j, b)| a.1.total_cmp(&b.1).then(i.cmp(j)))
        .map_or_else(|| x0.to_vec(), |(_, (x, _))| x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_the_parameters_of_a_power_law() {
        // y = a x^b, a = 3, b = 0.5, from exact points.
        let xs = [1.0f64, 2.0, 4.0, 8.0, 16.0];
        let fit = minimize(
            |p| {
                xs.iter()
                    .map(|x| (p[0] * x.powf(p[1])).ln() - (3.0 * x.sqrt()).ln())
                    .collect()
            },
            &[1.0, 1.0],
            200,
        );
        assert!(
            (fit[0] - 3.0).abs() < 1e-6 && (fit[1] - 0.5).abs() < 1e-6,
            "{fit:?}"
        );
    }

    /// In `y = ln x`: `(y² − 1)² + 0.3 (y − 1)²`, minima near `y = −1`
    /// (cost about 1.2) and at `y = 1` (cost 0).
    fn double_well(p: &[f64]) -> Vec<f64> {
        let y = p[0].ln();
        vec![y * y - 1.0, 0.3f64.sqrt() * (y - 1.0)]
    }

    #[test]
    fn one_descent_stops_in_the_nearer_minimum_and_the_starts_find_the_lower() {
        let x0 = [(-1.2f64).exp()];
        let one = minimize(double_well, &x0, 200);
        assert!(one[0].ln() < 0.0, "one descent from y = -1.2: {one:?}");
        let best = minimize_from_starts(double_well, &x0, 8, 3.0, 200);
        assert!((best[0].ln() - 1.0).abs() < 1e-4, "{best:?}");
        let again = minimize_from_starts(double_well, &x0, 8, 3.0, 200);
        assert_eq!(best, again, "the same starts give the same point");
    }

    #[test]
    fn without_starts_it_is_one_descent() {
        let x0 = [(-1.2f64).exp()];
        assert_eq!(
            minimize_from_starts(double_well, &x0, 0, 3.0, 200),
            minimize(double_well, &x0, 200)
        );
    }
}
