//! Whether operations record a graph: a per-thread flag switched off by [`no_grad`].
//!
//! The flag is thread-local, like PyTorch's: a `no_grad` block on one thread does not affect
//! ops running on another. Every switch goes through [`GradModeGuard`], which restores the
//! previous state when dropped, so an early return, a `?` or a panic inside the block cannot
//! leave recording switched off.

use std::cell::Cell;

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// True when ops on this thread record the graph needed for `backward` (the default).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Sets the recording flag of this thread until the guard is dropped, then restores the value it
/// had before.
#[must_use = "the previous grad mode is restored as soon as the guard is dropped"]
#[derive(Debug)]
pub struct GradModeGuard {
    previous: bool,
}

impl GradModeGuard {
    /// Switches recording on (`true`) or off (`false`) for the guard's lifetime.
    pub fn new(enabled: bool) -> Self {
        let previous = GRAD_ENABLED.with(|flag| flag.replace(enabled));
        GradModeGuard { previous }
    }
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|flag| flag.set(self.previous));
    }
}

/// Runs `f` with recording switched off: every `Var` op inside returns a constant and builds no
/// graph (what evaluation loops and optimizer updates want). Nests freely; the previous state is
/// restored afterwards, even if `f` returns early or panics.
///
/// ```
/// use tessera_autograd::{is_grad_enabled, no_grad};
/// assert!(is_grad_enabled());
/// no_grad(|| assert!(!is_grad_enabled()));
/// assert!(is_grad_enabled());
/// ```
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = GradModeGuard::new(false);
    f()
}

/// Runs `f` with recording switched on, even inside an enclosing [`no_grad`].
pub fn enable_grad<R>(f: impl FnOnce() -> R) -> R {
    let _guard = GradModeGuard::new(true);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_blocks_restore_the_outer_state() {
        assert!(is_grad_enabled());
        no_grad(|| {
            assert!(!is_grad_enabled());
            enable_grad(|| assert!(is_grad_enabled()));
            assert!(!is_grad_enabled());
        });
        assert!(is_grad_enabled());
    }

    #[test]
    fn a_panic_inside_no_grad_restores_recording() {
        let caught = std::panic::catch_unwind(|| no_grad(|| panic!("boom")));
        assert!(caught.is_err());
        assert!(is_grad_enabled());
    }

    #[test]
    fn an_early_return_restores_recording() {
        fn early() -> Result<(), ()> {
            no_grad(|| Err(()))?;
            unreachable!()
        }
        assert!(early().is_err());
        assert!(is_grad_enabled());
    }
}
