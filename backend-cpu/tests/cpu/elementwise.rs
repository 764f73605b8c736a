//! Unary, binary, compare, where and cast kernels.

use crate::common::*;
use tessera_core::{BinaryOp, CmpOp, DType, Error, Layout, UnaryOp};
use tessera_cpu::{Cpu, CpuStorage, CpuTensor};

/// The f64 reference of each float unary op.
fn unary_reference(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        }
        UnaryOp::Square => x * x,
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Relu => {
            if x.is_nan() {
                x
            } else {
                x.max(0.0)
            }
        }
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf_reference(x / 2f64.sqrt())),
        UnaryOp::Erf => erf_reference(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Not => unreachable!("not a float op"),
    }
}

/// Inputs in the op's domain (positive where needed).
fn domain(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Sqrt | UnaryOp::Log => x.abs() + 0.01,
        UnaryOp::Recip if x.abs() < 0.05 => 0.5,
        _ => x,
    }
}

#[test]
fn float_unary_ops_match_f64_on_every_view() {
    let raw = values(120, 1, -3.5, 3.5);
    for op in UnaryOp::ALL.into_iter().filter(|o| o.supports(DType::F64)) {
        let data: Vec<f64> = raw.iter().map(|&x| domain(op, x)).collect();
        for (f32_dtype, base) in [
            (false, tensor_f64(&data, &[4, 6, 5])),
            (true, tensor_f32(&data, &[4, 6, 5])),
        ] {
            let stored = if f32_dtype {
                as_f32(&data)
            } else {
                data.clone()
            };
            for (name, view) in views(&base) {
                let got = view.unary(op).unwrap();
                assert_eq!(got.dims(), view.dims());
                assert!(got.is_contiguous());
                let want: Vec<f64> = view_of(&stored, &view)
                    .into_iter()
                    .map(|x| unary_reference(op, x))
                    .collect();
                let (rtol, atol) = if f32_dtype {
                    (2e-6, 1e-6)
                } else {
                    (1e-12, 1e-12)
                };
                let what = format!("{} f32={f32_dtype} {name}", op.name());
                assert_close(&got.to_vec_f64().unwrap(), &want, rtol, atol, &what);
            }
        }
    }
}

#[test]
fn float_unary_ops_handle_special_values() {
    let specials = [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        1000.0,
        -1000.0,
    ];
    let x = tensor_f64(&specials, &[specials.len()]);
    let run = |op: UnaryOp| x.unary(op).unwrap().to_vec_f64().unwrap();
    let nan = f64::NAN;
    let inf = f64::INFINITY;
    assert_same_bits(
        &run(UnaryOp::Sign),
        &[nan, 1.0, -1.0, -0.0, 0.0, 1.0, -1.0],
        "sign",
    );
    assert_same_bits(
        &run(UnaryOp::Relu),
        &[nan, inf, 0.0, 0.0, 0.0, 1000.0, 0.0],
        "relu",
    );
    assert_same_bits(
        &run(UnaryOp::Sigmoid),
        &[nan, 1.0, 0.0, 0.5, 0.5, 1.0, 0.0],
        "sigmoid",
    );
    assert_same_bits(
        &run(UnaryOp::Abs),
        &[nan, inf, inf, 0.0, 0.0, 1000.0, 1000.0],
        "abs",
    );
    assert_same_bits(
        &run(UnaryOp::Neg),
        &[nan, -inf, inf, 0.0, -0.0, -1000.0, 1000.0],
        "neg",
    );
    assert_same_bits(
        &run(UnaryOp::Exp),
        &[nan, inf, 0.0, 1.0, 1.0, inf, 0.0],
        "exp",
    );
    assert_same_bits(
        &run(UnaryOp::Tanh),
        &[nan, 1.0, -1.0, -0.0, 0.0, 1.0, -1.0],
        "tanh",
    );
    assert_same_bits(
        &run(UnaryOp::Erf),
        &[nan, 1.0, -1.0, -0.0, 0.0, 1.0, -1.0],
        "erf",
    );
    assert_same_bits(
        &run(UnaryOp::Recip),
        &[nan, 0.0, -0.0, -inf, inf, 1e-3, -1e-3],
        "recip",
    );
    let gelu = run(UnaryOp::Gelu);
    assert!(gelu[0].is_nan());
    assert_eq!(gelu[1], inf);
    assert_eq!(&gelu[3..], &[0.0, 0.0, 1000.0, 0.0]);
    // f32 sigmoid is stable too: no NaN for large magnitudes.
    let s = tensor_f32(&[-200.0, 200.0], &[2]).sigmoid().unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![0.0, 1.0]);
}

