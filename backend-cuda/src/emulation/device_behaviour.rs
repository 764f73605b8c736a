//! Behaviour of the engine beyond op results, on the emulated device: no host synchronisation
//! between ops, index errors reported at read-back, ranks above the kernels' `MAX_RANK`.

use super::{emulated, private_emulated};
use tessera_core::{Error, Layout, Tensor};

#[test]
fn a_chain_of_ops_waits_for_the_device_only_when_read_back() {
    let Some(dev) = private_emulated(|_| {}) else {
        return;
    };
    let rt = dev.runtime().clone();
    let a = Tensor::from_vec((0..64).map(|i| i as f32).collect(), [8, 8], &dev).unwrap();
    let before = rt.stats().host_syncs;
    let b = a.matmul(&a.t().unwrap()).unwrap();
    let c = (&b + 1.0)
        .unwrap()
        .relu()
        .unwrap()
        .sum(&[1], false)
        .unwrap();
    let d = c.softmax(0).unwrap();
    assert_eq!(rt.stats().host_syncs, before, "an op waited for the device");
    let values = d.to_vec::<f32>().unwrap();
    assert_eq!(rt.stats().host_syncs, before + 1);
    assert!((values.iter().sum::<f32>() - 1.0).abs() < 1e-5);
}

#[test]
fn an_out_of_range_index_is_reported_at_read_back_then_cleared() {
    // A device of its own: the error goes to the next read-back on the device, whichever
    // thread makes it, and the other tests share `emulated`'s device.
    let Some(dev) = private_emulated(|_| {}) else {
        return;
    };
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
    let bad = Tensor::from_vec(vec![0i64, 7, 1, 0], [2, 2], &dev).unwrap();
    let gathered = x.gather(1, &bad).expect("the op itself only queues work");
    let err = gathered.to_vec::<f64>().unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            op: "gather",
            index: 7,
            size: 2
        }
    );
    let good = Tensor::from_vec(vec![1i64, 0], [2], &dev).unwrap();
    let picked = x.index_select(0, &good).unwrap();
    assert_eq!(picked.to_vec::<f64>().unwrap(), vec![3.0, 4.0, 1.0, 2.0]);
}

#[test]
fn layouts_above_the_kernel_rank_are_split_into_launches() {
    let Some(dev) = emulated(false) else { return };
    // Rank 10 with gaps between every dimension, so nothing merges.
    let dims = [2usize; 10];
    let strides: Vec<isize> = (0..10).rev().map(|d| 3isize.pow(d)).collect();
    let len = 3usize.pow(10);
    let base: Vec<i64> = (0..len as i64).collect();
    let storage = Tensor::from_vec(base.clone(), [len], &dev).unwrap();
    let layout = Layout::strided(dims, strides, 0, len).unwrap();
    let view = storage
        .as_strided(dims, layout.strides().to_vec(), 0)
        .unwrap();
    let expected: Vec<i64> = layout.offsets().map(|o| base[o] * 2).collect();
    let doubled = (&view + &view).unwrap();
    assert_eq!(doubled.to_vec::<i64>().unwrap(), expected);
    let total: i64 = expected.iter().sum();
    let summed = doubled.sum_all().unwrap();
    assert_eq!(summed.to_vec::<i64>().unwrap(), vec![total]);
}

#[test]
fn tf32_reaches_the_cublas_call_only_for_handles_that_allow_it() {
    let Some(dev) = emulated(true) else {
        return;
    };
    // 1 + 2^-12 is exact in f32 and rounds to 1 in TF32 (10 mantissa bits).
    let fine = 1.0f32 + 2f32.powi(-12);
    let product = |handle: &super::Emulated| -> Vec<f32> {
        let a = Tensor::from_vec(vec![fine, 0.0, 0.0, 1.0], [2, 2], handle).unwrap();
        let eye = Tensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], [2, 2], handle).unwrap();
        a.matmul(&eye).unwrap().to_vec::<f32>().unwrap()
    };
    assert!(!dev.options().allow_tf32, "TF32 is off by default");
    assert_eq!(product(&dev), [fine, 0.0, 0.0, 1.0]);
    // Only the (host-emulated) cuBLAS call rounds to TF32: the flag went from the handle's
    // options through the engine's BlasGemm to the driver.
    assert_eq!(product(&dev.with_tf32(true)), [1.0, 0.0, 0.0, 1.0]);
    // The option belongs to the handle: the first one still computes in f32; f64 ignores it.
    assert_eq!(product(&dev), [fine, 0.0, 0.0, 1.0]);
    let fine64 = 1.0f64 + 2f64.powi(-40);
    let tf32 = dev.with_tf32(true);
    let a = Tensor::from_vec(vec![fine64, 0.0, 0.0, 1.0], [2, 2], &tf32).unwrap();
    let eye = Tensor::from_vec(vec![1.0f64, 0.0, 0.0, 1.0], [2, 2], &tf32).unwrap();
    let c = a.matmul(&eye).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(c, [fine64, 0.0, 0.0, 1.0]);
}
