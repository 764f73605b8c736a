//! [`host_gemm`]: a column-major strided-batched GEMM (`cublas{S,D}gemmStridedBatched`, or
//! `cublasGemmStridedBatchedEx` for f16/bf16, with alpha 1 and beta 0) computed on the host from the call the engine describes, through any
//! driver's `read` and `write`.

use crate::driver::{BlasGemm, BlasOperand, BlasTranspose, Driver};
use tessera_core::{bf16, f16, DType, Error, Result};

/// Element `i` of `bytes` (f32, f64, f16 or bf16) as f64.
fn element(bytes: &[u8], dtype: DType, i: usize) -> f64 {
    let half = || u16::from_ne_bytes(bytes[2 * i..2 * i + 2].try_into().unwrap_or_default());
    match dtype {
        DType::F32 => {
            f32::from_ne_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap_or_default()) as f64
        }
        DType::F16 => f16::from_bits(half()).to_f64(),
        DType::BF16 => bf16::from_bits(half()).to_f64(),
        _ => f64::from_ne_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap_or_default()),
    }
}

/// Writes `v` as element `i` of `bytes`; a 16-bit output is the f32 result rounded once more,
/// as `cublasGemmStridedBatchedEx` with `CUBLAS_COMPUTE_32F` stores it.
fn store(bytes: &mut [u8], dtype: DType, i: usize, v: f64) {
    match dtype {
        DType::F32 => bytes[4 * i..4 * i + 4].copy_from_slice(&(v as f32).to_ne_bytes()),
        DType::F16 => bytes[2 * i..2 * i + 2]
            .copy_from_slice(&f16::from_f32(v as f32).to_bits().to_ne_bytes()),
        DType::BF16 => bytes[2 * i..2 * i + 2]
            .copy_from_slice(&bf16::from_f32(v as f32).to_bits().to_ne_bytes()),
        _ => bytes[8 * i..8 * i + 8].copy_from_slice(&v.to_ne_bytes()),
    }
}

/// `x` rounded to TF32 (10 explicit mantissa bits, f32's exponent) to nearest, ties to even:
/// how a TF32 tensor-core product reads an f32 input.
pub fn round_to_tf32(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let bits = x.to_bits();
    let dropped = 13;
    let half = 1u32 << (dropped - 1);
    let lsb = (bits >> dropped) & 1;
    let rounded = bits.wrapping_add(half - 1 + lsb) & !((1u32 << dropped) - 1);
    f32::from_bits(rounded)
}

/// Elements of a column-major operand the call reaches (one past the last).
fn extent<B>(o: &BlasOperand<'_, B>, rows: usize, cols: usize, batch: usize) -> usize {
    let (r, c) = match o.transpose {
        BlasTranspose::None => (rows, cols),
        BlasTranspose::Transpose => (cols, rows),
    };
    o.offset + (batch - 1) * o.batch_stride + (r - 1) + (c - 1) * o.ld + 1
}

/// The first `elements` elements of `dtype` of `buffer`, as bytes (waits for the device).
fn read<D: Driver>(
    driver: &D,
    buffer: &D::Buffer,
    dtype: DType,
    elements: usize,
) -> Result<Vec<u8>> {
    let mut bytes = vec![0u8; elements * dtype.size_in_bytes()];
    driver.read(buffer, 0, &mut bytes)?;
    Ok(bytes)
}

/// Computes `call` on the host: reads A, B and C back through `driver`, writes C. Slow (one
/// wait, a naive triple loop in f64): for tests. An f32 call with
/// [`BlasGemm::allow_tf32`] reads its inputs rounded to TF32 ([`round_to_tf32`]), as
/// `CUBLAS_COMPUTE_32F_FAST_TF32` does on tensor cores.
///
/// # Errors
/// A non-float dtype, an empty problem, or the driver's transfer errors.
pub fn host_gemm<D: Driver>(driver: &D, call: &BlasGemm<'_, D::Buffer>) -> Result<()> {
    let dtype = call.dtype;
    if !dtype.is_float() || call.m * call.n * call.k * call.batch == 0 {
        return Err(Error::InvalidArgument {
            op: "host gemm",
            msg: format!("{dtype} {}x{}x{} x{}", call.m, call.n, call.k, call.batch),
        });
    }
    let a = read(
        driver,
        call.a.buffer,
        dtype,
        extent(&call.a, call.m, call.k, call.batch),
    )?;
    let b = read(
        driver,
        call.b.buffer,
        dtype,
        extent(&call.b, call.k, call.n, call.batch),
    )?;
    let c_len = call.c_offset + call.batch * call.c_batch_stride;
    let mut c = read(driver, call.c, dtype, c_len)?;
    let at = |o: &BlasOperand<'_, D::Buffer>, bytes: &[u8], batch, i, j| {
        let base = o.offset + batch * o.batch_stride;
        let index = match o.transpose {
            BlasTranspose::None => base + i + j * o.ld,
            BlasTranspose::Transpose => base + j + i * o.ld,
        };
        let v = element(bytes, dtype, index);
        if call.allow_tf32 && dtype == DType::F32 {
            round_to_tf32(v as f32) as f64
        } else {
            v
        }
    };
    for batch in 0..call.batch {
        for j in 0..call.n {
            for i in 0..call.m {
                let v: f64 = (0..call.k)
                    .map(|q| at(&call.a, &a, batch, i, q) * at(&call.b, &b, batch, q, j))
                    .sum();
                let index = call.c_offset + batch * call.c_batch_stride + i + j * call.ldc;
                store(&mut c, dtype, index, v);
            }
        }
    }
    driver.write(call.c, &c)
}

#[cfg(test)]
mod tests {
    use super::round_to_tf32;

    #[test]
    fn tf32_keeps_ten_mantissa_bits_rounding_to_nearest_even() {
        let ulp = 2f32.powi(-10);
        assert_eq!(round_to_tf32(1.0), 1.0);
        // Below half a TF32 ulp rounds down, above rounds up, a tie goes to the even mantissa.
        assert_eq!(round_to_tf32(1.0 + 2f32.powi(-12)), 1.0);
        assert_eq!(
            round_to_tf32(1.0 + 2f32.powi(-11) + 2f32.powi(-20)),
            1.0 + ulp
        );
        assert_eq!(round_to_tf32(1.0 + 2f32.powi(-11)), 1.0);
        assert_eq!(round_to_tf32(1.0 + ulp + 2f32.powi(-11)), 1.0 + 2.0 * ulp);
        assert_eq!(round_to_tf32(-3.0 - 2f32.powi(-12)), -3.0);
        assert!(round_to_tf32(f32::NAN).is_nan());
        assert_eq!(round_to_tf32(f32::INFINITY), f32::INFINITY);
        assert_eq!(round_to_tf32(f32::MAX), f32::INFINITY);
    }
}
