//! [`CpuStorage`]: host memory holding one dtype, and [`CpuElement`], the bridge from a Rust
//! element type to its storage variant.

use tessera_core::{bf16, f16, BackendStorage, DType, Element, HostData};

/// A CPU buffer: a plain `Vec` of one of the dtypes (booleans as bytes, 0 or 1). The 16-bit
/// floats are stored in 16 bits and computed in f32 (see `tessera_core::dispatch`).
#[derive(Clone, Debug, PartialEq)]
pub enum CpuStorage {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// IEEE binary16 floats.
    F16(Vec<f16>),
    /// bfloat16 floats.
    BF16(Vec<bf16>),
    /// 64-bit signed integers.
    I64(Vec<i64>),
    /// Booleans, one byte each (0 is false, anything else true; kernels write 0 or 1).
    Bool(Vec<u8>),
}

impl BackendStorage for CpuStorage {
    fn dtype(&self) -> DType {
        match self {
            CpuStorage::F32(_) => DType::F32,
            CpuStorage::F64(_) => DType::F64,
            CpuStorage::F16(_) => DType::F16,
            CpuStorage::BF16(_) => DType::BF16,
            CpuStorage::I64(_) => DType::I64,
            CpuStorage::Bool(_) => DType::Bool,
        }
    }

    fn len(&self) -> usize {
        match self {
            CpuStorage::F32(v) => v.len(),
            CpuStorage::F64(v) => v.len(),
            CpuStorage::F16(v) => v.len(),
            CpuStorage::BF16(v) => v.len(),
            CpuStorage::I64(v) => v.len(),
            CpuStorage::Bool(v) => v.len(),
        }
    }
}

impl CpuStorage {
    /// The f32 elements, or `None` for another dtype.
    pub fn as_f32_slice(&self) -> Option<&[f32]> {
        f32::slice(self)
    }

    /// The f64 elements, or `None` for another dtype.
    pub fn as_f64_slice(&self) -> Option<&[f64]> {
        f64::slice(self)
    }

    /// The i64 elements, or `None` for another dtype.
    pub fn as_i64_slice(&self) -> Option<&[i64]> {
        i64::slice(self)
    }

    /// The boolean bytes, or `None` for another dtype.
    pub fn as_bool_slice(&self) -> Option<&[u8]> {
        u8::slice(self)
    }

    /// The f32 elements, mutably, or `None` for another dtype.
    pub fn as_f32_slice_mut(&mut self) -> Option<&mut [f32]> {
        f32::slice_mut(self)
    }

    /// The f64 elements, mutably, or `None` for another dtype.
    pub fn as_f64_slice_mut(&mut self) -> Option<&mut [f64]> {
        f64::slice_mut(self)
    }

    /// The i64 elements, mutably, or `None` for another dtype.
    pub fn as_i64_slice_mut(&mut self) -> Option<&mut [i64]> {
        i64::slice_mut(self)
    }

    /// The boolean bytes, mutably, or `None` for another dtype.
    pub fn as_bool_slice_mut(&mut self) -> Option<&mut [u8]> {
        u8::slice_mut(self)
    }

    /// The elements as `T`, or `None` when `T` is not the stored dtype.
    pub fn as_slice<T: CpuElement>(&self) -> Option<&[T]> {
        T::slice(self)
    }

    /// Wraps host data without copying; [`tessera_core::Error::UnsupportedDType`] for a
    /// dtype this backend has no storage for (none today, but `HostData` is non-exhaustive).
    pub fn from_host(data: HostData) -> tessera_core::Result<Self> {
        Ok(match data {
            HostData::F32(v) => CpuStorage::F32(v),
            HostData::F64(v) => CpuStorage::F64(v),
            HostData::F16(v) => CpuStorage::F16(v),
            HostData::BF16(v) => CpuStorage::BF16(v),
            HostData::I64(v) => CpuStorage::I64(v),
            HostData::Bool(v) => CpuStorage::Bool(v),
            other => {
                return Err(tessera_core::Error::UnsupportedDType {
                    op: "upload",
                    dtype: other.dtype(),
                })
            }
        })
    }

    /// Unwraps into host data without copying.
    pub fn into_host(self) -> HostData {
        match self {
            CpuStorage::F32(v) => HostData::F32(v),
            CpuStorage::F64(v) => HostData::F64(v),
            CpuStorage::F16(v) => HostData::F16(v),
            CpuStorage::BF16(v) => HostData::BF16(v),
            CpuStorage::I64(v) => HostData::I64(v),
            CpuStorage::Bool(v) => HostData::Bool(v),
        }
    }
}

impl TryFrom<HostData> for CpuStorage {
    type Error = tessera_core::Error;

    fn try_from(data: HostData) -> tessera_core::Result<Self> {
        CpuStorage::from_host(data)
    }
}

/// An element type with a [`CpuStorage`] variant: lets generic code borrow and build storages.
pub trait CpuElement: Element {
    /// The elements of `storage` when it holds this type.
    fn slice(storage: &CpuStorage) -> Option<&[Self]>;
    /// The elements of `storage`, mutably, when it holds this type.
    fn slice_mut(storage: &mut CpuStorage) -> Option<&mut [Self]>;
    /// Wraps a vector of this type.
    fn into_storage(values: Vec<Self>) -> CpuStorage;
}

macro_rules! impl_cpu_element {
    ($t:ty, $variant:ident) => {
        impl CpuElement for $t {
            fn slice(storage: &CpuStorage) -> Option<&[Self]> {
                match storage {
                    CpuStorage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(storage: &mut CpuStorage) -> Option<&mut [Self]> {
                match storage {
                    CpuStorage::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_storage(values: Vec<Self>) -> CpuStorage {
                CpuStorage::$variant(values)
            }
        }
    };
}

impl_cpu_element!(f32, F32);
impl_cpu_element!(f64, F64);
impl_cpu_element!(f16, F16);
impl_cpu_element!(bf16, BF16);
impl_cpu_element!(i64, I64);
impl_cpu_element!(u8, Bool);

/// Builds a storage of the same dtype from each variant's vector: `map_storage!(s, v => expr)`
/// evaluates `expr` with `v` bound to the elements and wraps the resulting `Vec` in the same
/// variant.
macro_rules! map_storage {
    ($storage:expr, $v:ident => $body:expr) => {
        match $storage {
            $crate::CpuStorage::F32($v) => $crate::CpuStorage::F32($body),
            $crate::CpuStorage::F64($v) => $crate::CpuStorage::F64($body),
            $crate::CpuStorage::F16($v) => $crate::CpuStorage::F16($body),
            $crate::CpuStorage::BF16($v) => $crate::CpuStorage::BF16($body),
            $crate::CpuStorage::I64($v) => $crate::CpuStorage::I64($body),
            $crate::CpuStorage::Bool($v) => $crate::CpuStorage::Bool($body),
        }
    };
}
pub(crate) use map_storage;
