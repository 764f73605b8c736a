//! The 16-bit floats on the CPU: 16-bit storage, f32 arithmetic, one rounding per result.
//! References are exact values chosen so that computing in the 16-bit format itself, or
//! rounding twice, would give a different answer.

use super::common::cpu;
use tessera_core::{
    bf16, dispatch, f16, BinaryOp, CmpOp, DType, Distribution, Error, Generator, ReduceOp, Tensor,
    UnaryOp,
};
use tessera_cpu::{Cpu, CpuTensor};

fn half_tensor(values: &[f64], dims: &[usize], dtype: DType) -> CpuTensor {
    Tensor::<Cpu>::from_vec(values.to_vec(), dims, &cpu())
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

#[test]
fn sums_accumulate_in_f32() {
    // A 16-bit accumulator stops growing at 2048 (f16) or 256 (bf16); 4096 is exact in both.
    for dtype in [DType::F16, DType::BF16] {
        let ones = Tensor::<Cpu>::ones([4096], dtype, &cpu()).unwrap();
        let sum = ones.reduce(ReduceOp::Sum, &[0], false).unwrap();
        assert_eq!(sum.dtype(), dtype);
        assert_eq!(sum.to_vec_f64().unwrap(), vec![4096.0], "{dtype}");
    }
}

#[test]
fn matmul_accumulates_in_f32_over_strided_operands() {
    for dtype in [DType::F16, DType::BF16] {
        // [2, 1024] of ones times the transpose of [3, 1024] of ones: every entry is 1024.
        let a = Tensor::<Cpu>::ones([2, 1024], dtype, &cpu()).unwrap();
        let b = Tensor::<Cpu>::ones([3, 1024], dtype, &cpu()).unwrap();
        let c = a.matmul(&b.transpose(0, 1).unwrap()).unwrap();
        assert_eq!(c.dtype(), dtype);
        assert_eq!(c.dims(), &[2, 3]);
        assert!(
            c.to_vec_f64().unwrap().iter().all(|&v| v == 1024.0),
            "{dtype}"
        );
    }
}

#[test]
fn results_are_rounded_once_to_nearest_even() {
    // 1 + (2^-11 + 2^-21) is just above the f16 tie between 1 and 1 + 2^-10: exact in f32,
    // so the single rounding goes up.
    let a = half_tensor(&[1.0, 1.0], &[2], DType::F16);
    let b = half_tensor(
        &[2f64.powi(-11) + 2f64.powi(-21), 2f64.powi(-11)],
        &[2],
        DType::F16,
    );
    let sum = a.binary(BinaryOp::Add, &b).unwrap();
    let bits: Vec<u16> = sum
        .to_vec::<f16>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    // Above the tie: up; on the tie: to even (1.0).
    assert_eq!(bits, vec![0x3c01, 0x3c00]);
    // f16 overflow: 300 * 300 = 90000 is infinite in f16, finite in bf16.
    let x = half_tensor(&[300.0], &[1], DType::F16);
    assert_eq!(
        x.binary(BinaryOp::Mul, &x).unwrap().to_vec_f64().unwrap(),
        vec![f64::INFINITY]
    );
    let y = half_tensor(&[300.0], &[1], DType::BF16);
    assert_eq!(
        y.binary(BinaryOp::Mul, &y).unwrap().to_vec_f64().unwrap(),
        vec![90112.0]
    );
}

#[test]
fn casts_into_16_bit_round_once_from_every_source() {
    // From f64 just above an f16 tie (lost when going through f32 first).
    let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let t = Tensor::<Cpu>::from_vec(vec![above], [1], &cpu()).unwrap();
    assert_eq!(
        t.to_dtype(DType::F16).unwrap().to_vec::<f16>().unwrap()[0].to_bits(),
        0x3c01
    );
    // From i64 just above a bf16 tie: 2^24 + 2^16 + 1.
    let i = Tensor::<Cpu>::from_vec(vec![(1i64 << 24) + (1 << 16) + 1], [1], &cpu()).unwrap();
    let expected = (1u64 << 24) as f64 + (1u64 << 17) as f64;
    assert_eq!(
        i.to_dtype(DType::BF16).unwrap().to_vec_f64().unwrap(),
        vec![expected]
    );
    // Between the two 16-bit formats: 1 + 2^-10 (exact in f16) to bf16 is a tie below even.
    let h = half_tensor(&[1.0 + 2f64.powi(-10), 65504.0], &[2], DType::F16);
    assert_eq!(
        h.to_dtype(DType::BF16).unwrap().to_vec_f64().unwrap(),
        vec![1.0, 65536.0]
    );
    // Back out: to i64 truncates, to bool is `!= 0`, NaN to i64 is 0.
    let x = half_tensor(&[-2.75, 0.0, f64::NAN], &[3], DType::BF16);
    assert_eq!(
        x.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        vec![-2, 0, 0]
    );
    assert_eq!(
        x.to_dtype(DType::Bool).unwrap().to_vec::<u8>().unwrap(),
        vec![1, 0, 1]
    );
}

#[test]
fn comparisons_and_arg_reductions_keep_their_dtypes() {
    let x = half_tensor(&[1.0, 3.0, -2.0, 3.0], &[4], DType::BF16);
    let y = half_tensor(&[1.0, 2.0, 0.0, 4.0], &[4], DType::BF16);
    let lt = x.compare(CmpOp::Lt, &y).unwrap();
    assert_eq!(lt.dtype(), DType::Bool);
    assert_eq!(lt.to_vec::<u8>().unwrap(), vec![0, 0, 1, 1]);
    let arg = x.argmax(0, false).unwrap();
    assert_eq!(arg.to_vec::<i64>().unwrap(), vec![1]);
}

#[test]
fn strided_inputs_are_read_through_their_layout() {
    let data: Vec<f64> = (0..6).map(|i| i as f64 * 0.5).collect();
    let x = half_tensor(&data, &[2, 3], DType::F16)
        .transpose(0, 1)
        .unwrap();
    let y = x.unary(UnaryOp::Square).unwrap();
    assert_eq!(y.dims(), &[3, 2]);
    assert_eq!(
        y.to_vec_f64().unwrap(),
        vec![0.0, 2.25, 0.25, 4.0, 1.0, 6.25]
    );
}

#[test]
fn composites_run_in_f32_and_return_the_16_bit_dtype() {
    let x = half_tensor(&[1.0, 2.0, 3.0, -1.0], &[2, 2], DType::BF16);
    let s = x.softmax(1).unwrap();
    assert_eq!(s.dtype(), DType::BF16);
    let got = s.to_vec_f64().unwrap();
    // Each probability is within one bf16 rounding of the exact one.
    let e = |a: f64, b: f64| a.exp() / (a.exp() + b.exp());
    for (g, want) in got
        .iter()
        .zip([e(1.0, 2.0), e(2.0, 1.0), e(3.0, -1.0), e(-1.0, 3.0)])
    {
        assert!((g - want).abs() <= want * 2f64.powi(-8), "{g} vs {want}");
    }
}

#[test]
fn mixing_16_bit_dtypes_is_a_dtype_mismatch() {
    let a = half_tensor(&[1.0], &[1], DType::F16);
    let b = half_tensor(&[1.0], &[1], DType::BF16);
    assert!(matches!(
        a.binary(BinaryOp::Add, &b),
        Err(Error::DTypeMismatch { .. })
    ));
    // Also at the backend level, past the tensor layer's checks.
    let c = half_tensor(&[1.0], &[1], DType::F32);
    let r = tessera_core::direct::binary(
        &cpu(),
        BinaryOp::Add,
        (a.storage(), a.layout()),
        (c.storage(), c.layout()),
    );
    assert!(matches!(r, Err(Error::DTypeMismatch { .. })), "{r:?}");
}

#[test]
fn uniform_draws_stay_below_the_upper_bound() {
    let mut g = Generator::new(7);
    for dtype in [DType::F16, DType::BF16] {
        let dist = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        let t = Tensor::<Cpu>::random_from([20_000], dist, dtype, &mut g, &cpu()).unwrap();
        assert_eq!(t.dtype(), dtype);
        let v = t.to_vec_f64().unwrap();
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)), "{dtype}");
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{dtype}: mean {mean}");
    }
}

