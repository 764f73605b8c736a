//! Layouts whose simplified rank exceeds the kernels' `MAX_RANK` (8): element-wise ops split
//! them into several launches, reductions and index_select pack them first. Compared with the
//! CPU backend.

mod common;

use tessera_core::{Backend, Tensor};
use tessera_cpu::Cpu;

/// A rank-10 tensor of shape [2; 10] whose strides cannot merge (every other axis reversed in
/// order through a permutation), on `dev`.
fn awkward<B: Backend>(dev: &B) -> Tensor<B> {
    let data: Vec<f32> = (0..1024).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
    Tensor::from_vec(data, [2; 10], dev)
        .unwrap()
        .permute(&[9, 0, 8, 1, 7, 2, 6, 3, 5, 4])
        .unwrap()
}

#[test]
fn rank_ten_layouts_match_the_cpu() {
    let dev = device_or_skip!();
    let (x, y) = (awkward(&dev), awkward(&Cpu::new()));
    // Equal up to `rel` relative error (0 for exact ops), element by element.
    let close = |a: Tensor<tessera_opencl::OpenCl>, b: Tensor<Cpu>, rel: f64| {
        assert_eq!(a.dims(), b.dims());
        let (got, want) = (a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= rel * w.abs(),
                "element {i}: got {g}, expected {w}"
            );
        }
    };
    let same = |a, b| close(a, b, 0.0);
    same(x.contiguous().unwrap(), y.contiguous().unwrap());
    close(
        x.mul(&x.exp().unwrap()).unwrap(),
        y.mul(&y.exp().unwrap()).unwrap(),
        1e-6,
    );
    // Nine reduced axes that do not merge: the input is packed first. Integer-valued sums of
    // 512 terms are exact in f32.
    let nine = [0, 1, 2, 3, 4, 5, 6, 7, 8];
    same(x.sum(&nine, false).unwrap(), y.sum(&nine, false).unwrap());
    same(
        x.sum(&[0, 2, 4, 6, 8], false).unwrap(),
        y.sum(&[0, 2, 4, 6, 8], false).unwrap(),
    );
    // Nine kept axes that do not merge: packed first too.
    same(x.argmax(5, false).unwrap(), y.argmax(5, false).unwrap());
    same(x.max(&[5], true).unwrap(), y.max(&[5], true).unwrap());
    let idx_cl = Tensor::from_vec(vec![1i64, 0, 1], [3], &dev).unwrap();
    let idx_cpu = Tensor::from_vec(vec![1i64, 0, 1], [3], &Cpu::new()).unwrap();
    same(
        x.index_select(4, &idx_cl).unwrap(),
        y.index_select(4, &idx_cpu).unwrap(),
    );
}
