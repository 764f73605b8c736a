//! [`TrainingMode`]: the training/evaluation flag a layer embeds.

use super::{Module, ModuleVisitor, ToBackend};
use std::sync::atomic::{AtomicBool, Ordering};
use tessera_core::{Backend, Result};

/// A thread-safe training/evaluation flag for layers to embed (as a field of a derived
/// module, it receives `set_training` and answers `training_mode`); starts in training mode.
#[derive(Debug)]
pub struct TrainingMode(AtomicBool);

impl TrainingMode {
    /// A flag in training mode.
    pub fn new() -> Self {
        TrainingMode(AtomicBool::new(true))
    }

    /// Sets the mode (`true`: training).
    pub fn set(&self, training: bool) {
        self.0.store(training, Ordering::Relaxed);
    }

    /// Whether the flag says training.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for TrainingMode {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for TrainingMode {
    fn clone(&self) -> Self {
        TrainingMode(AtomicBool::new(self.get()))
    }
}

impl<B: Backend> Module<B> for TrainingMode {
    fn visit(&self, _: &str, _: &mut dyn ModuleVisitor<B>) {}
    fn set_training(&self, training: bool) {
        self.set(training);
    }
    fn training_mode(&self) -> Option<bool> {
        Some(self.get())
    }
}

impl<B: Backend> ToBackend<B> for TrainingMode {
    type On<B2: Backend> = TrainingMode;
    fn to_backend<B2: Backend>(&self, _: &B2) -> Result<TrainingMode> {
        Ok(self.clone())
    }
}
