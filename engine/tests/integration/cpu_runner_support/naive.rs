//! Qwen3 forward pass in plain loops, written from Hugging Face's
//! `modeling_qwen3.py` independently of the runner: no paging, no batching,
//! f64 accumulation, RoPE angles in f64.

use engine::model::{HostTensor, Qwen3Config, Qwen3Weights};

fn matvec(w: &HostTensor, x: &[f32]) -> Vec<f32> {
    let cols = w.shape[1];
    assert_eq!(cols, x.len());
    w.data
        .chunks_exact(cols)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| a.to_f32() as f64 * *b as f64)
                .sum::<f64>() as f32
        })
        .collect()
}

fn rms_norm(x: &[f32], w: &HostTensor, eps: f64) -> Vec<f32> {
    let ms = x.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps).sqrt();
    x.iter()
        .zip(&w.data)
        .map(|(v, g)| (*v as f64 * inv) as f32 * g.to_f32())
        .collect()
}

fn rope(head: &mut [f32], pos: usize, theta: f64) {
    let d = head.len();
    for i in 0..d / 2 {
        let angle = pos as f64 / theta.powf(2.0 * i as f64 / d as f64);
        let (a, b) = (head[i] as f64, head[i + d / 2] as f64);
        head[i] = (a * angle.cos() - b * angle.sin()) as f32;
        head[i + d / 2] = (b * angle.cos() + a * angle.sin()) as f32;
    }
}

/// Logits at every position of `tokens`.
pub fn logits(c: &Qwen3Config, w: &Qwen3Weights, tokens: &[u32]) -> Vec<Vec<f32>> {
    let (h, hd) = (c.hidden_size, c.head_dim);
    let group = c.num_attention_heads / c.num_key_value_heads;
    let mut x: Vec<Vec<f32>> = tokens
        .iter()
        .map(|&t| {
            w.embed_tokens.data[t as usize * h..(t as usize + 1) * h]
                .iter()
                .map(|v| v.to_f32())
                .collect()
        })
        .collect();
    for l in &w.layers {
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, xi) in x.iter().enumerate() {
            let xn = rms_norm(xi, &l.input_layernorm, c.rms_norm_eps);
            let mut q = matvec(&l.q_proj, &xn);
            let mut k = matvec(&l.k_proj, &xn);
            for head in q.chunks_exact_mut(hd) {
                let normed = rms_norm(head, &l.q_norm, c.rms_norm_eps);
                head.copy_from_slice(&normed);
                rope(head, pos, c.rope_theta);
            }
            for head in k.chunks_exact_mut(hd) {
                let normed = rms_norm(head, &l.k_norm, c.rms_norm_eps);
                head.copy_from_slice(&normed);
                rope(head, pos, c.rope_theta);
            }
            qs.push(q);
            ks.push(k);
            vs.push(matvec(&l.v_proj, &xn));
        }
        for (i, xi) in x.iter_mut().enumerate() {
            let mut attn = vec![0.0f32; c.q_size()];
            for head in 0..c.num_attention_heads {
                let kvh = head / group;
                let q = &qs[i][head * hd..(head + 1) * hd];
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        let k = &ks[j][kvh * hd..(kvh + 1) * hd];
                        q.iter()
                            .zip(k)
                            .map(|(a, b)| *a as f64 * *b as f64)
                            .sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let exps: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let sum: f64 = exps.iter().sum();
                for d in 0..hd {
                    let v: f64 = (0..=i)
                        .map(|j| exps[j] / sum * vs[j][kvh * hd + d] as f64)
                        .sum();
                    attn[head * hd + d] = v as f32;
                }
            }
            let o = matvec(&l.o_proj, &attn);
            xi.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let xn = rms_norm(xi, &l.post_attention_layernorm, c.rms_norm_eps);
            let gate = matvec(&l.gate_proj, &xn);
            let up = matvec(&l.up_proj, &xn);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| (*g as f64 / (1.0 + (-*g as f64).exp()) * *u as f64) as f32)
                .collect();
            let down = matvec(&l.down_proj, &act);
            xi.iter_mut().zip(&down).for_each(|(a, b)| *a += b);
        }
    }
    x.iter()
        .map(|xi| matvec(w.lm_head(), &rms_norm(xi, &w.norm, c.rms_norm_eps)))
        .collect()
}
