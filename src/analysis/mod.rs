//! Analysis: statistics over measured values. Never touches devices.
pub mod compare;
pub mod saturation;
pub mod stats;
pub mod steady;