#[test]
fn integer_unary_ops_wrap() {
    let data = vec![i64::MIN, -7, -1, 0, 3, i64::MAX];
    let x = CpuTensor::from_vec(data.clone(), [6], &cpu()).unwrap();
    assert_eq!(
        x.neg().unwrap().to_vec::<i64>().unwrap(),
        data.iter().map(|v| v.wrapping_neg()).collect::<Vec<_>>()
    );
    assert_eq!(
        x.abs().unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MIN, 7, 1, 0, 3, i64::MAX]
    );
    assert_eq!(
        x.sign().unwrap().to_vec::<i64>().unwrap(),
        vec![-1, -1, -1, 0, 1, 1]
    );
    assert_eq!(
        x.square().unwrap().to_vec::<i64>().unwrap(),
        data.iter().map(|v| v.wrapping_mul(*v)).collect::<Vec<_>>()
    );
    // Direct backend calls with unsupported dtypes are errors, not panics.
    let s = CpuStorage::I64(data);
    let l = Layout::contiguous([6]);
    assert!(matches!(
        tessera_core::direct::unary(&Cpu, UnaryOp::Exp, &s, &l),
        Err(Error::UnsupportedDType {
            op: "exp",
            dtype: DType::I64
        })
    ));
    assert!(matches!(
        tessera_core::direct::unary(&Cpu, UnaryOp::Not, &CpuStorage::F32(vec![1.0; 6]), &l),
        Err(Error::UnsupportedDType { .. })
    ));
}

#[test]
fn logical_not_of_a_strided_bool_tensor() {
    let m = CpuTensor::from_vec(vec![1u8, 0, 0, 1, 1, 0], [2, 3], &cpu()).unwrap();
    let t = m.t().unwrap().logical_not().unwrap();
    assert_eq!(t.to_vec::<u8>().unwrap(), vec![0, 0, 1, 0, 1, 1]);
}

fn binary_reference(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Maximum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }
        BinaryOp::Minimum => {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.min(b)
            }
        }
    }
}

/// A named pair of operands with the reference values of each (row-major).
type OperandPair = (String, CpuTensor, Vec<f64>, CpuTensor, Vec<f64>);

/// Pairs of operands of one broadcast shape covering the map2 paths: both contiguous, a
/// broadcast row, a broadcast scalar on either side, and two transposed/stepped views.
fn operand_pairs(f32_dtype: bool, positive_lhs: bool) -> Vec<OperandPair> {
    let make = |data: &[f64], dims: &[usize]| {
        if f32_dtype {
            (tensor_f32(data, dims), as_f32(data))
        } else {
            (tensor_f64(data, dims), data.to_vec())
        }
    };
    let lo = if positive_lhs { 0.1 } else { -3.0 };
    let (a, ad) = make(&values(60, 3, lo, 3.0), &[6, 10]);
    let (b, bd) = make(&values(60, 4, -3.0, 3.0), &[6, 10]);
    let (row, rd) = make(&values(10, 5, -2.0, 2.0), &[10]);
    let (s, sd) = make(&[1.5], &[]);
    let (bt, btd) = make(&values(60, 6, -3.0, 3.0), &[10, 6]);
    let (big, bigd) = make(&values(240, 7, -3.0, 3.0), &[12, 20]);
    let pick = |t: &CpuTensor, d: &[f64], shape: &[usize]| {
        let v = t.broadcast_to(shape).unwrap();
        let vals = view_of(d, &v);
        (v, vals)
    };
    let shape = [6, 10];
    let mut out = Vec::new();
    let mut push = |name: &str, (x, xd): (CpuTensor, Vec<f64>), (y, yd): (CpuTensor, Vec<f64>)| {
        out.push((name.to_string(), x, xd, y, yd));
    };
    push("contiguous", pick(&a, &ad, &shape), pick(&b, &bd, &shape));
    push(
        "row broadcast",
        pick(&a, &ad, &shape),
        pick(&row, &rd, &shape),
    );
    push("scalar rhs", pick(&a, &ad, &shape), pick(&s, &sd, &shape));
    push("scalar lhs", pick(&s, &sd, &shape), pick(&b, &bd, &shape));
    let t = bt.t().unwrap();
    let tv = view_of(&btd, &t);
    let st = big.slice(0, 0, 12, 2).unwrap().slice(1, 1, 20, 2).unwrap();
    let sv = view_of(&bigd, &st);
    push(
        "transposed lhs, stepped rhs",
        (t.clone(), tv.clone()),
        (st.clone(), sv.clone()),
    );
    push("stepped lhs, transposed rhs", (st, sv), (t, tv));
    out
}

