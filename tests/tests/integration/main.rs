//! The integration tests of the conformance harness, one module per topic, in one test binary:
//! the suite on the CPU, checked-CPU and example backends, the harness's own tests (planted
//! bugs, tolerances, capabilities) and the out-of-tree build. One binary links (and instantiates
//! the generic code the modules share) once instead of once per file.

mod arg_reduce;
mod attention_accuracy;
mod binary;
mod capabilities;
mod cast;
mod checked_training;
mod compare;
mod concat;
mod conformance_checked_cpu;
mod conformance_cpu;
mod conformance_example;
mod constructors;
mod contract;
mod conv;
mod display;
mod errors;
mod harness_self_test;
mod indexing;
mod matmul;
mod out_of_tree;
mod planted_bugs;
mod pool;
mod random;
mod reduce;
mod softmax;
mod statistics;
mod tolerance_truth;
mod unary;
mod views;
mod where_select;
