//! The record's `fileset` part: what a file-set run (`engine::fileset`) made and measured, its
//! creation apart from its measured phase, with each file's latency (open to close).
use super::{encode_histogram, latency, LatencyNs};
use crate::engine::fileset::FilePhase;
use serde::Serialize;

/// One phase over the set's files.
#[derive(Serialize)]
pub struct FilePhaseRecord {
    /// Files done whole in the phase (a file whose I/O failed is not counted).
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub files_per_s: f64,
    /// Each file's latency: open to close (with its fsync where asked), in ns; null when no
    /// file was done.
    pub file_lat_ns: Option<LatencyNs>,
    /// The per-file latency histogram, HdrHistogram V2 deflate format in base64.
    pub file_lat_histogram: Option<String>,
}

impl FilePhaseRecord {
    pub(crate) fn of(p: &FilePhase) -> FilePhaseRecord {
        FilePhaseRecord {
            files: p.files.ios,
            bytes: p.files.bytes,
            seconds: p.seconds,
            files_per_s: if p.seconds > 0.0 { p.files.ios as f64 / p.seconds } else { 0.0 },
            file_lat_ns: latency(&p.files),
            file_lat_histogram: encode_histogram(&p.files.lat),
        }
    }
}

/// A file-set run: the set as made, its creation (measured apart: not in `results`) and the
/// measured phase's files (its I/Os are the run's `results`).
#[derive(Serialize)]
pub struct FileSetRecord {
    /// The directory iolab made for the set (removed with its files after the run).
    pub dir: String,
    /// Files in the set and their bytes, as drawn from the seed.
    pub files: u64,
    pub bytes: u64,
    /// How sizes were drawn.
    pub sizes_drawn: String,
    pub create: FilePhaseRecord,
    pub measured: FilePhaseRecord,
    /// fsync calls (`--fsync each`: one per file written) or syncfs (`--fsync end`: one) made in
    /// the measured phase.
    pub fsyncs: u64,
    /// A served run's (S4.7): the NBD server's cost over the measured phase
    /// (`meters::server`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<crate::meters::server::ServerWindow>,
}
