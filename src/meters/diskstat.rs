//! Block device counters from /sys/block/DEV/stat (or a partition's stat).
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct DiskStat {
    pub read_ios: u64,
    pub read_merges: u64,
    pub read_sectors: u64,
    pub read_ticks_ms: u64,
    pub write_ios: u64,
    pub write_merges: u64,
    pub write_sectors: u64,
    pub write_ticks_ms: u64,
    pub in_flight: u64,
    pub io_ticks_ms: u64,
    pub time_in_queue_ms: u64,
}

pub fn parse(text: &str) -> Option<DiskStat> {
    let v: Vec<u64> = text.split_whitespace().map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 11 {
        return None;
    }
    Some(DiskStat {
        read_ios: v[0],
        read_merges: v[1],
        read_sectors: v[2],
        read_ticks_ms: v[3],
        write_ios: v[4],
        write_merges: v[5],
        write_sectors: v[6],
        write_ticks_ms: v[7],
        in_flight: v[8],
        io_ticks_ms: v[9],
        time_in_queue_ms: v[10],
    })
}

impl DiskStat {
    pub fn minus(&self, e: &DiskStat) -> DiskStat {
        DiskStat {
            read_ios: self.read_ios.wrapping_sub(e.read_ios),
            read_merges: self.read_merges.wrapping_sub(e.read_merges),
            read_sectors: self.read_sectors.wrapping_sub(e.read_sectors),
            read_ticks_ms: self.read_ticks_ms.wrapping_sub(e.read_ticks_ms),
            write_ios: self.write_ios.wrapping_sub(e.write_ios),
            write_merges: self.write_merges.wrapping_sub(e.write_merges),
            write_sectors: self.write_sectors.wrapping_sub(e.write_sectors),
            write_ticks_ms: self.write_ticks_ms.wrapping_sub(e.write_ticks_ms),
            in_flight: self.in_flight,
            io_ticks_ms: self.io_ticks_ms.wrapping_sub(e.io_ticks_ms),
            time_in_queue_ms: self.time_in_queue_ms.wrapping_sub(e.time_in_queue_ms),
        }
    }
}

pub fn sample(stat_path: &std::path::Path) -> Option<DiskStat> {
    parse(&std::fs::read_to_string(stat_path).ok()?)
}
