//! Analysis: statistics over measured values. Never touches devices.
pub mod steady;
