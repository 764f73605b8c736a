//! [`HostBlas`]: `backend-opencl`'s driver with a "cuBLAS" that computes the column-major
//! strided-batched GEMM on the host from the operands the engine describes, which checks the
//! engine's row-major to column-major mapping of the cuBLAS path without a GPU. Every other
//! operation is the OpenCL driver's.

use tessera_core::{DType, Result};
use tessera_gpu::{BlasGemm, BlasOperand, BlasTranspose, Driver, DriverArg, DriverInfo, Launch};
use tessera_opencl::testing::{DeviceBuffer, OpenClDriver};

/// The OpenCL driver, with a host BLAS when `with_blas`.
pub(crate) struct HostBlas {
    inner: OpenClDriver,
    with_blas: bool,
}

impl HostBlas {
    /// Wraps `inner`.
    pub(crate) fn new(inner: OpenClDriver, with_blas: bool) -> Self {
        HostBlas { inner, with_blas }
    }

    /// Every byte of `buffer`'s first `elements` elements of `dtype`.
    fn read_elements(
        &self,
        buffer: &DeviceBuffer,
        dtype: DType,
        elements: usize,
    ) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; elements * dtype.size_in_bytes()];
        self.inner.read(buffer, 0, &mut bytes)?;
        Ok(bytes)
    }
}

/// Element `i` of `bytes` (f32 or f64) as f64.
fn element(bytes: &[u8], dtype: DType, i: usize) -> f64 {
    match dtype {
        DType::F32 => {
            f32::from_ne_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap_or_default()) as f64
        }
        _ => f64::from_ne_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap_or_default()),
    }
}

/// Elements of a column-major operand the call reaches (one past the last).
fn extent(o: &BlasOperand<'_, DeviceBuffer>, rows: usize, cols: usize, batch: usize) -> usize {
    let (r, c) = match o.transpose {
        BlasTranspose::None => (rows, cols),
        BlasTranspose::Transpose => (cols, rows),
    };
    o.offset + (batch - 1) * o.batch_stride + (r - 1) + (c - 1) * o.ld + 1
}

impl Driver for HostBlas {
    type Buffer = DeviceBuffer;

    fn info(&self) -> &DriverInfo {
        self.inner.info()
    }

    fn alloc(&self, bytes: usize) -> Result<(DeviceBuffer, bool)> {
        self.inner.alloc(bytes)
    }

    fn release(&self, buffer: DeviceBuffer) {
        self.inner.release(buffer)
    }

    fn write(&self, dst: &DeviceBuffer, src: &[u8]) -> Result<()> {
        self.inner.write(dst, src)
    }

    fn read(&self, src: &DeviceBuffer, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        self.inner.read(src, byte_offset, dst)
    }

    fn fill(&self, dst: &DeviceBuffer, pattern: &[u8], bytes: usize) -> Result<()> {
        self.inner.fill(dst, pattern, bytes)
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, DeviceBuffer>]) -> Result<()> {
        self.inner.launch(launch, args)
    }

    fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }

    fn blas_gemm(&self, call: &BlasGemm<'_, DeviceBuffer>) -> Option<Result<()>> {
        if !self.with_blas {
            return None;
        }
        Some((|| {
            let dtype = call.dtype;
            let a = self.read_elements(
                call.a.buffer,
                dtype,
                extent(&call.a, call.m, call.k, call.batch),
            )?;
            let b = self.read_elements(
                call.b.buffer,
                dtype,
                extent(&call.b, call.k, call.n, call.batch),
            )?;
            let c_len = call.c_offset + call.batch * call.c_batch_stride;
            let mut c = self.read_elements(call.c, dtype, c_len)?;
            let at = |o: &BlasOperand<'_, DeviceBuffer>, bytes: &[u8], batch, i, j| {
                let base = o.offset + batch * o.batch_stride;
                let index = match o.transpose {
                    BlasTranspose::None => base + i + j * o.ld,
                    BlasTranspose::Transpose => base + j + i * o.ld,
                };
                element(bytes, dtype, index)
            };
            for batch in 0..call.batch {
                for j in 0..call.n {
                    for i in 0..call.m {
                        let v: f64 = (0..call.k)
                            .map(|q| at(&call.a, &a, batch, i, q) * at(&call.b, &b, batch, q, j))
                            .sum();
                        let index = call.c_offset + batch * call.c_batch_stride + i + j * call.ldc;
                        match dtype {
                            DType::F32 => c[4 * index..4 * index + 4]
                                .copy_from_slice(&(v as f32).to_ne_bytes()),
                            _ => c[8 * index..8 * index + 8].copy_from_slice(&v.to_ne_bytes()),
                        }
                    }
                }
            }
            self.inner.write(call.c, &c)
        })())
    }

    fn blas_unavailable(&self) -> Option<String> {
        (!self.with_blas).then(|| "the OpenCL test driver has no BLAS".to_string())
    }
}