#[test]
fn the_16_bit_element_types_round_trip_through_the_host() {
    let v = vec![
        bf16::from_f32(1.5),
        bf16::from_bits(0x0001),
        bf16::NEG_INFINITY,
    ];
    let t = Tensor::<Cpu>::from_vec(v.clone(), [3], &cpu()).unwrap();
    assert_eq!(t.dtype(), DType::BF16);
    assert_eq!(t.to_vec::<bf16>().unwrap(), v);
    let z = Tensor::<Cpu>::full([2], 0.1, DType::F16, &cpu()).unwrap();
    assert_eq!(z.to_vec::<f16>().unwrap(), vec![f16::from_f64(0.1); 2]);
}

/// The bits of `t` (bf16).
fn bf16_bits(t: &CpuTensor) -> Vec<u16> {
    t.to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect()
}

/// `t` widened to f32, `f` applied there, and the result rounded once to bf16: the 16-bit rule
/// the CPU's native bf16 maps must reproduce bit for bit.
fn in_f32(t: &[&CpuTensor], f: impl Fn(&[CpuTensor]) -> CpuTensor) -> CpuTensor {
    let wide: Vec<CpuTensor> = t.iter().map(|x| x.to_dtype(DType::F32).unwrap()).collect();
    f(&wide).to_dtype(DType::BF16).unwrap()
}