#[test]
fn float_binary_ops_match_f64_on_every_path() {
    for op in BinaryOp::ALL {
        for f32_dtype in [false, true] {
            for (name, x, xd, y, yd) in operand_pairs(f32_dtype, op == BinaryOp::Pow) {
                let got = x.binary(op, &y).unwrap();
                let want: Vec<f64> = xd
                    .iter()
                    .zip(&yd)
                    .map(|(&a, &b)| binary_reference(op, a, b))
                    .collect();
                let (rtol, atol) = if f32_dtype {
                    (1e-5, 1e-6)
                } else {
                    (1e-13, 1e-13)
                };
                let what = format!("{} f32={f32_dtype} {name}", op.name());
                assert_close(&got.to_vec_f64().unwrap(), &want, rtol, atol, &what);
            }
        }
    }
}

#[test]
fn maximum_and_minimum_propagate_nan_from_either_side() {
    let nan = f64::NAN;
    let a = tensor_f32(&[nan, 1.0, 2.0, nan, -0.0], &[5]);
    let b = tensor_f32(&[1.0, nan, 3.0, nan, 5.0], &[5]);
    let max = a.maximum(&b).unwrap().to_vec_f64().unwrap();
    let min = a.minimum(&b).unwrap().to_vec_f64().unwrap();
    assert_same_bits(&max, &[nan, nan, 3.0, nan, 5.0], "maximum");
    assert_same_bits(&min, &[nan, nan, 2.0, nan, -0.0], "minimum");
    // clamp is built on them and keeps NaN.
    let c = tensor_f64(&[nan, -5.0, 0.5, 9.0], &[4])
        .clamp(0.0, 1.0)
        .unwrap();
    assert_same_bits(&c.to_vec_f64().unwrap(), &[nan, 0.0, 0.5, 1.0], "clamp");
}

