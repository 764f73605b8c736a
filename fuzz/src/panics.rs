//! Panic messages with their location: a quiet panic hook that remembers where the last panic
//! happened (the default hook would print every expected-to-be-caught panic), and the text of
//! a caught payload.

use std::any::Any;
use std::sync::Mutex;

/// Where the last panic happened, `file:line:column`.
static LAST_LOCATION: Mutex<Option<String>> = Mutex::new(None);

/// Replaces the panic hook by one that records the location, and the first frames of the
/// backtrace that are in Tessera's own code, and prints nothing.
pub fn install_quiet_hook() {
    std::panic::set_hook(Box::new(|info| {
        let mut location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let trace = std::backtrace::Backtrace::force_capture().to_string();
        let ours: Vec<&str> = trace
            .lines()
            .map(str::trim)
            // Frames in the workspace's own crates have relative paths (`at nn/src/..`).
            .filter(|l| l.starts_with("at ") && !l.starts_with("at /") && !l.starts_with("at ./"))
            .filter(|l| !l.contains("fuzz/src/"))
            .take(3)
            .collect();
        if !ours.is_empty() {
            location = format!("{location}, {}", ours.join(", "));
        }
        if let Ok(mut last) = LAST_LOCATION.lock() {
            *last = Some(location);
        }
    }));
}

/// The message of a caught panic payload and, when the quiet hook is installed, where it was
/// raised.
pub fn describe(payload: Box<dyn Any + Send>) -> String {
    let msg = if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    };
    let location = LAST_LOCATION.lock().ok().and_then(|mut l| l.take());
    match location {
        Some(at) => format!("{msg} (at {at})"),
        None => msg,
    }
}
