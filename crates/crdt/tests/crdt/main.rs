//! Tests of the CRDT types: property tests against independent specifications, codec tests, and hand-written
//! examples of each type's conflict semantics. One test binary, to keep builds lean.

mod codec;
mod examples;
mod properties;
mod sim;
mod spec;
mod strategies;
