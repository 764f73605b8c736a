//! [`RandomStream`]: the random-number stream a layer embeds (dropout masks), visible to
//! checkpoints so that a resumed run draws the same masks as an uninterrupted one.

use super::{Module, ModuleVisitor, ToBackend};
use std::sync::{Mutex, MutexGuard};
use tessera_core::{Backend, Generator, Result};

/// A counter-based [`Generator`] behind a lock, so that `forward(&self)` can advance it. As a
/// field of a derived module it is visited ([`ModuleVisitor::visit_random_stream`]) under the
/// field's name, which is how [`crate::run`] saves and restores every stream of a model; it
/// has no parameters and no training mode. A clone (when the layer moves to another backend)
/// continues from the same point.
#[derive(Debug)]
pub struct RandomStream(Mutex<Generator>);

impl RandomStream {
    /// The stream `generator`.
    pub fn new(generator: Generator) -> Self {
        RandomStream(Mutex::new(generator))
    }

    /// Locks the stream to draw from it.
    pub fn lock(&self) -> MutexGuard<'_, Generator> {
        // A poisoned lock only means another forward panicked; the counter is still valid.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where the stream is now (its seed and counter).
    pub fn get(&self) -> Generator {
        self.lock().clone()
    }

    /// Moves the stream to `generator` (e.g. a position read from a checkpoint).
    pub fn set(&self, generator: Generator) {
        *self.lock() = generator;
    }
}

impl Clone for RandomStream {
    fn clone(&self) -> Self {
        RandomStream::new(self.get())
    }
}

impl<B: Backend> Module<B> for RandomStream {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        visitor.visit_random_stream(prefix, self);
    }
    fn set_training(&self, _: bool) {}
    fn training_mode(&self) -> Option<bool> {
        None
    }
}

impl<B: Backend> ToBackend<B> for RandomStream {
    type On<B2: Backend> = RandomStream;
    fn to_backend<B2: Backend>(&self, _: &B2) -> Result<RandomStream> {
        Ok(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::{Dropout, DropoutConfig};
    use crate::module::Forward;
    use tessera_autograd::Var;
    use tessera_core::{DType, Tensor};
    use tessera_cpu::Cpu;

    #[test]
    fn a_restored_stream_draws_the_same_masks_again() {
        let cpu = Cpu::new();
        let dropout: Dropout = DropoutConfig::new().init(&mut Generator::new(3)).unwrap();
        let x = Var::constant(Tensor::ones([64], DType::F32, &cpu).unwrap());
        let mut streams = Vec::new();
        Module::<Cpu>::visit_random_streams(&dropout, "drop", &mut |name, s| {
            streams.push((name.to_string(), s.get()))
        });
        assert_eq!(streams.len(), 1);
        assert_eq!(streams[0].0, "drop.generator");
        let first = dropout.forward(&x).unwrap().value().to_vec_f64().unwrap();
        let second = dropout.forward(&x).unwrap().value().to_vec_f64().unwrap();
        assert_ne!(first, second, "each forward pass draws new masks");
        Module::<Cpu>::visit_random_streams(&dropout, "drop", &mut |_, s| {
            s.set(streams[0].1.clone())
        });
        let again = dropout.forward(&x).unwrap().value().to_vec_f64().unwrap();
        assert_eq!(first, again);
    }
}
