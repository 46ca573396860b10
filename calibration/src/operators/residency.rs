//! How many decode-attention blocks one SM holds at once.
//!
//! Contract: [`decode_blocks_per_sm`] is the number of blocks of a decode
//! kernel that fit on one SM together, bounded by the registers its threads
//! take ([`decode_registers`]) out of an SM's 65,536, by the SM's warps
//! ([`super::attention::WARPS_PER_SM`]) and by 32 blocks; never below 1.
//! Register counts are ptxas's for sm_90 (NVRTC 13.0, `python3
//! scripts/nvrtc_check.py --verbose`, 2026-12-07) for head_dim 128, the
//! RoPE-fused variants that decode-only steps run; they grow with the GQA
//! group, since each lane keeps the group's query heads in registers. Groups
//! between measured ones take the larger neighbour's count, groups beyond
//! 8 the register file's limit (255). Every GPU of the datasheet table has
//! 65,536 registers an SM; per-architecture register counts are not
//! modelled.
//!
//! Why: on the H200 batch-64 decode attention of 4-warp blocks (512 blocks)
//! runs in waves of what fits. Group 4 (167 registers, 3 blocks an SM)
//! takes 49.3 / 73.1 / 137.3 µs a layer on 132 / 64 / 32 SMs, 2 / 3 / 6
//! waves of 22–23 µs (`results/h200/operators/groups.csv`).

use super::attention::WARPS_PER_SM;
use engine::runner::attention_choice::DecodeKernel;

/// Registers of one SM.
pub const REGISTERS_PER_SM: usize = 65_536;
/// Most blocks one SM holds (sm_90).
pub const MAX_BLOCKS_PER_SM: usize = 32;
/// Registers are given to a warp in units of 256 (8 a thread).
const REGISTER_UNIT_PER_THREAD: usize = 8;

/// ptxas's registers a thread for (group, [Prefetch8, BlockW4U4, BlockW8U4,
/// HeadsU4]); the block and heads kernels' RoPE-fused variants.
const REGISTERS: [(usize, [usize; 4]); 5] = [
    (2, [128, 127, 127, 92]),
    (3, [168, 146, 145, 122]),
    (4, [179, 167, 183, 161]),
    (5, [206, 198, 202, 168]),
    (8, [252, 255, 255, 242]),
];

/// Registers a thread of `kernel` takes at GQA group `group` (head_dim 128).
pub fn decode_registers(kernel: DecodeKernel, group: usize) -> usize {
    let column = match kernel {
        DecodeKernel::Prefetch8 => 0,
        DecodeKernel::BlockW4U4 => 1,
        DecodeKernel::BlockW8U4 => 2,
        DecodeKernel::HeadsU4 => 3,
    };
    REGISTERS
        .iter()
        .find(|(g, _)| *g >= group)
        .map_or(255, |(_, regs)| regs[column])
}

/// Blocks of `warps` warps of `kernel` that one SM holds at once (module docs).
pub fn decode_blocks_per_sm(kernel: DecodeKernel, group: usize, warps: usize) -> usize {
    let warps = warps.max(1);
    let regs = decode_registers(kernel, group).next_multiple_of(REGISTER_UNIT_PER_THREAD);
    let by_registers = REGISTERS_PER_SM / (regs * 32 * warps);
    by_registers
        .min(WARPS_PER_SM / warps)
        .clamp(1, MAX_BLOCKS_PER_SM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_kernels_hold_fewer_blocks_as_the_group_grows() {
        let w4 = |g| decode_blocks_per_sm(DecodeKernel::BlockW4U4, g, 4);
        // 127 / 167 / 198 / 255 registers: 4 / 3 / 2 / 2 blocks of 128 threads.
        assert_eq!([w4(2), w4(4), w4(5), w4(8)], [4, 3, 2, 2]);
        let w8 = |g| decode_blocks_per_sm(DecodeKernel::BlockW8U4, g, 8);
        assert_eq!([w8(2), w8(4), w8(8)], [2, 1, 1]);
        // A warp per KV head, 8 KV heads: 92 registers (96 allocated) at group 2.
        assert_eq!(decode_blocks_per_sm(DecodeKernel::HeadsU4, 2, 8), 2);
        assert_eq!(decode_blocks_per_sm(DecodeKernel::HeadsU4, 4, 8), 1);
    }

    #[test]
    fn unmeasured_groups_take_the_next_measured_count_and_never_hold_no_block() {
        assert_eq!(decode_registers(DecodeKernel::BlockW4U4, 1), 127);
        assert_eq!(decode_registers(DecodeKernel::BlockW4U4, 6), 255);
        assert_eq!(decode_registers(DecodeKernel::BlockW4U4, 16), 255);
        // 32 warps of 255 registers do not fit in 65,536: one block still runs.
        assert_eq!(decode_blocks_per_sm(DecodeKernel::BlockW8U4, 16, 32), 1);
        // The kernel of a warp a unit runs blocks of 4 warps.
        assert_eq!(decode_blocks_per_sm(DecodeKernel::Prefetch8, 2, 4), 4);
    }
}
