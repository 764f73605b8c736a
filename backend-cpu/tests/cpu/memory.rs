//! Upload/download, fills, strided copies, assign and random draws.

use crate::common::*;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{
    AssignMode, Backend, BackendStorage, DType, Distribution, Error, HostData, Layout, UnaryOp,
};
use tessera_cpu::{Cpu, CpuStorage, CpuTensor};

#[test]
fn backend_identity() {
    let c = Cpu::new();
    assert_eq!(c, Cpu);
    assert_eq!(c.name(), "cpu");
    assert_eq!(c.device().to_string(), "cpu:0");
    assert!(DType::ALL.iter().all(|&d| c.supports_dtype(d)));
}

#[test]
fn upload_and_download_round_trip_every_dtype() {
    for data in [
        HostData::F32(vec![1.5, -0.0, f32::NAN]),
        HostData::F64(vec![2.5, f64::INFINITY]),
        HostData::I64(vec![i64::MIN, 7]),
        HostData::Bool(vec![1, 0, 1]),
    ] {
        let s = Cpu.upload(data.clone()).unwrap();
        assert_eq!(s.dtype(), data.dtype());
        assert_eq!(s.len(), data.len());
        let back =
            tessera_core::direct::download(&Cpu, &s, &Layout::contiguous([data.len()])).unwrap();
        assert_eq!(format!("{back:?}"), format!("{data:?}"));
    }
    let s = CpuStorage::from_host(HostData::F64(vec![1.0, 2.0])).unwrap();
    assert_eq!(s.as_f64_slice(), Some(&[1.0, 2.0][..]));
    assert_eq!(s.as_f32_slice(), None);
    assert_eq!(s.as_slice::<f64>(), Some(&[1.0, 2.0][..]));
}

#[test]
fn full_converts_the_value_like_from_f64() {
    let f = Cpu.full(3, DType::F32, -0.0).unwrap();
    assert!(f
        .as_f32_slice()
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == (-0.0f32).to_bits()));
    let i = Cpu.full(2, DType::I64, -2.9).unwrap();
    assert_eq!(i.as_i64_slice().unwrap(), &[-2, -2]);
    let b = Cpu.full(2, DType::Bool, 0.25).unwrap();
    assert_eq!(b.as_bool_slice().unwrap(), &[1, 1]);
    let z = Cpu.full(100_000, DType::F64, 0.0).unwrap();
    assert!(z.as_f64_slice().unwrap().iter().all(|&v| v.to_bits() == 0));
    let big = Cpu.full(100_000, DType::F64, 3.25).unwrap();
    assert!(big.as_f64_slice().unwrap().iter().all(|&v| v == 3.25));
    assert_eq!(Cpu.full(0, DType::F32, 1.0).unwrap().len(), 0);
}

#[test]
fn contiguous_copies_of_views() {
    let data = values(120, 91, -1.0, 1.0);
    let base = tensor_f64(&data, &[4, 6, 5]);
    for (name, view) in views(&base) {
        let c = view.contiguous().unwrap();
        assert!(c.is_contiguous());
        assert_eq!(c.to_vec_f64().unwrap(), view_of(&data, &view), "{name}");
    }
    // Large copies (parallel chunks) of a transposed view.
    let big = values(500 * 300, 92, -1.0, 1.0);
    let t = tensor_f64(&big, &[500, 300]).t().unwrap();
    assert_eq!(
        t.contiguous().unwrap().to_vec_f64().unwrap(),
        view_of(&big, &t)
    );
    // Batched transposes (tiled walk with an outer dimension), odd sizes, small and large.
    for dims in [[2, 5, 7], [5, 77, 131]] {
        let n: usize = dims.iter().product();
        let d = values(n, 93, -1.0, 1.0);
        let t = tensor_f64(&d, &dims).transpose(1, 2).unwrap();
        assert_eq!(
            t.contiguous().unwrap().to_vec_f64().unwrap(),
            view_of(&d, &t),
            "{dims:?}"
        );
        let p = tensor_f32(&d, &dims).permute(&[2, 0, 1]).unwrap();
        let want: Vec<f64> = view_of(&as_f32(&d), &p).iter().map(|v| v * v).collect();
        let got: Vec<f64> = p.square().unwrap().to_vec_f64().unwrap();
        let want32: Vec<f64> = want.iter().map(|&v| v as f32 as f64).collect();
        assert_eq!(got, want32, "{dims:?} square");
    }
}

