//! Host transfers and constant fills: upload, download (the one blocking primitive) and `full`
//! (a memset, no kernel).

use crate::driver::Driver;
use crate::ops::elementwise::copy_strided;
use crate::runtime::Runtime;
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{bf16, f16, DType, Element, HostData, Layout, Result};

/// A storage of `numel` copies of `value` converted like `Element::from_f64`.
pub(crate) fn full<D: Driver>(
    rt: &Arc<Runtime<D>>,
    numel: usize,
    dtype: DType,
    value: f64,
) -> Result<GpuStorage<D>> {
    let storage = rt.alloc(dtype, numel)?;
    let pattern: Vec<u8> = match dtype {
        DType::F32 => (value as f32).to_ne_bytes().to_vec(),
        DType::F64 => value.to_ne_bytes().to_vec(),
        DType::I64 => (value as i64).to_ne_bytes().to_vec(),
        DType::F16 => <f16 as Element>::from_f64(value)
            .to_bits()
            .to_ne_bytes()
            .to_vec(),
        DType::BF16 => <bf16 as Element>::from_f64(value)
            .to_bits()
            .to_ne_bytes()
            .to_vec(),
        DType::Bool => vec![u8::from(value != 0.0)],
        other => {
            return Err(tessera_core::Error::UnsupportedDType {
                op: "full",
                dtype: other,
            })
        }
    };
    rt.fill(&storage, &pattern)?;
    Ok(storage)
}

/// The elements of `layout` in row-major order: read directly when contiguous, through a
/// contiguous device copy otherwise.
pub(crate) fn download<D: Driver>(
    rt: &Arc<Runtime<D>>,
    storage: &GpuStorage<D>,
    layout: &Layout,
) -> Result<HostData> {
    match layout.contiguous_range() {
        Some(range) => rt.read(storage, range.start, range.len()),
        None => {
            let packed = copy_strided(rt, storage, layout)?;
            rt.read(&packed, 0, layout.numel())
        }
    }
}
