//! `argmax_rows`, the kernel that writes into page-locked host memory (the
//! sampled tokens' keys, each row's by the last of its blocks).

use super::{Ctx, KernelCheck};
use crate::runner::cuda::device::{launch, Arg, PinnedBuffer};
use crate::runner::cuda::meta::argmax_index;
use crate::runner::RunnerError;

pub(super) fn check_argmax(c: &mut Ctx) -> Result<KernelCheck, RunnerError> {
    // Rows span two 4096-wide chunks (two blocks fold into one key).
    let (rows, v) = (4usize, 5000usize);
    let mut l = c.randn(rows * v, 1.0);
    l[v + 4321] = 7.0;
    l[2 * v + 17] = 7.0;
    l[2 * v + 4500] = 7.0; // tie across chunks: the lower index wins
    l[3 * v + 4999] = 9.0; // last element of the partial chunk
    let ld = c.up(&l)?;
    let od = c.up(&vec![0i32; 2 * rows])?; // zeroed 64-bit keys
    let done = c.up(&vec![0i32; rows])?;
    let mut host = PinnedBuffer::<u64>::new(&c.ctx, rows)?;
    host.as_mut_slice().fill(u64::MAX);
    launch(
        &c.stream,
        &c.k.argmax_rows,
        "argmax_rows",
        (v.div_ceil(4096) as u32, rows as u32, 1),
        256,
        0,
        &[
            Arg::Ptr(ld.ptr),
            Arg::Ptr(od.ptr),
            Arg::I32(v as i32),
            Arg::Ptr(done.ptr),
            Arg::Ptr(host.device_ptr()),
        ],
    )?;
    let keys: Vec<u64> = c.down(&od, rows)?;
    let blocks_done: Vec<i32> = c.down(&done, rows)?;
    let got: Vec<i32> = keys.iter().map(|&k| argmax_index(k) as i32).collect();
    let want: Vec<i32> = (0..rows)
        .map(|r| {
            let row = &l[r * v..(r + 1) * v];
            let mut best = 0;
            for (i, &x) in row.iter().enumerate() {
                if x > row[best] {
                    best = i;
                }
            }
            best as i32
        })
        .collect();
    let mut wrong = got.iter().zip(&want).filter(|(a, b)| a != b).count();
    // The host copy is the device's keys, written once every block had folded its own in.
    wrong += host
        .as_slice()
        .iter()
        .zip(&keys)
        .filter(|(h, d)| h != d)
        .count();
    wrong += blocks_done.iter().filter(|&&n| n != 2).count();
    let host_got: Vec<u32> = host.as_slice().iter().map(|&k| argmax_index(k)).collect();
    Ok(KernelCheck {
        name: "argmax_rows".into(),
        max_abs_err: wrong as f64,
        rel_l2_err: 0.0,
        pass: wrong == 0,
        note: format!(
            "got {got:?} want {want:?}; host copy {host_got:?}, blocks done per row {blocks_done:?}"
        ),
    })
}
