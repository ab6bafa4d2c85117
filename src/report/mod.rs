//! Reports: what people read. For now the terminal summary of one run.
pub mod summary;
