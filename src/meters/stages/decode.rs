//! The tracepoints' ring records, decoded: which tracepoints this kernel has (their ids and
//! field layouts from tracefs), and each record as an [`Event`].
use super::{Event, Kind, TRACEPOINTS};
use crate::meters::ring::records;
use crate::meters::tracefs::{self, Format};
use perf_event_open_sys::bindings as b;
use std::collections::HashMap;
use std::path::Path;

/// The tracepoints found on this kernel, by id, with their formats.
pub struct Decoder {
    pub(super) by_id: HashMap<u64, (Kind, Format)>,
    /// "system:event" of each one found, and of each missing (with the names tried).
    pub found: Vec<String>,
    pub missing: Vec<String>,
}

impl Decoder {
    /// Read every tracepoint's format under a tracefs root (the real one, or a fixture).
    pub fn load(root: &Path) -> Decoder {
        let mut d = Decoder { by_id: HashMap::new(), found: Vec::new(), missing: Vec::new() };
        for &(kind, system, names) in TRACEPOINTS {
            match names.iter().find_map(|n| tracefs::read_format(root, system, n).ok().map(|f| (n, f))) {
                Some((name, f)) => {
                    d.found.push(format!("{system}:{name}"));
                    d.by_id.insert(f.id, (kind, f));
                }
                None => d.missing.push(format!("{system}:{}", names.join("|"))),
            }
        }
        d
    }

    /// Decode a ring's records (sample_type TID | TIME | CPU | RAW): header, pid, tid, time,
    /// cpu, reserved, raw size, raw record; and the lost count.
    pub fn decode(&self, data: &[u8], out: &mut Vec<Event>, lost: &mut u64) {
        let u32_at = |d: &[u8], o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().unwrap());
        let u64_at = |d: &[u8], o: usize| u64::from_ne_bytes(d[o..o + 8].try_into().unwrap());
        for (kind, rec) in records(data) {
            if kind == b::PERF_RECORD_LOST && rec.len() >= 24 {
                *lost += u64_at(rec, 16);
                continue;
            }
            if kind != b::PERF_RECORD_SAMPLE || rec.len() < 38 {
                continue;
            }
            let size = u32_at(rec, 32) as usize;
            let Some(raw) = rec.get(36..36 + size) else { continue };
            let id = u16::from_ne_bytes([raw[0], raw[1]]) as u64;
            let Some((k, f)) = self.by_id.get(&id) else { continue };
            let field = |n: &str| f.read(raw, n).unwrap_or(0);
            let (a, b) = match k {
                Kind::SysEnter | Kind::SysExit => (field("id"), 0),
                Kind::UringSubmit | Kind::UringComplete => (field("ctx"), field("user_data")),
                Kind::NvmeSetup | Kind::NvmeComplete => (field("ctrl_id") << 32 | field("qid"), field("cid")),
                Kind::IrqEntry => (field("irq"), 0),
                // The part split off keeps `sector`; the rest goes on at `new_sector`. A bio holds
                // under 2^32 sectors (its size is a u32 of bytes), so the difference fits beside dev_t.
                Kind::BlockSplit => (field("dev") | field("new_sector").wrapping_sub(field("sector")) << 32, field("sector")),
                Kind::BioComplete => (field("dev") | field("error") << 32, field("sector")),
                _ => (field("dev"), field("sector")),
            };
            out.push(Event {
                time: u64_at(rec, 16),
                a,
                b,
                pid: u32_at(rec, 8),
                tid: u32_at(rec, 12),
                cpu: u32_at(rec, 24) as u16,
                kind: *k,
                flags: field("common_flags") as u8,
            });
        }
    }
}