#[test]
fn integer_binary_ops_wrap_and_reject_division() {
    let a = CpuTensor::from_vec(vec![i64::MAX, i64::MIN, 6, -4], [4], &cpu()).unwrap();
    let b = CpuTensor::from_vec(vec![1i64, 1, -7, 3], [4], &cpu()).unwrap();
    assert_eq!(
        a.add(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MIN, i64::MIN + 1, -1, -1]
    );
    assert_eq!(
        a.sub(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MAX - 1, i64::MAX, 13, -7]
    );
    assert_eq!(
        a.mul(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MAX, i64::MIN, -42, -12]
    );
    assert_eq!(
        a.maximum(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![i64::MAX, 1, 6, 3]
    );
    assert_eq!(
        a.minimum(&b).unwrap().to_vec::<i64>().unwrap(),
        vec![1, i64::MIN, -7, -4]
    );
    let (sa, sb) = (CpuStorage::I64(vec![1]), CpuStorage::I64(vec![0]));
    let l = Layout::contiguous([1]);
    assert!(matches!(
        tessera_core::direct::binary(&Cpu, BinaryOp::Div, (&sa, &l), (&sb, &l)),
        Err(Error::UnsupportedDType { .. })
    ));
    // Mismatched dtypes reaching the backend directly are errors too.
    assert!(matches!(
        tessera_core::direct::binary(
            &Cpu,
            BinaryOp::Add,
            (&sa, &l),
            (&CpuStorage::F32(vec![0.0]), &l)
        ),
        Err(Error::DTypeMismatch { .. })
    ));
}

#[test]
fn bool_binary_ops_are_logical() {
    let a = CpuTensor::from_vec(vec![0u8, 0, 1, 1], [4], &cpu()).unwrap();
    let b = CpuTensor::from_vec(vec![0u8, 1, 0, 1], [4], &cpu()).unwrap();
    assert_eq!(a.mul(&b).unwrap().to_vec::<u8>().unwrap(), vec![0, 0, 0, 1]);
    assert_eq!(
        a.minimum(&b).unwrap().to_vec::<u8>().unwrap(),
        vec![0, 0, 0, 1]
    );
    assert_eq!(
        a.maximum(&b).unwrap().to_vec::<u8>().unwrap(),
        vec![0, 1, 1, 1]
    );
    assert!(matches!(a.add(&b), Err(Error::UnsupportedDType { .. })));
}

#[test]
fn comparisons_follow_ieee_on_every_path() {
    // Values on a 0.5 grid so that many pairs are equal, plus NaNs.
    let grid = |n: usize, seed: u64| -> Vec<f64> {
        let mut v: Vec<f64> = values(n, seed, -2.0, 2.0)
            .into_iter()
            .map(|x| (x * 2.0).round() / 2.0)
            .collect();
        for i in (seed as usize % 5..n).step_by(9) {
            v[i] = f64::NAN;
        }
        v
    };
    let (xd, yd, zd, rd) = (grid(60, 21), grid(60, 22), grid(240, 23), grid(10, 24));
    for f32_dtype in [false, true] {
        let make = |d: &[f64], dims: &[usize]| {
            if f32_dtype {
                tensor_f32(d, dims)
            } else {
                tensor_f64(d, dims)
            }
        };
        let x = make(&xd, &[6, 10]);
        let y = make(&yd, &[6, 10]);
        let yt = make(&yd, &[10, 6]).t().unwrap();
        let z = make(&zd, &[12, 20])
            .slice(0, 0, 12, 2)
            .unwrap()
            .slice(1, 0, 20, 2)
            .unwrap();
        let row = make(&rd, &[10]).broadcast_to([6, 10]).unwrap();
        let half = make(&[0.5], &[]).broadcast_to([6, 10]).unwrap();
        let cases = [
            ("contiguous", &x, view_of(&xd, &x), &y, view_of(&yd, &y)),
            (
                "transposed rhs",
                &x,
                view_of(&xd, &x),
                &yt,
                view_of(&yd, &yt),
            ),
            ("scalar rhs", &x, view_of(&xd, &x), &half, vec![0.5; 60]),
            (
                "stepped lhs, row rhs",
                &z,
                view_of(&zd, &z),
                &row,
                view_of(&rd, &row),
            ),
        ];
        for (name, a, ad, b, bd) in cases {
            for op in CmpOp::ALL {
                let got = a.compare(op, b).unwrap();
                assert_eq!(got.dtype(), DType::Bool);
                let want: Vec<u8> = ad
                    .iter()
                    .zip(&bd)
                    .map(|(&p, &q)| {
                        u8::from(match op {
                            CmpOp::Eq => p == q,
                            CmpOp::Ne => p != q,
                            CmpOp::Lt => p < q,
                            CmpOp::Le => p <= q,
                            CmpOp::Gt => p > q,
                            CmpOp::Ge => p >= q,
                        })
                    })
                    .collect();
                assert_eq!(got.to_vec::<u8>().unwrap(), want, "{} {name}", op.name());
            }
        }
    }
}

#[test]
fn comparisons_of_integers_and_bools() {
    let a = CpuTensor::from_vec(vec![i64::MIN, 0, 5], [3], &cpu()).unwrap();
    let b = CpuTensor::from_vec(vec![0i64, 0, -5], [3], &cpu()).unwrap();
    assert_eq!(a.lt(&b).unwrap().to_vec::<u8>().unwrap(), vec![1, 0, 0]);
    assert_eq!(a.ge(&b).unwrap().to_vec::<u8>().unwrap(), vec![0, 1, 1]);
    let p = CpuTensor::from_vec(vec![0u8, 1, 1], [3], &cpu()).unwrap();
    let q = CpuTensor::from_vec(vec![1u8, 1, 0], [3], &cpu()).unwrap();
    assert_eq!(p.lt(&q).unwrap().to_vec::<u8>().unwrap(), vec![1, 0, 0]);
    assert_eq!(p.eq(&q).unwrap().to_vec::<u8>().unwrap(), vec![0, 1, 0]);
}

#[test]
fn where_select_broadcasts_all_three_operands() {
    let cond_data = [1u8, 0, 0, 1, 1, 0];
    let cond = CpuTensor::from_vec(cond_data.to_vec(), [2, 3], &cpu()).unwrap();
    // cond transposed to [3, 2]; on_true a [3, 1] column; on_false a scalar.
    let ct = cond.t().unwrap();
    let on_true = tensor_f64(&[10.0, 20.0, 30.0], &[3, 1]);
    let on_false = tensor_f64(&[-1.0], &[]);
    let got = ct.where_select(&on_true, &on_false).unwrap();
    assert_eq!(got.dims(), &[3, 2]);
    let mut want = Vec::new();
    for i in 0..3 {
        for j in 0..2 {
            let c = cond_data[j * 3 + i];
            want.push(if c != 0 { [10.0, 20.0, 30.0][i] } else { -1.0 });
        }
    }
    assert_eq!(got.to_vec_f64().unwrap(), want);
    // Integer and bool branches.
    let ti = CpuTensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], [2, 3], &cpu()).unwrap();
    let fi = ti.neg().unwrap();
    assert_eq!(
        cond.where_select(&ti, &fi)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![1, -2, -3, 4, 5, -6]
    );
    let nb = cond.logical_not().unwrap();
    assert_eq!(
        cond.where_select(&nb, &cond)
            .unwrap()
            .to_vec::<u8>()
            .unwrap(),
        vec![0, 0, 0, 0, 0, 0]
    );
    // A non-bool mask reaching the backend is an error.
    let l = Layout::contiguous([1]);
    let f = CpuStorage::F32(vec![1.0]);
    assert!(tessera_core::direct::where_select(&Cpu, (&f, &l), (&f, &l), (&f, &l)).is_err());
}

