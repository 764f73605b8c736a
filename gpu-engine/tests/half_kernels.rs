//! The 16-bit floats on the shared kernels (u16 storage, f32 arithmetic), on
//! `tessera_opencl::testing::emulator` (the default OpenCL device, PoCL in CI): the device's
//! conversions give exactly the bits of tessera-core's correctly rounded ones (every f16 and bf16
//! value widened, f32/f64/i64 values next to every kind of tie narrowed), and a few ops round
//! once from f32. The conformance suite covers every op family; these tests pin the bit-level
//! conversions it builds on. Skips, printing why, without an OpenCL device.

use tessera_core::dtype::rounding;
use tessera_core::{bf16, f16, DType, Element, Tensor};
use tessera_gpu::{GemmOptions, Gpu, Runtime};
use tessera_opencl::testing::emulator;
use tessera_opencl::OpenClDriver;

type Dev = Gpu<OpenClDriver>;

fn device() -> Option<Dev> {
    let made = emulator(|_| {})
        .and_then(Runtime::new)
        .and_then(|rt| Gpu::from_runtime(rt, GemmOptions::default()));
    match made {
        Ok(dev) => Some(dev),
        Err(e) => {
            eprintln!("skipped: no OpenCL device to emulate on ({e})");
            None
        }
    }
}

/// Bits compared with NaN payloads ignored (any NaN matches any NaN of the same format).
fn same_bits(a: u16, b: u16, nan: impl Fn(u16) -> bool) -> bool {
    a == b || (nan(a) && nan(b))
}

fn f16_is_nan(bits: u16) -> bool {
    f16::from_bits(bits).is_nan()
}

fn bf16_is_nan(bits: u16) -> bool {
    bf16::from_bits(bits).is_nan()
}

/// f32 values next to the ties and limits of both 16-bit formats, plus a spread of bit patterns.
fn f32_probes() -> Vec<f32> {
    let mut xs = Vec::new();
    for bits in 0u16..=0x7c00 {
        let lo = f16::from_bits(bits).to_f32();
        let hi = f16::from_bits(bits + 1).to_f32();
        let mid = (lo + hi) / 2.0; // exact: f16 has 11 bits, f32 24
        xs.extend([
            mid,
            f32::from_bits(mid.to_bits() + 1),
            f32::from_bits(mid.to_bits() - 1),
        ]);
    }
    for bits in (0u16..0x7f80).step_by(7) {
        let lo = bf16::from_bits(bits).to_f32();
        let hi = bf16::from_bits(bits + 1).to_f32();
        let mid = f32::from_bits((lo.to_bits() + hi.to_bits()) / 2);
        xs.extend([
            mid,
            f32::from_bits(mid.to_bits() + 1),
            f32::from_bits(mid.to_bits() - 1),
        ]);
    }
    let mut state = 0x9e37_79b9u32;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        xs.push(f32::from_bits(state));
    }
    xs.extend([0.0, f32::MIN_POSITIVE, 65504.0, 65519.99, 65520.0, f32::MAX]);
    xs.extend([f32::INFINITY, f32::NAN, 1e-40, 2.9802322e-8, 2.9802326e-8]);
    let negated: Vec<f32> = xs.iter().map(|x| -x).collect();
    xs.extend(negated);
    xs
}

#[test]
fn every_16_bit_value_widens_exactly() {
    let Some(dev) = device() else { return };
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let halves: Vec<f16> = all.iter().map(|&b| f16::from_bits(b)).collect();
    let got = Tensor::from_vec(halves.clone(), [all.len()], &dev)
        .and_then(|t| t.to_dtype(DType::F32))
        .and_then(|t| t.to_vec::<f32>())
        .unwrap();
    for (h, g) in halves.iter().zip(&got) {
        let want = h.to_f32();
        assert!(
            want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
            "f16 {h:?}"
        );
    }
    let brains: Vec<bf16> = all.iter().map(|&b| bf16::from_bits(b)).collect();
    let got = Tensor::from_vec(brains.clone(), [all.len()], &dev)
        .and_then(|t| t.to_dtype(DType::F64))
        .and_then(|t| t.to_vec::<f64>());
    // f64 only where the device has it; f32 always.
    let got32 = Tensor::from_vec(brains.clone(), [all.len()], &dev)
        .and_then(|t| t.to_dtype(DType::F32))
        .and_then(|t| t.to_vec::<f32>())
        .unwrap();
    for (i, b) in brains.iter().enumerate() {
        let want = b.to_f32();
        let g = got32[i];
        assert!(
            want.to_bits() == g.to_bits() || (want.is_nan() && g.is_nan()),
            "bf16 {b:?}"
        );
        if let Ok(g64) = &got {
            assert!(f64::from(want) == g64[i] || (want.is_nan() && g64[i].is_nan()));
        }
    }
}

