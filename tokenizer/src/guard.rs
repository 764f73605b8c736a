//! Panics inside the `tokenizers` library, caught at the crate's boundary.
//!
//! `tokenizers` trusts its input file in a few places (`expect` on a nested JSON value, a
//! slice past a string's end, a map lookup of a special token) and panics on a damaged
//! `tokenizer.json`. A panic is not an answer a Tessera user can handle, so every call into
//! the library goes through [`guarded`], which turns one into a [`Panicked`] value that the
//! caller reports as a typed error naming the file.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// A panic caught in the `tokenizers` library, with its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Panicked(String);

impl std::fmt::Display for Panicked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "panicked ({})", self.0)
    }
}

/// Runs `f`, returning a caught panic as [`Panicked`]. The value `f` worked on is not used
/// again by the caller after a panic except through further guarded calls, so the
/// `AssertUnwindSafe` cannot expose a broken invariant as a wrong answer: at worst a later
/// call panics again and is caught again.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, Panicked> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Panicked(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_passes_through() {
        assert_eq!(guarded(|| 7), Ok(7));
    }

    #[test]
    fn a_panic_becomes_its_message() {
        let r: Result<(), _> = guarded(|| panic!("broken {}", 3));
        assert_eq!(r, Err(Panicked("broken 3".into())));
        let r: Result<(), _> = guarded(|| std::panic::panic_any(5u8));
        assert_eq!(r.unwrap_err().to_string(), "panicked (no message)");
    }
}
