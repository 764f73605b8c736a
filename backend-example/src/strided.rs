//! Reading a storage through a layout, and the index arithmetic the kernels share.
//!
//! The example backend turns every input into a contiguous row-major vector first ([`read`]) and
//! runs its kernels on those. That costs a copy per input but makes the layout rules (any
//! non-negative strides, zero strides for broadcast dimensions, an offset) impossible to get
//! wrong in the kernels themselves.

use crate::alloc::collect;
use crate::ExampleStorage;
use tessera_core::operand::Operand;
use tessera_core::{HostData, Result};

/// The elements `x` selects from its storage, in row-major logical order. Every position read
/// is in bounds: the operand type was checked to fit its storage when it was built.
pub(crate) fn read(x: Operand<'_, ExampleStorage>) -> Result<HostData> {
    let positions = collect(x.layout().numel(), x.layout().offsets())?;
    pick(x.storage().data(), &positions)
}

/// The elements of `data` at `positions`, in that order.
pub(crate) fn pick(data: &HostData, positions: &[usize]) -> Result<HostData> {
    let n = positions.len();
    Ok(match data {
        HostData::F32(v) => HostData::F32(collect(n, positions.iter().map(|&p| v[p]))?),
        HostData::F64(v) => HostData::F64(collect(n, positions.iter().map(|&p| v[p]))?),
        HostData::F16(v) => HostData::F16(collect(n, positions.iter().map(|&p| v[p]))?),
        HostData::BF16(v) => HostData::BF16(collect(n, positions.iter().map(|&p| v[p]))?),
        HostData::I64(v) => HostData::I64(collect(n, positions.iter().map(|&p| v[p]))?),
        HostData::Bool(v) => HostData::Bool(collect(n, positions.iter().map(|&p| v[p]))?),
        other => {
            return Err(tessera_core::Error::UnsupportedDType {
                op: "read",
                dtype: other.dtype(),
            })
        }
    })
}

/// The multi-index of row-major position `flat` in an array of `dims`.
pub(crate) fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut index = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        index[i] = flat % d;
        flat /= d;
    }
    index
}

/// The row-major position of `index` in an array of `dims`.
pub(crate) fn ravel(index: &[usize], dims: &[usize]) -> usize {
    index
        .iter()
        .zip(dims)
        .fold(0, |flat, (&i, &d)| flat * d + i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::Layout;

    #[test]
    fn ravel_inverts_unravel() {
        let dims = [2, 3, 4];
        for flat in 0..24 {
            assert_eq!(ravel(&unravel(flat, &dims), &dims), flat);
        }
        assert_eq!(unravel(23, &dims), vec![1, 2, 3]);
    }

    #[test]
    fn read_follows_strides_and_offset() {
        let storage = ExampleStorage::new(HostData::I64((0..6).collect()));
        // The transpose of a contiguous [2, 3], starting at element 0.
        let layout = Layout::strided([3, 2], vec![1, 3], 0, 6).unwrap();
        assert_eq!(
            read(Operand::new("test", &storage, &layout).unwrap()).unwrap(),
            HostData::I64(vec![0, 3, 1, 4, 2, 5])
        );
        // A broadcast row.
        let layout = Layout::strided([2, 2], vec![0, 1], 4, 6).unwrap();
        assert_eq!(
            read(Operand::new("test", &storage, &layout).unwrap()).unwrap(),
            HostData::I64(vec![4, 5, 4, 5])
        );
    }
}
