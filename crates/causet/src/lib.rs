//! The library behind the `causet` command: local clusters of real processes, the benchmark driver and the checker
//! under faults, used by the command's subcommands and by the integration tests.

pub mod backup;
pub mod bench;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod middleware;
pub mod wan_matrix;
