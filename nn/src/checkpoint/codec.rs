//! Conversions between Tessera host data and safetensors' little-endian byte buffers.

use safetensors::Dtype;
use tessera_core::{bf16, f16, DType, HostData};

/// The safetensors dtype that stores `dtype`, or `None` for a dtype safetensors has no code
/// for (none today; `DType` is non-exhaustive).
pub fn to_safetensors_dtype(dtype: DType) -> Option<Dtype> {
    Some(match dtype {
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::I64 => Dtype::I64,
        DType::Bool => Dtype::BOOL,
        _ => return None,
    })
}

/// The Tessera dtype of a safetensors dtype, or `None` for the ones Tessera has no tensor type
/// for (I32, U8, F8, ...). F16 and BF16 are the IEEE binary16 and bfloat16 bit patterns
/// (PyTorch's `torch.float16` and `torch.bfloat16`).
pub fn from_safetensors_dtype(dtype: Dtype) -> Option<DType> {
    match dtype {
        Dtype::F32 => Some(DType::F32),
        Dtype::F64 => Some(DType::F64),
        Dtype::F16 => Some(DType::F16),
        Dtype::BF16 => Some(DType::BF16),
        Dtype::I64 => Some(DType::I64),
        Dtype::BOOL => Some(DType::Bool),
        _ => None,
    }
}

/// The elements of `data` as little-endian bytes (bools as one byte, 0 or 1), or `None` for
/// host data of a dtype without a safetensors code (none today; `HostData` is non-exhaustive).
pub fn host_to_le_bytes(data: &HostData) -> Option<Vec<u8>> {
    Some(match data {
        HostData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        HostData::Bool(v) => v.iter().map(|&b| u8::from(b != 0)).collect(),
        _ => return None,
    })
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
        DType::F16 => HostData::F16(
            bytes
                .chunks_exact(2)
                .map(|c| f16::from_le_bytes([c[0], c[1]]))
                .collect(),
        ),
        DType::BF16 => HostData::BF16(
            bytes
                .chunks_exact(2)
                .map(|c| bf16::from_le_bytes([c[0], c[1]]))
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
        other => return Err(format!("dtype {other} has no safetensors encoding")),
    })
}

/// An 8-byte little-endian chunk as `u64`.
fn le_u64(c: &[u8]) -> u64 {
    u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
}
