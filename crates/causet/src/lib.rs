//! The library behind the `causet` command: local clusters of real processes and the benchmark driver, used by the
//! command's subcommands and by the integration tests.

pub mod bench;
pub mod cluster;
