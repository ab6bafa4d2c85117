//! Meters: what the run cost, sampled around the engine's measured window.
pub mod cpu;
