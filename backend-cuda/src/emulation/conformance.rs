//! The conformance suite of the `tests` crate on the CUDA engine over OpenCL (tiled GEMM), plus
//! the matrix-product checks through the emulated cuBLAS path.

include!("../../tests/common/suite.rs");

conformance_suite_or_skip!(
    super::emulated(false),
    Some(concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions"))
);

mod through_blas {
    use tessera_core::DType;

    #[test]
    fn matmul_through_the_blas_mapping() {
        let Some(dev) = super::super::emulated(true) else {
            return;
        };
        for dtype in [DType::F32, DType::F64] {
            tessera_conformance::checks::matmul::run(&dev, dtype);
        }
    }
}

/// The fused attention kernels with CUDA's launch geometry (blocks of 256): both passes, every
/// float dtype. (Until the harness registers an attention family, which makes this redundant.)
mod attention {
    use tessera_conformance::checks::attention::{self, AttentionOp};
    use tessera_core::DType;

    #[test]
    fn fused_attention_with_cudas_geometry() {
        let Some(dev) = super::super::emulated(false) else {
            return;
        };
        for op in AttentionOp::ALL {
            for dtype in [DType::F32, DType::F64] {
                attention::run(&dev, op, dtype);
            }
        }
    }
}
