//! Conversions between Tessera host data and safetensors' little-endian byte buffers.

use safetensors::tensor::View;
use safetensors::Dtype;
use std::borrow::Cow;
use tessera_core::{DType, HostData};

/// The safetensors dtype that stores `dtype`.
pub fn to_safetensors_dtype(dtype: DType) -> Dtype {
    match dtype {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::I64 => Dtype::I64,
        DType::Bool => Dtype::BOOL,
    }
}

/// The Tessera dtype of a safetensors dtype, or `None` for the ones Tessera has no tensor type
/// for (F16, BF16, I32, U8, ...).
pub fn from_safetensors_dtype(dtype: Dtype) -> Option<DType> {
    match dtype {
        Dtype::F32 => Some(DType::F32),
        Dtype::F64 => Some(DType::F64),
        Dtype::I64 => Some(DType::I64),
        Dtype::BOOL => Some(DType::Bool),
        _ => None,
    }
}

/// The elements of `data` as little-endian bytes (bools as one byte, 0 or 1).
pub fn host_to_le_bytes(data: &HostData) -> Vec<u8> {
    match data {
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::Bool(v) => v.iter().map(|&b| u8::from(b != 0)).collect(),
    }
}

/// Decodes little-endian `bytes` as elements of `dtype`. Fails (with a message) when the length is
/// not a whole number of elements or a bool byte is neither 0 nor 1.
pub fn host_from_le_bytes(dtype: DType, bytes: &[u8]) -> Result<HostData, String> {
    let width = dtype.size_in_bytes();
    if bytes.len() % width != 0 {
        return Err(format!(
            "{} bytes are not a whole number of {dtype} elements",
            bytes.len()
        ));
    }
    Ok(match dtype {
        DType::F32 => HostData::F32(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::F64 => HostData::F64(
            bytes
                .chunks_exact(8)
                .map(le_u64)
                .map(f64::from_bits)
                .collect(),
        ),
        DType::I64 => HostData::I64(bytes.chunks_exact(8).map(|c| le_u64(c) as i64).collect()),
        DType::Bool => {
            if let Some(at) = bytes.iter().position(|&b| b > 1) {
                return Err(format!(
                    "bool element {at} is the byte 0x{:02x}, not 0 or 1",
                    bytes[at]
                ));
            }
            HostData::Bool(bytes.to_vec())
        }
    })
}

/// An 8-byte little-endian chunk as `u64`.
fn le_u64(c: &[u8]) -> u64 {
    u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
}

/// A tensor downloaded to the host, in the form `safetensors::serialize` consumes.
pub struct EncodedTensor {
    /// The stored dtype.
    pub dtype: Dtype,
    /// The dims.
    pub shape: Vec<usize>,
    /// The elements as little-endian bytes.
    pub bytes: Vec<u8>,
}

impl View for &EncodedTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }

    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}