#[test]
fn assign_overwrites_and_accumulates_strided_regions() {
    // narrow_assign writes into a region of a fresh copy.
    let base_d = values(30, 93, -1.0, 1.0);
    let src_d = values(10, 94, -1.0, 1.0);
    let base = tensor_f64(&base_d, &[5, 6]);
    let src = tensor_f64(&src_d, &[2, 5]).t().unwrap(); // [5, 2], strided
    let sv = view_of(&src_d, &src);
    for accumulate in [false, true] {
        let got = base.narrow_assign(1, 3, &src, accumulate).unwrap();
        let mut want = base_d.clone();
        for i in 0..5 {
            for j in 0..2 {
                let d = &mut want[i * 6 + 3 + j];
                *d = if accumulate {
                    *d + sv[i * 2 + j]
                } else {
                    sv[i * 2 + j]
                };
            }
        }
        assert_close(
            &got.to_vec_f64().unwrap(),
            &want,
            1e-15,
            1e-15,
            "narrow_assign",
        );
    }
    // Directly through the backend: a stepped destination and a broadcast source, each dtype.
    let dst_layout = Layout::contiguous([4, 6]).slice(1, 0, 6, 2).unwrap();
    let src_layout = Layout::contiguous([3])
        .broadcast_to(&[4, 3].into())
        .unwrap();
    let mut dst = CpuStorage::I64((0..24).collect());
    let src = CpuStorage::I64(vec![100, 200, 300]);
    tessera_core::direct::assign(
        &Cpu,
        (&mut dst, &dst_layout),
        (&src, &src_layout),
        AssignMode::Accumulate,
    )
    .unwrap();
    let want: Vec<i64> = (0..24i64)
        .map(|p| {
            if p % 2 == 0 {
                p + [100, 200, 300][(p as usize % 6) / 2]
            } else {
                p
            }
        })
        .collect();
    assert_eq!(dst.as_i64_slice().unwrap(), &want[..]);
    let mut bools = CpuStorage::Bool(vec![0, 1, 0, 0]);
    let l = Layout::contiguous([4]);
    tessera_core::direct::assign(
        &Cpu,
        (&mut bools, &l),
        (&CpuStorage::Bool(vec![0, 0, 1, 0]), &l),
        AssignMode::Accumulate,
    )
    .unwrap();
    assert_eq!(bools.as_bool_slice().unwrap(), &[0, 1, 1, 0]);
    // Mismatches are errors.
    assert!(matches!(
        tessera_core::direct::assign(
            &Cpu,
            (&mut bools, &l),
            (&CpuStorage::F32(vec![0.0; 4]), &l),
            AssignMode::Overwrite
        ),
        Err(Error::DTypeMismatch { .. })
    ));
    assert!(matches!(
        tessera_core::direct::assign(
            &Cpu,
            (&mut bools, &l),
            (&CpuStorage::Bool(vec![0; 3]), &Layout::contiguous([3])),
            AssignMode::Overwrite
        ),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn large_assign_runs_in_parallel_blocks_correctly() {
    // Write a transposed [400, 150] source into columns 50..200 of a [400, 300] destination,
    // and accumulate a broadcast row into every other row.
    let dst_d = values(400 * 300, 95, -1.0, 1.0);
    let src_d = values(150 * 400, 96, -1.0, 1.0);
    let dst = tensor_f64(&dst_d, &[400, 300]);
    let src = tensor_f64(&src_d, &[150, 400]).t().unwrap();
    let got = dst.narrow_assign(1, 50, &src, false).unwrap();
    let sv = view_of(&src_d, &src);
    let mut want = dst_d.clone();
    for i in 0..400 {
        for j in 0..150 {
            want[i * 300 + 50 + j] = sv[i * 150 + j];
        }
    }
    assert_eq!(got.to_vec_f64().unwrap(), want);
    let mut storage = CpuStorage::F64(dst_d.clone());
    let dl = Layout::contiguous([400, 300]).slice(0, 1, 400, 2).unwrap();
    let row: Vec<f64> = values(300, 97, -1.0, 1.0);
    let sl = Layout::contiguous([300])
        .broadcast_to(&[200, 300].into())
        .unwrap();
    tessera_core::direct::assign(
        &Cpu,
        (&mut storage, &dl),
        (&CpuStorage::F64(row.clone()), &sl),
        AssignMode::Accumulate,
    )
    .unwrap();
    let mut want = dst_d;
    for i in (1..400).step_by(2) {
        for j in 0..300 {
            want[i * 300 + j] += row[j];
        }
    }
    assert_eq!(storage.as_f64_slice().unwrap(), &want[..]);
}

#[test]
fn random_draws_follow_the_counter_based_stream() {
    let uniform = Distribution::Uniform {
        low: -2.0,
        high: 3.0,
    };
    let normal = Distribution::Normal {
        mean: 1.0,
        std: 0.5,
    };
    for (n, offset) in [(10usize, 0u64), (100_003, 77)] {
        for dist in [uniform, normal] {
            let s = Cpu.random(dist, n, DType::F32, 42, offset).unwrap();
            let v = s.as_f32_slice().unwrap();
            assert_eq!(v.len(), n);
            for i in [0, 1, n / 2, n - 1] {
                let want = sample_f32(dist, 42, offset + i as u64);
                assert_eq!(v[i].to_bits(), want.to_bits(), "f32 element {i}");
            }
            let s = Cpu.random(dist, n, DType::F64, 7, offset).unwrap();
            let v = s.as_f64_slice().unwrap();
            for i in [0, 3, n / 3, n - 1] {
                assert_eq!(
                    v[i].to_bits(),
                    sample_f64(dist, 7, offset + i as u64).to_bits()
                );
            }
        }
    }
    // Offsets near the end of the counter space wrap instead of overflowing.
    let s = Cpu.random(uniform, 3, DType::F64, 1, u64::MAX - 1).unwrap();
    assert_eq!(s.as_f64_slice().unwrap()[2], sample_f64(uniform, 1, 0));
    assert!(matches!(
        Cpu.random(uniform, 3, DType::I64, 1, 0),
        Err(Error::UnsupportedDType { .. })
    ));
    let t = CpuTensor::randn([1000], DType::F32, 3, &cpu()).unwrap();
    let mean = t.mean_all().unwrap().to_scalar_f64().unwrap();
    assert!(mean.abs() < 0.15, "mean {mean}");
}

#[test]
fn layouts_outside_their_storage_are_errors_not_panics() {
    let s = CpuStorage::F32(vec![1.0; 6]);
    let too_long = Layout::contiguous([7]);
    assert!(matches!(
        tessera_core::direct::unary(&Cpu, UnaryOp::Exp, &s, &too_long),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(tessera_core::direct::copy_strided(&Cpu, &s, &too_long).is_err());
    assert!(tessera_core::direct::download(&Cpu, &s, &too_long).is_err());
    assert!(tessera_core::direct::cast(&Cpu, &s, &too_long, DType::F64).is_err());
    let huge_stride = Layout::strided([2], vec![1], 0, 6)
        .unwrap()
        .broadcast_to(&[3, 2].into())
        .unwrap();
    assert!(tessera_core::direct::copy_strided(&Cpu, &s, &huge_stride).is_ok());
    let i = CpuStorage::I64(vec![0; 2]);
    assert!(tessera_core::direct::index_select(
        &Cpu,
        (&s, &Layout::contiguous([6])),
        0,
        (&i, &too_long)
    )
    .is_err());
    assert!(
        tessera_core::direct::reduce(&Cpu, tessera_core::ReduceOp::Sum, &s, &too_long, &[0])
            .is_err()
    );
    assert!(tessera_core::direct::reduce(
        &Cpu,
        tessera_core::ReduceOp::Sum,
        &s,
        &Layout::contiguous([6]),
        &[1]
    )
    .is_err());
    assert!(tessera_core::direct::arg_reduce(
        &Cpu,
        tessera_core::ArgReduceOp::ArgMax,
        &s,
        &Layout::contiguous([6]),
        1
    )
    .is_err());
}
