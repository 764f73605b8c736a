//! NCCL without and with a GPU: the library and every function Tessera calls are found in
//! `libnccl.so.2` when it is installed (PyPI's `nvidia-nccl-cu12` provides it; no GPU needed),
//! and on a machine with a CUDA device a one-rank communicator all-reduces, broadcasts,
//! reduce-scatters, all-gathers and gathers device tensors (f32, f64, i64, f16, bf16). Each part skips, printing why, when the library or the GPU is absent (a
//! missing library fails instead with `TESSERA_REQUIRE_NCCL` set, as in CI).
//! Built only with the `nccl` feature; `tests/nccl_build.rs` runs it from a plain
//! `cargo test`.

#![cfg(feature = "nccl")]

use std::sync::Arc;
use tessera_core::{DType, Tensor};
use tessera_cuda::Cuda;
use tessera_distributed::nccl::NcclLibrary;
use tessera_distributed::{NcclCommunicator, SingleProcess};
use tessera_nn::distributed::{Communicator, Reduction};

#[test]
fn every_nccl_function_is_found_in_the_installed_library() {
    let library = match NcclLibrary::load() {
        Ok(library) => library,
        Err(reason) if std::env::var_os("TESSERA_REQUIRE_NCCL").is_some() => {
            panic!("TESSERA_REQUIRE_NCCL is set but libnccl.so.2 was not found: {reason}")
        }
        Err(reason) => {
            println!("skipped: libnccl.so.2 not found: {reason}");
            return;
        }
    };
    let version = library.version().unwrap();
    println!(
        "NCCL {}.{}.{} from {}",
        version / 10000,
        version / 100 % 100,
        version % 100,
        library.path().display()
    );
    assert!(version >= 2_10_00, "NCCL {version} is older than 2.10");
    let message = library.error_string(4);
    assert!(message.contains("invalid argument"), "{message}");
    assert!(message.contains("NCCL result 4"), "{message}");
}

#[test]
fn one_rank_all_reduces_and_broadcasts_device_tensors() {
    let device = match Cuda::new() {
        Ok(device) => device,
        Err(e) => {
            println!("skipped: no CUDA device: {e}");
            return;
        }
    };
    if let Err(reason) = NcclLibrary::load() {
        println!("skipped: libnccl.so.2 not found: {reason}");
        return;
    }
    let nccl = NcclCommunicator::new(&device, Arc::new(SingleProcess)).unwrap();
    println!("{nccl:?}");
    let comm: &dyn Communicator<Cuda> = &nccl;
    assert_eq!(
        (comm.rank(), comm.world_size(), comm.library()),
        (0, 1, "nccl")
    );
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16] {
        if dtype == DType::BF16 && nccl.version() < 2_10_00 {
            let mut t = Tensor::ones([2], dtype, &device).unwrap();
            assert!(
                comm.all_reduce(&mut t, Reduction::Sum).is_err(),
                "bf16 before 2.10"
            );
            continue;
        }
        // Exact in every dtype (f16 tops out at 65504).
        let values = vec![1.5, -2.0, 3.0, 1024.0, 0.0];
        let original = Tensor::from_f64_values(&values, [5], dtype, &device).unwrap();
        for op in [
            Reduction::Sum,
            Reduction::Max,
            Reduction::Min,
            Reduction::Mean,
        ] {
            if dtype == DType::I64 && op == Reduction::Mean {
                continue;
            }
            let mut t = original.clone();
            comm.all_reduce(&mut t, op).unwrap();
            comm.synchronize().unwrap();
            assert_eq!(
                t.to_vec_f64().unwrap(),
                original.to_vec_f64().unwrap(),
                "{dtype} {op:?}"
            );
        }
    }
    // A view with an offset is addressed at its first element.
    let base = Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], [6], &device).unwrap();
    let mut view = base.narrow(0, 2, 3).unwrap();
    comm.broadcast(&mut view, 0).unwrap();
    assert_eq!(view.to_vec::<f32>().unwrap(), vec![2.0, 3.0, 4.0]);
    let mut big = Tensor::ones([1 << 20], DType::F32, &device).unwrap();
    comm.all_reduce(&mut big, Reduction::Sum).unwrap();
    comm.barrier().unwrap();
    assert_eq!(
        big.sum_all().unwrap().to_scalar_f64().unwrap(),
        (1 << 20) as f64
    );
    assert!(comm.broadcast(&mut big, 1).is_err());
    // NCCL's own reduce-scatter and all-gather: one rank receives the whole, from a view with an
    // offset too; a matrix or a non-vector shard is refused before NCCL is called.
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16] {
        if dtype == DType::BF16 && nccl.version() < 2_10_00 {
            continue;
        }
        let values: Vec<f64> = match dtype {
            DType::I64 => (0..7).map(|i| i as f64 - 3.0).collect(),
            _ => (0..7).map(|i| i as f64 * 1.5 - 3.25).collect(),
        };
        let t = Tensor::from_f64_values(&values, [7], dtype, &device).unwrap();
        let view = t.narrow(0, 1, 5).unwrap();
        for op in [Reduction::Sum, Reduction::Max, Reduction::Min] {
            let reduced = comm.reduce_scatter(&view, op).unwrap();
            assert_eq!(
                reduced.to_vec_f64().unwrap(),
                values[1..6],
                "{dtype} {op:?}"
            );
        }
        let gathered = comm.all_gather(&view).unwrap();
        comm.synchronize().unwrap();
        assert_eq!(gathered.to_vec_f64().unwrap(), values[1..6], "{dtype}");
        // To one rank (the trait's gather over NCCL's all-gather): the root receives it.
        let to_root = comm.gather(&view, 0).unwrap().expect("rank 0 is the root");
        comm.synchronize().unwrap();
        assert_eq!(to_root.to_vec_f64().unwrap(), values[1..6], "{dtype}");
    }
    let matrix = Tensor::ones([2, 3], DType::F32, &device).unwrap();
    assert!(comm.all_gather(&matrix).is_err());
    let vector = Tensor::ones([3], DType::F32, &device).unwrap();
    assert!(comm.gather(&vector, 1).is_err(), "root 1 of one rank");
}
