//! The built-in entries. Each `source` names where every figure comes from;
//! see the module docs of `datasheet` for units and conventions.

use sim::GpuSpec;

const TERA: f64 = 1e12;
/// Decimal gigabyte, as vendors use for bandwidth (GB/s).
const GB: f64 = 1e9;
/// Binary gigabyte, as vendors' "GB" of DRAM capacity means (JEDEC).
const GIB: f64 = 1_073_741_824.0;

/// Dense bf16 FLOPs per SM per clock with FP32 accumulate on GeForce Ada
/// parts: the Ada whitepaper's RTX 4090 figure, 165.2 TFLOPS over
/// 128 SMs x 2520 MHz, is 512.1. Used to derive the laptop entries.
const ADA_GEFORCE_BF16_FLOPS_PER_SM_CLOCK: f64 = 512.0;

const ADA_WHITEPAPER: &str = "NVIDIA Ada GPU Architecture whitepaper v2.01, \
     https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf";
const HOPPER_WHITEPAPER: &str = "NVIDIA H100 Tensor Core GPU Architecture whitepaper, \
     https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper";
const H100_DATASHEET: &str = "NVIDIA H100 Tensor Core GPU datasheet, \
     https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet";
const A100_DATASHEET: &str = "NVIDIA A100 Tensor Core GPU datasheet (1758950-r4), \
     https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf";
const AMPERE_WHITEPAPER: &str = "NVIDIA A100 Tensor Core GPU Architecture whitepaper, \
     https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf";
const LAPTOP_SPECS: &str = "NVIDIA GeForce RTX 40 Series laptops specifications, \
     https://www.nvidia.com/en-us/geforce/laptops/40-series/";

fn entry(
    name: &str,
    tflops: f64,
    bandwidth_gb_s: f64,
    mem_gb: f64,
    sm_count: u32,
    source: String,
) -> GpuSpec {
    GpuSpec {
        name: name.to_string(),
        bf16_flops: tflops * TERA,
        mem_bandwidth: bandwidth_gb_s * GB,
        mem_bytes: mem_gb * GIB,
        sm_count,
        source,
    }
}

/// Dense bf16 TFLOP/s of a GeForce Ada laptop part at a given boost clock.
fn ada_laptop_tflops(sm_count: u32, boost_mhz: f64) -> f64 {
    f64::from(sm_count) * ADA_GEFORCE_BF16_FLOPS_PER_SM_CLOCK * boost_mhz * 1e6 / TERA
}

