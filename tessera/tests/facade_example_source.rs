//! The out-of-tree `facade-example` crate's library, compiled as a module of this test so that
//! the workspace's `cargo clippy --all-targets` lints it (`out_of_tree.rs` builds and runs the
//! crate itself, from outside the workspace). Its functions are called by that crate's binary
//! and test, not here.

#[allow(dead_code)]
#[path = "../../facade-example/src/lib.rs"]
mod facade_example;