#[test]
fn casts_truncate_saturate_and_test_nonzero() {
    let specials = [
        2.7,
        -2.7,
        -0.0,
        0.0,
        f64::NAN,
        1e30,
        -1e30,
        f64::INFINITY,
        0.5,
    ];
    let x = tensor_f64(&specials, &[3, 3]).t().unwrap();
    let order: Vec<f64> = view_of(&specials, &x);
    let ints = x.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap();
    let want_ints: Vec<i64> = order
        .iter()
        .map(|&v| {
            if v.is_nan() {
                0
            } else if v >= 9.3e18 {
                i64::MAX
            } else if v <= -9.3e18 {
                i64::MIN
            } else {
                v.trunc() as i64
            }
        })
        .collect();
    assert_eq!(ints, want_ints);
    let bools = x.to_dtype(DType::Bool).unwrap().to_vec::<u8>().unwrap();
    let want_bools: Vec<u8> = order.iter().map(|&v| u8::from(v != 0.0)).collect();
    assert_eq!(bools, want_bools);
    let f32s = x.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
    for (g, w) in f32s.iter().zip(&order) {
        assert!((g.is_nan() && w.is_nan()) || *g == *w as f32);
    }
    // From integers and bools.
    let i = CpuTensor::from_vec(vec![-3i64, 0, 1 << 40], [3], &cpu()).unwrap();
    assert_eq!(
        i.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap(),
        vec![-3.0, 0.0, (1u64 << 40) as f32]
    );
    assert_eq!(
        i.to_dtype(DType::Bool).unwrap().to_vec::<u8>().unwrap(),
        vec![1, 0, 1]
    );
    let b = CpuTensor::from_vec(vec![0u8, 1, 2], [3], &cpu()).unwrap();
    assert_eq!(
        b.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap(),
        vec![0.0, 1.0, 1.0]
    );
    assert_eq!(
        b.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap(),
        vec![0, 1, 1]
    );
    // Same-dtype casts through the backend give a contiguous copy of a strided view.
    let same = tessera_core::direct::cast(&Cpu, x.storage(), x.layout(), DType::F64).unwrap();
    assert_same_bits(same.as_f64_slice().unwrap(), &order, "f64 -> f64");
}

