//! Code shared by the tests and the MPI test program.

pub mod problem;