#[test]
fn bf16_maps_equal_the_f32_result_rounded_once() {
    // Values over several binades (both signs, around 0 and past GELU's and exp's knees), a
    // contiguous operand, a transposed view and a broadcast row.
    let data: Vec<f64> = (0..96)
        .map(|i| (i as f64 - 47.5) * 0.173 * if i % 3 == 0 { 7.0 } else { 1.0 })
        .collect();
    let x = half_tensor(&data, &[8, 12], DType::BF16);
    let xt = half_tensor(&data, &[12, 8], DType::BF16)
        .transpose(0, 1)
        .unwrap();
    let row = half_tensor(&data[..12], &[1, 12], DType::BF16);
    for a in [&x, &xt] {
        for op in UnaryOp::ALL {
            if !op.supports(DType::BF16) {
                continue;
            }
            let got = a.unary(op).unwrap();
            let want = in_f32(&[a], |w| w[0].unary(op).unwrap());
            assert_eq!(got.dtype(), DType::BF16);
            assert_eq!(bf16_bits(&got), bf16_bits(&want), "{op:?}");
        }
        for op in BinaryOp::ALL {
            for b in [&x, &xt, &row] {
                let got = a.binary(op, b).unwrap();
                let want = in_f32(&[a, b], |w| w[0].binary(op, &w[1]).unwrap());
                assert_eq!(bf16_bits(&got), bf16_bits(&want), "{op:?}");
            }
        }
        let grad = xt.unary(UnaryOp::Sin).unwrap();
        let got = dispatch::gelu_backward(a, &grad).unwrap();
        let want = in_f32(&[a, &grad], |w| {
            dispatch::gelu_backward(&w[0], &w[1]).unwrap()
        });
        assert_eq!(bf16_bits(&got), bf16_bits(&want), "gelu_backward");
        let got = dispatch::relu_backward(a, &grad).unwrap();
        let want = in_f32(&[a, &grad], |w| {
            dispatch::relu_backward(&w[0], &w[1]).unwrap()
        });
        assert_eq!(bf16_bits(&got), bf16_bits(&want), "relu_backward");
    }
}