#[test]
fn empty_and_rank_zero_tensors() {
    let e = tensor_f32(&[], &[0, 3]);
    let r = tensor_f32(&[1.0, 2.0, 3.0], &[3]);
    let sum = e.add(&r).unwrap();
    assert_eq!(sum.dims(), &[0, 3]);
    assert!(sum.to_vec::<f32>().unwrap().is_empty());
    assert_eq!(e.exp().unwrap().dims(), &[0, 3]);
    assert!(e
        .t()
        .unwrap()
        .to_dtype(DType::I64)
        .unwrap()
        .to_vec::<i64>()
        .unwrap()
        .is_empty());
    assert!(e.lt(&r).unwrap().to_vec::<u8>().unwrap().is_empty());
    let s = CpuTensor::scalar(2.0f64, &cpu()).unwrap();
    assert_eq!(s.exp().unwrap().to_scalar::<f64>().unwrap(), 2f64.exp());
    assert_eq!((&s * &s).unwrap().to_scalar::<f64>().unwrap(), 4.0);
    assert_eq!(s.gt_scalar(1.0).unwrap().to_scalar::<u8>().unwrap(), 1);
}

#[test]
fn large_elementwise_ops_take_the_parallel_path_correctly() {
    // 300 x 257 = 77100 elements, above the 32768 threshold, with odd sizes so chunks start
    // mid-row.
    let (m, n) = (300, 257);
    let ad = values(m * n, 11, -2.0, 2.0);
    let bd = values(n * m, 12, -2.0, 2.0);
    let rd = values(n, 13, -2.0, 2.0);
    let a = tensor_f32(&ad, &[m, n]);
    let bt = tensor_f32(&bd, &[n, m]).t().unwrap();
    let row = tensor_f32(&rd, &[n]);
    let (a32, b32, r32) = (as_f32(&ad), as_f32(&bd), as_f32(&rd));
    let got = a.add(&bt).unwrap().mul(&row).unwrap();
    let mut want = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let s = (a32[i * n + j] as f32 + b32[j * m + i] as f32) as f64;
            want.push((s as f32 * r32[j] as f32) as f64);
        }
    }
    assert_close(
        &got.to_vec_f64().unwrap(),
        &want,
        0.0,
        0.0,
        "parallel add/mul",
    );
    let e = bt.exp().unwrap().to_vec_f64().unwrap();
    let want_e: Vec<f64> = view_of(&b32, &bt).iter().map(|v| v.exp()).collect();
    assert_close(&e, &want_e, 2e-6, 0.0, "parallel exp");
    let c = bt.to_dtype(DType::F64).unwrap().to_vec_f64().unwrap();
    assert_eq!(c, view_of(&b32, &bt));
    let g = bt.gt(&a).unwrap().to_vec::<u8>().unwrap();
    let want_g: Vec<u8> = view_of(&b32, &bt)
        .iter()
        .zip(&a32)
        .map(|(x, y)| u8::from(x > y))
        .collect();
    assert_eq!(g, want_g);
    let w = a.gt_scalar(0.0).unwrap().where_select(&bt, &row).unwrap();
    let want_w: Vec<f64> = (0..m * n)
        .map(|p| {
            if a32[p] > 0.0 {
                b32[(p % n) * m + p / n]
            } else {
                r32[p % n]
            }
        })
        .collect();
    assert_eq!(w.to_vec_f64().unwrap(), want_w);
}
