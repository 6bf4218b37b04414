//! The library behind the `causet` command: local clusters of real processes, used by the command's subcommands
//! and by the integration tests.

pub mod check;
pub mod cluster;