#[test]
fn f32_narrows_with_one_rounding_to_nearest_even() {
    let Some(dev) = device() else { return };
    let xs = f32_probes();
    let x = Tensor::from_vec(xs.clone(), [xs.len()], &dev).unwrap();
    let to_f16 = x.to_dtype(DType::F16).unwrap().to_vec::<f16>().unwrap();
    let to_bf16 = x.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
    for (i, &v) in xs.iter().enumerate() {
        let (want, got) = (f16::from_f32(v).to_bits(), to_f16[i].to_bits());
        assert!(
            same_bits(want, got, f16_is_nan),
            "f16 of {v:e}: {want:#06x} vs {got:#06x}"
        );
        let (want, got) = (bf16::from_f32(v).to_bits(), to_bf16[i].to_bits());
        assert!(
            same_bits(want, got, bf16_is_nan),
            "bf16 of {v:e}: {want:#06x} vs {got:#06x}"
        );
    }
    // f16 -> bf16 and back go through the exact f32 value: one rounding each.
    let h = Tensor::from_vec(to_f16.clone(), [xs.len()], &dev).unwrap();
    let hb = h.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
    for (a, b) in to_f16.iter().zip(&hb) {
        let want = bf16::from_f32(a.to_f32()).to_bits();
        assert!(same_bits(want, b.to_bits(), bf16_is_nan), "{a:?}");
    }
}

#[test]
fn f64_and_i64_narrow_with_one_rounding() {
    let Some(dev) = device() else { return };
    if dev.runtime().info().supports_f64 {
        let mut xs: Vec<f64> = Vec::new();
        for v in f32_probes().into_iter().step_by(5) {
            let v = f64::from(v);
            xs.extend([v, v * (1.0 + 2f64.powi(-40)), v * (1.0 - 2f64.powi(-40))]);
        }
        xs.extend([1e300, -1e300, 1e-300, 65519.999999, 3.4028235677973366e38]);
        let x = Tensor::from_vec(xs.clone(), [xs.len()], &dev).unwrap();
        let h = x.to_dtype(DType::F16).unwrap().to_vec::<f16>().unwrap();
        let b = x.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
        for (i, &v) in xs.iter().enumerate() {
            let want = rounding::f64_to_f16(v).to_bits();
            assert!(same_bits(want, h[i].to_bits(), f16_is_nan), "f16 of {v:e}");
            let want = rounding::f64_to_bf16(v).to_bits();
            assert!(
                same_bits(want, b[i].to_bits(), bf16_is_nan),
                "bf16 of {v:e}"
            );
        }
    } else {
        eprintln!("f64 part skipped: the device has no cl_khr_fp64");
    }
    let mut ints: Vec<i64> = vec![0, 1, -3, 2049, 2051, 65519, 65520, i64::MAX, i64::MIN];
    for shift in 8..62 {
        let base = 1i64 << shift;
        ints.extend([
            base,
            base + 1,
            base - 1,
            base + (base >> 8),
            base + (base >> 8) + 1,
        ]);
        ints.extend([
            base + (base >> 9),
            base + (base >> 12) + 1,
            base + (base >> 11),
        ]);
    }
    let negated: Vec<i64> = ints.iter().map(|x| x.wrapping_neg()).collect();
    ints.extend(negated);
    let x = Tensor::from_vec(ints.clone(), [ints.len()], &dev).unwrap();
    let h = x.to_dtype(DType::F16).unwrap().to_vec::<f16>().unwrap();
    let b = x.to_dtype(DType::BF16).unwrap().to_vec::<bf16>().unwrap();
    for (i, &v) in ints.iter().enumerate() {
        assert_eq!(
            h[i].to_bits(),
            rounding::i64_to_f16(v).to_bits(),
            "f16 of {v}"
        );
        assert_eq!(
            b[i].to_bits(),
            rounding::i64_to_bf16(v).to_bits(),
            "bf16 of {v}"
        );
    }
}

