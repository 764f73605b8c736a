//! Regression tests of issue 11 for the template backend, called directly (its `Backend`
//! methods are public, so they must not rely on `tensor-core` having checked first).

use tessera_backend_example::{ExampleBackend, ExampleStorage};
use tessera_core::{Backend, DType, Distribution, Error, HostData, Layout, Tensor};

fn storage(v: Vec<i64>) -> ExampleStorage {
    ExampleStorage::new(HostData::I64(v))
}

#[test]
fn index_select_checks_every_index_even_when_the_output_is_empty() {
    let dev = ExampleBackend::new();
    // x: [0, 3] (no element), indices [-1] along axis 1: nothing would be read, but -1 is
    // still not an index.
    let x = storage(vec![]);
    let idx = storage(vec![-1]);
    let err = tessera_core::direct::index_select(
        &dev,
        (&x, &Layout::contiguous([0, 3])),
        1,
        (&idx, &Layout::contiguous([1])),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::IndexOutOfRange {
                index: -1,
                size: 3,
                ..
            }
        ),
        "{err:?}"
    );
    // An index into an axis of size 0, with another axis of size 0.
    let idx = storage(vec![0]);
    let err = tessera_core::direct::index_select(
        &dev,
        (&x, &Layout::contiguous([3, 0])),
        1,
        (&idx, &Layout::contiguous([1])),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::IndexOutOfRange {
                index: 0,
                size: 0,
                ..
            }
        ),
        "{err:?}"
    );
    // The same through the Tensor API.
    let t = Tensor::zeros([0, 3], DType::F32, &dev).unwrap();
    let i = Tensor::from_vec(vec![-1i64], [1], &dev).unwrap();
    assert!(t.index_select(1, &i).is_err());
}

#[test]
fn axes_and_index_ranks_are_checked_by_the_backend_itself() {
    let dev = ExampleBackend::new();
    let x = storage(vec![1, 2, 3]);
    let idx = storage(vec![0]);
    let l = Layout::contiguous([3]);
    assert!(tessera_core::direct::index_select(
        &dev,
        (&x, &l),
        5,
        (&idx, &Layout::contiguous([1]))
    )
    .is_err());
    assert!(tessera_core::direct::index_select(
        &dev,
        (&x, &l),
        0,
        (&idx, &Layout::contiguous([1, 1]))
    )
    .is_err());
    assert!(
        tessera_core::direct::gather(&dev, (&x, &l), 2, (&idx, &Layout::contiguous([1]))).is_err()
    );
    assert!(tessera_core::direct::scatter_add(
        &dev,
        (&x, &l),
        1,
        (&idx, &Layout::contiguous([1])),
        (&idx, &Layout::contiguous([1]))
    )
    .is_err());
    // A layout reaching past its storage.
    assert!(tessera_core::direct::copy_strided(&dev, &x, &Layout::contiguous([4])).is_err());
}

#[test]
fn random_counters_wrap_at_u64_max() {
    let dev = ExampleBackend::new();
    let dist = Distribution::Uniform {
        low: 0.0,
        high: 1.0,
    };
    let near_end = dev.random(dist, 4, DType::F64, 7, u64::MAX - 1).unwrap();
    let HostData::F64(v) = near_end.data() else {
        panic!("f64 draw");
    };
    // Element i is sample(offset + i) with wrapping counters: elements 2 and 3 are samples 0
    // and 1 of the stream.
    let start = dev.random(dist, 2, DType::F64, 7, 0).unwrap();
    let HostData::F64(w) = start.data() else {
        panic!("f64 draw");
    };
    assert_eq!(&v[2..], &w[..]);
}

#[test]
fn impossible_allocations_are_errors() {
    let dev = ExampleBackend::new();
    let err = dev.full(usize::MAX, DType::F32, 1.0).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory { .. }), "{err:?}");
    assert!(dev
        .random(
            Distribution::Normal {
                mean: 0.0,
                std: 1.0
            },
            usize::MAX / 2,
            DType::F64,
            0,
            0
        )
        .is_err());
}
