//! The conformance harness (`tessera_conformance::checks`) on the default OpenCL device: every op family on
//! every dtype it supports (f64 when the device has `cl_khr_fp64`), 256 random cases each
//! (`PROPTEST_CASES` overrides), compared with the naive f64 reference. The families built on
//! matrix products (matmul, convolution, gradients) run once per GEMM route: the tiled kernel
//! and CLBlast (skipped, printing why, when CLBlast is not installed). Skips with a printed
//! reason when no OpenCL device exists.

mod common;

use tessera_conformance::checks::{
    arg_reduce, binary, cast, comparison, concat, constructors, conv, display, gradients, indexing,
    kinks, losses, matmul, pool, random, reduce, softmax, statistics, unary, views, where_select,
};
use tessera_conformance::suite::{assert_family, Capabilities, Family};
use tessera_core::{ArgReduceOp, Backend, BinaryOp, CmpOp, DType, ReduceOp, UnaryOp};
use tessera_opencl::OpenCl;

/// The dtypes of `candidates` the device supports.
fn on_device(dev: &OpenCl, candidates: impl IntoIterator<Item = DType>) -> Vec<DType> {
    candidates
        .into_iter()
        .filter(|&d| dev.supports_dtype(d))
        .collect()
}

/// The float dtypes the device supports (the 16-bit ones on every device).
fn floats(dev: &OpenCl) -> Vec<DType> {
    on_device(dev, tessera_conformance::checks::FLOAT_DTYPES)
}

#[test]
fn unary_ops() {
    let dev = device_or_skip!();
    for op in UnaryOp::ALL {
        for dtype in on_device(&dev, unary::supported_dtypes(op)) {
            unary::run(&dev, op, dtype);
        }
    }
}

#[test]
fn binary_ops() {
    let dev = device_or_skip!();
    for op in BinaryOp::ALL {
        for dtype in on_device(&dev, binary::supported_dtypes(op)) {
            binary::run(&dev, op, dtype);
        }
    }
}

#[test]
fn comparisons() {
    let dev = device_or_skip!();
    for op in CmpOp::ALL {
        for dtype in on_device(&dev, DType::ALL) {
            comparison::run(&dev, op, dtype);
        }
    }
}

#[test]
fn where_select() {
    let dev = device_or_skip!();
    for dtype in on_device(&dev, DType::ALL) {
        where_select::run(&dev, dtype);
    }
}

#[test]
fn casts() {
    let dev = device_or_skip!();
    for from in on_device(&dev, DType::ALL) {
        for to in on_device(&dev, DType::ALL) {
            cast::run(&dev, from, to);
        }
    }
}

#[test]
fn reductions() {
    let dev = device_or_skip!();
    for op in ReduceOp::ALL {
        for dtype in on_device(
            &dev,
            [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64],
        ) {
            reduce::run(&dev, op, dtype);
        }
    }
}

#[test]
fn arg_reductions() {
    let dev = device_or_skip!();
    for op in [ArgReduceOp::ArgMax, ArgReduceOp::ArgMin] {
        for dtype in on_device(
            &dev,
            [DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64],
        ) {
            arg_reduce::run(&dev, op, dtype);
        }
    }
}

#[test]
fn statistics() {
    let dev = device_or_skip!();
    for dtype in floats(&dev) {
        statistics::run(&dev, dtype);
    }
}

#[test]
fn matmul() {
    for (route, dev) in common::gemm_routes() {
        eprintln!("matmul on the {route} route");
        let before = dev.stats().blas_calls;
        for dtype in floats(&dev) {
            matmul::run(&dev, dtype);
        }
        if route == "clblast" {
            assert!(
                dev.stats().blas_calls > before,
                "no product reached CLBlast"
            );
        }
    }
}

#[test]
fn indexing() {
    let dev = device_or_skip!();
    for op in [
        indexing::IndexOp::IndexSelect,
        indexing::IndexOp::Gather,
        indexing::IndexOp::ScatterAdd,
    ] {
        let dtypes = match op {
            indexing::IndexOp::ScatterAdd => {
                vec![DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64]
            }
            _ => DType::ALL.to_vec(),
        };
        for dtype in on_device(&dev, dtypes) {
            indexing::run(&dev, op, dtype);
        }
    }
}

#[test]
fn views_and_constructors() {
    let dev = device_or_skip!();
    for dtype in on_device(&dev, DType::ALL) {
        views::run(&dev, dtype);
    }
    constructors::run(&dev);
    display::run(&dev);
}

#[test]
fn concat_and_stack() {
    let dev = device_or_skip!();
    for op in [concat::JoinOp::Cat, concat::JoinOp::Stack] {
        for dtype in on_device(&dev, DType::ALL) {
            concat::run(&dev, op, dtype);
        }
    }
}

#[test]
fn random_numbers() {
    let dev = device_or_skip!();
    for dtype in floats(&dev) {
        random::run(&dev, dtype);
    }
    random::check_moments(&dev);
}

#[test]
fn softmax_family() {
    let dev = device_or_skip!();
    for dtype in floats(&dev) {
        softmax::run(&dev, dtype);
    }
}

#[test]
fn convolution() {
    for (route, dev) in common::gemm_routes() {
        eprintln!("convolution on the {route} route");
        convolution_on(&dev);
    }
}

fn convolution_on(dev: &OpenCl) {
    for op in [
        conv::ConvOp::Forward,
        conv::ConvOp::BackwardInput,
        conv::ConvOp::BackwardWeight,
    ] {
        for dtype in floats(dev) {
            conv::run(dev, op, dtype);
        }
    }
}

#[test]
fn pooling() {
    let dev = device_or_skip!();
    for op in [
        pool::PoolOp::Max,
        pool::PoolOp::Avg,
        pool::PoolOp::MaxBackward,
        pool::PoolOp::AvgBackward,
    ] {
        for dtype in floats(&dev) {
            pool::run(&dev, op, dtype);
        }
    }
}

#[test]
fn gradients() {
    for (route, dev) in common::gemm_routes() {
        eprintln!("gradients on the {route} route");
        for op in gradients::GradOp::all() {
            for dtype in floats(&dev) {
                gradients::run(&dev, op, dtype);
            }
        }
    }
    let dev = device_or_skip!();
    for kink in kinks::Kink::ALL {
        for dtype in floats(&dev) {
            kinks::run(&dev, kink, dtype);
        }
    }
    for loss in losses::LossOp::ALL {
        for dtype in floats(&dev) {
            losses::run(&dev, loss, dtype);
        }
    }
}

/// The families that check the contract's other methods directly: name, device,
/// supports_dtype and synchronize; the memory primitives; relu_backward and adam_update. (The
/// error half runs alone in `conformance_errors.rs`: its bad indices are reported through the
/// device-wide error flag, which the other tests of this binary read in parallel.)
#[test]
fn device_memory_and_fused_composites() {
    let dev = device_or_skip!();
    let capabilities = Capabilities::declared_by(&dev);
    let config = tessera_conformance::runner::RunConfig::from_env();
    for family in [Family::Device, Family::Memory, Family::Fused] {
        assert_family(&dev, family, &capabilities, &config);
    }
}
