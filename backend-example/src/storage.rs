//! The device buffer of the example backend.

use tessera_core::{BackendStorage, DType, HostData};

/// A buffer of the example "device": one host vector of a single dtype.
///
/// A real backend stores a device allocation here (a pointer, a length and a dtype). Whatever it
/// is, it must know its dtype and its number of elements; everything else (shape, strides,
/// offset) travels separately in a [`tessera_core::Layout`].
#[derive(Clone, Debug, PartialEq)]
pub struct ExampleStorage {
    data: HostData,
}

impl ExampleStorage {
    /// Wraps host data as a storage.
    pub fn new(data: HostData) -> Self {
        ExampleStorage { data }
    }

    /// The elements.
    pub fn data(&self) -> &HostData {
        &self.data
    }

    /// The elements, mutably (for in-place `assign`).
    pub fn data_mut(&mut self) -> &mut HostData {
        &mut self.data
    }
}

impl BackendStorage for ExampleStorage {
    fn dtype(&self) -> DType {
        self.data.dtype()
    }

    fn len(&self) -> usize {
        self.data.len()
    }
}
