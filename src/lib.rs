//! iolab: a laboratory for the Linux storage I/O stack.
//! Layers follow the data: plan → engine (with interfaces) → meters → record → report; studies
//! (one file per paper) sit above plan, analysis and report and pair each plan with its panels.
pub mod analysis;
pub mod cli;
pub mod device;
pub mod energy;
pub mod engine;
pub mod failure;
pub mod host;
pub mod interfaces;
pub mod meters;
pub mod output;
pub mod plan;
pub mod record;
pub mod report;
pub mod rng;
pub mod session;
pub mod settings;
pub mod store;
pub mod studies;
pub mod verify;
