//! The conformance suite of the `tests` crate on the CUDA engine over OpenCL (tiled GEMM), plus
//! the matrix-product checks through the emulated cuBLAS path.

include!("../../tests/common/suite.rs");

conformance_suite_or_skip!(
    super::emulated(false),
    Some(concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions"))
);

/// The error half of the contract on a private emulated device: its bad indices set that
/// device's error flag, which no other test reads.
#[test]
fn errors() {
    let Some(dev) = super::private_emulated(|_| {}) else {
        return;
    };
    let capabilities = tessera_conformance::suite::Capabilities::declared_by(&dev);
    let config = tessera_conformance::runner::RunConfig::from_env();
    tessera_conformance::suite::assert_family(
        &dev,
        tessera_conformance::suite::Family::Errors,
        &capabilities,
        &config,
    );
}

mod through_blas {
    use tessera_core::DType;

    #[test]
    fn matmul_through_the_blas_mapping() {
        let Some(dev) = super::super::emulated(true) else {
            return;
        };
        // The 16-bit floats go to the (host-emulated) GemmStridedBatchedEx like f32 and f64 go
        // to {S,D}gemmStridedBatched.
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            let before = dev.stats().blas_calls;
            tessera_conformance::checks::matmul::run(&dev, dtype);
            assert!(
                dev.stats().blas_calls > before,
                "{dtype}: the BLAS path never ran"
            );
        }
    }
}