#[test]
fn arithmetic_and_products_round_once_from_f32() {
    let Some(dev) = device() else { return };
    // (a + b) rounds once: f32 sum of two bf16 values, then one rounding.
    let a: Vec<f32> = (0..257).map(|i| 1.0 + i as f32 / 256.0).collect();
    let b: Vec<f32> = (0..257).map(|i| (i as f32 * 0.37).sin() / 128.0).collect();
    for dtype in [DType::F16, DType::BF16] {
        let ta = Tensor::from_vec(a.clone(), [a.len()], &dev)
            .and_then(|t| t.to_dtype(dtype))
            .unwrap();
        let tb = Tensor::from_vec(b.clone(), [b.len()], &dev)
            .and_then(|t| t.to_dtype(dtype))
            .unwrap();
        let sum = ta.add(&tb).unwrap();
        assert_eq!(sum.dtype(), dtype);
        let wa = ta.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        let wb = tb.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        let got = sum.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        for i in 0..a.len() {
            let want = round_to(dtype, wa[i] + wb[i]);
            assert_eq!(got[i].to_bits(), want.to_bits(), "{dtype} {i}");
        }
        // A 64 x 96 by 96 x 48 product: f32 accumulation, one rounding, compared with f64.
        let (m, k, n) = (64, 96, 48);
        let x: Vec<f64> = (0..m * k)
            .map(|i| ((i * 7919) % 97) as f64 / 97.0 - 0.5)
            .collect();
        let y: Vec<f64> = (0..k * n)
            .map(|i| ((i * 104729) % 89) as f64 / 89.0 - 0.5)
            .collect();
        let tx = Tensor::from_vec(x.iter().map(|&v| v as f32).collect(), [m, k], &dev)
            .and_then(|t| t.to_dtype(dtype))
            .unwrap();
        let ty = Tensor::from_vec(y.iter().map(|&v| v as f32).collect(), [k, n], &dev)
            .and_then(|t| t.to_dtype(dtype))
            .unwrap();
        let xs = tx.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        let ys = ty.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        let got = tx.matmul(&ty).unwrap();
        assert_eq!(got.dtype(), dtype);
        let got = got.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
        let ulp = if dtype == DType::F16 {
            2f64.powi(-10)
        } else {
            2f64.powi(-7)
        };
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k)
                    .map(|q| f64::from(xs[i * k + q]) * f64::from(ys[q * n + j]))
                    .sum();
                let scale: f64 = (0..k)
                    .map(|q| (f64::from(xs[i * k + q]) * f64::from(ys[q * n + j])).abs())
                    .sum();
                // Half a 16-bit ulp of the result plus f32 accumulation error.
                let tol = exact.abs() * ulp / 2.0 + scale * (k as f64) * f64::from(f32::EPSILON);
                let g = f64::from(got[i * n + j]);
                assert!(
                    (g - exact).abs() <= tol * 1.01,
                    "{dtype} [{i},{j}]: {g} vs {exact}"
                );
            }
        }
    }
}

fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        _ => bf16::from_f32(v).to_f32(),
    }
}

#[test]
fn full_rounds_once_like_element_from_f64() {
    let Some(dev) = device() else { return };
    let cpu = <bf16 as Element>::from_f64(0.1);
    let t = Tensor::full([5], 0.1, DType::BF16, &dev).unwrap();
    assert!(t.to_vec::<bf16>().unwrap().iter().all(|v| *v == cpu));
    let t = Tensor::full([3], 1e6, DType::F16, &dev).unwrap();
    assert!(t.to_vec::<f16>().unwrap().iter().all(|v| v.is_infinite()));
}
