//! Analysis: statistics over measured values. Never touches devices.
pub mod steady;
pub mod compare;
pub mod saturation;
pub mod stats;
