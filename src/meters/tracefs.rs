//! tracefs, where tracepoints describe themselves: each event's `format` file gives its id (for
//! `perf_event_open`'s PERF_TYPE_TRACEPOINT) and its raw record's fields by name, offset and
//! size. Fields are read by name, so nothing depends on one kernel's layout.
use super::MetersError;
use std::path::{Path, PathBuf};

/// One tracepoint's format: its id and its fields.
#[derive(Clone, Debug, PartialEq)]
pub struct Format {
    pub id: u64,
    /// (name, offset, size) in the raw record.
    fields: Vec<(String, usize, usize)>,
}

impl Format {
    /// Parse a `format` file. None when it has no ID line.
    pub fn parse(text: &str) -> Option<Format> {
        let mut id = None;
        let mut fields = Vec::new();
        for line in text.lines().map(str::trim) {
            if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse().ok();
            }
            let Some(decl) = line.strip_prefix("field:") else { continue };
            // "field:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;"
            let mut parts = decl.split(';').map(str::trim);
            let declaration = parts.next()?;
            let number = |key: &str, part: Option<&str>| part?.strip_prefix(key)?.parse::<usize>().ok();
            let (Some(offset), Some(size)) = (number("offset:", parts.next()), number("size:", parts.next())) else { continue };
            // The name is the declaration's last word, without an array's brackets.
            let name = declaration.rsplit(' ').next().unwrap_or("").split('[').next().unwrap_or("");
            fields.push((name.to_string(), offset, size));
        }
        Some(Format { id: id?, fields })
    }

    pub fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|f| f.0 == name)
    }

    /// An unsigned field of 1, 2, 4 or 8 bytes from a raw record (None when the record is short
    /// or the kernel's format has no such field).
    pub fn read(&self, raw: &[u8], name: &str) -> Option<u64> {
        let &(_, at, size) = self.fields.iter().find(|f| f.0 == name)?;
        let b = raw.get(at..at + size)?;
        Some(match size {
            1 => b[0] as u64,
            2 => u16::from_ne_bytes(b.try_into().ok()?) as u64,
            4 => u32::from_ne_bytes(b.try_into().ok()?) as u64,
            8 => u64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// The path of an event's format file under a tracefs root.
pub(crate) fn format_path(root: &Path, system: &str, event: &str) -> PathBuf {
    root.join("events").join(system).join(event).join("format")
}

/// Read an event's format; Err when this kernel (or its loaded modules) has no such event.
pub(crate) fn read_format(root: &Path, system: &str, event: &str) -> Result<Format, MetersError> {
    let path = format_path(root, system, event);
    let text = std::fs::read_to_string(&path).map_err(|e| MetersError::Unavailable(format!("{system}:{event}: {e}")))?;
    Format::parse(&text).ok_or_else(|| MetersError::Unavailable(format!("{} has no ID line", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIO_QUEUE: &str = "name: block_bio_queue\nID: 2097\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:char rwbs[10];\toffset:28;\tsize:10;\tsigned:0;\n\n\
        print fmt: \"%d,%d %s %llu\", ...\n";

    #[test]
    fn a_format_file_gives_the_id_and_each_field_by_name() {
        let f = Format::parse(BIO_QUEUE).unwrap();
        assert_eq!(f.id, 2097);
        assert!(f.has("rwbs") && f.has("common_flags") && !f.has("cmd"));
        let mut raw = vec![0u8; 40];
        raw[0..2].copy_from_slice(&2097u16.to_ne_bytes());
        raw[2] = 0x08;
        raw[8..12].copy_from_slice(&((253u32 << 20) | 1).to_ne_bytes());
        raw[16..24].copy_from_slice(&123456u64.to_ne_bytes());
        assert_eq!(f.read(&raw, "common_type"), Some(2097));
        assert_eq!(f.read(&raw, "common_flags"), Some(0x08));
        assert_eq!(f.read(&raw, "dev"), Some((253 << 20) | 1));
        assert_eq!(f.read(&raw, "sector"), Some(123456));
        assert_eq!(f.read(&raw[..20], "sector"), None, "a short record");
        assert_eq!(f.read(&raw, "nr_sector"), None, "a field this format lacks");
        assert!(Format::parse("name: x\nformat:\n").is_none());
    }
}