pub(super) fn entries() -> Vec<GpuSpec> {
    vec![
        entry(
            "h200-sxm",
            989.4,
            4800.0,
            141.0,
            132,
            format!(
                "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/, \
                 specifications table, H200 SXM column: BFLOAT16 Tensor Core 1,979 TFLOPS with sparsity \
                 (dense is half), GPU memory 141 GB, bandwidth 4.8 TB/s. The datasheet gives no SM count \
                 or dense figure: the H200 is the H100 SXM5 GH100 configuration, so 132 SMs and \
                 989.4 dense TFLOPS are taken from the {HOPPER_WHITEPAPER}, H100 SXM5 column of the \
                 A100/H100 comparison table."
            ),
        ),
        entry(
            "h100-sxm",
            989.4,
            3350.0,
            80.0,
            132,
            format!(
                "{HOPPER_WHITEPAPER}, A100/H100 comparison table, H100 SXM5 column: 132 SMs, \
                 Peak BF16 Tensor TFLOPS with FP32 Accumulate 989.4 (1978.9 with sparsity); \
                 {H100_DATASHEET}, H100 SXM column: GPU memory 80 GB, bandwidth 3.35 TB/s."
            ),
        ),
        entry(
            "h100-pcie",
            756.5,
            2000.0,
            80.0,
            114,
            format!(
                "{H100_DATASHEET}, H100 PCIe column: BFLOAT16 Tensor Core 1,513 TFLOPS with sparsity \
                 (dense is half: 756.5), GPU memory 80 GB, bandwidth 2 TB/s; {HOPPER_WHITEPAPER}, \
                 A100/H100 comparison table, H100 PCIe column: 114 SMs, 2000 GB/sec."
            ),
        ),
        entry(
            "a100-80gb-sxm",
            312.0,
            2039.0,
            80.0,
            108,
            format!(
                "{A100_DATASHEET}, specifications table: BFLOAT16 Tensor Core 312 TFLOPS \
                 (624 with sparsity), A100 80GB SXM column: 80GB HBM2e, 2,039 GB/s; \
                 {AMPERE_WHITEPAPER}, A100 specifications table: 108 SMs."
            ),
        ),
        entry(
            "a100-40gb-pcie",
            312.0,
            1555.0,
            40.0,
            108,
            format!(
                "NVIDIA A100 PCIe 40GB launch datasheet (2020; superseded by {A100_DATASHEET}, which \
                 lists only the 80GB parts): BFLOAT16 Tensor Core 312 TFLOPS (624 with sparsity), \
                 40GB HBM2, 1,555 GB/s. The 2020 document itself was not retrieved; the figures were \
                 checked against third-party copies of its table. 108 SMs: {AMPERE_WHITEPAPER}, \
                 A100 specifications table."
            ),
        ),
        entry(
            "l40s",
            362.05,
            864.0,
            48.0,
            142,
            format!(
                "NVIDIA L40S datasheet, https://www.nvidia.com/en-us/data-center/l40s/, specifications \
                 table: BF16 Tensor Core 362.05 TFLOPS (733 with sparsity), 48GB GDDR6 with ECC, \
                 864GB/s, 568 fourth-generation Tensor Cores and 142 RT cores (one RT core and four \
                 Tensor Cores per Ada SM: 142 SMs). The datasheet does not state the accumulate \
                 precision; data-center Ada parts run FP32 accumulate at full rate ({ADA_WHITEPAPER}, \
                 NVIDIA L40 column: FP16 and BF16 with FP32 accumulate both 181.05 TFLOPS)."
            ),
        ),
        entry(
            "l4",
            121.0,
            300.0,
            24.0,
            58,
            format!(
                "NVIDIA L4 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/l4/, \
                 specifications table: BF16 Tensor Core 242 TFLOPS with sparsity (dense is half: 121), \
                 24GB GDDR6, 300GB/s. SM count 58 = 7,424 CUDA cores / 128 per Ada SM, from the \
                 NVIDIA L4 column of the {ADA_WHITEPAPER}, and consistent with 121 TFLOPS at the \
                 2040 MHz boost clock (58 x 1024 x 2.04 GHz); NOT verified against the vendor table \
                 here (some third-party databases list 60 SMs)."
            ),
        ),
        entry(
            "a10g",
            70.0,
            600.0,
            24.0,
            80,
            "UNVERIFIED: the A10G is an AWS-only part (EC2 G5) with no public NVIDIA datasheet. \
             24 GB GDDR6 and 600 GB/s: Baseten, 'NVIDIA A10 vs A10G for ML model inference', \
             https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/ (spec table). \
             80 SMs and ~70 dense bf16 TFLOPS are third-party figures (the same article's table, \
             and 80 SMs x 512 dense FLOP/clock (GA10x with FP32 accumulate at half rate) x \
             1.71 GHz boost = 70.0 TFLOPS); no vendor document confirms them."
                .to_string(),
        ),
        entry(
            "rtx-4090",
            165.2,
            1008.0,
            24.0,
            128,
            format!(
                "{ADA_WHITEPAPER}, GeForce RTX 4090 vs RTX 3090 Ti comparison table, RTX 4090 column: \
                 128 SMs, 2520 MHz boost, Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2 \
                 (330.4 with sparsity; FP16 accumulate is 330.3 dense), 24 GB GDDR6X, 1008 GB/sec."
            ),
        ),
        entry(
            "rtx-3090",
            71.0,
            936.0,
            24.0,
            82,
            "NVIDIA Ampere GA102 GPU Architecture whitepaper v2, \
             https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf, \
             Appendix A 'GeForce RTX 3090' (p. 44): 82 SMs, 1695 MHz boost, Peak BF16 Tensor TFLOPS \
             with FP32 Accumulate 71 (142 with sparsity), 24 GB GDDR6X, 936 GB/sec."
                .to_string(),
        ),
        entry(
            "rtx-4070-laptop",
            ada_laptop_tflops(36, 2175.0),
            256.0,
            8.0,
            36,
            format!(
                "DERIVED, assumes the 115 W TGP configuration at its 2175 MHz maximum boost clock \
                 (NVIDIA's range is 1230-2175 MHz for 35-115 W TGP, so lower-power laptops are slower). \
                 {LAPTOP_SPECS}: 4608 CUDA cores (36 SMs of 128), boost 1230-2175 MHz, 8 GB GDDR6, \
                 35-115 W. bf16 = 36 SMs x 512 dense FLOP/clock with FP32 accumulate (from the \
                 {ADA_WHITEPAPER} RTX 4090 figure) x 2175 MHz = 40.1 TFLOPS. Bandwidth: 128-bit \
                 GDDR6 at 16 Gbps = 256 GB/s (bus width and data rate from third-party spec databases)."
            ),
        ),
        entry(
            "rtx-4060-laptop",
            ada_laptop_tflops(24, 2370.0),
            256.0,
            8.0,
            24,
            format!(
                "DERIVED, assumes the 115 W TGP configuration at its 2370 MHz maximum boost clock \
                 (NVIDIA's range is 1470-2370 MHz for 35-115 W TGP, so lower-power laptops are slower). \
                 {LAPTOP_SPECS}: 3072 CUDA cores (24 SMs of 128), boost 1470-2370 MHz, 8 GB GDDR6, \
                 35-115 W. bf16 = 24 SMs x 512 dense FLOP/clock with FP32 accumulate (from the \
                 {ADA_WHITEPAPER} RTX 4090 figure) x 2370 MHz = 29.1 TFLOPS. Bandwidth: 128-bit \
                 GDDR6 at 16 Gbps = 256 GB/s (bus width and data rate from third-party spec databases)."
            ),
        ),
    ]
}
