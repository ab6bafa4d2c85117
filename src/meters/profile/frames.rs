//! Where one frame of a sample ran (its layer, module or mapped file, and function), where a
//! sample's self time belongs, and which samples are the run's own: what attribution and the
//! flame graph both name frames by.
use super::layers::{kernel_layer, LOCKS};
use super::symbols::{is_kernel, KernelSymbols, UserMaps};
use std::collections::HashMap;

/// Where a sample's self time belongs in its chain: the innermost frame, or, in a lock, the
/// lock's caller.
pub(in crate::meters) fn self_frame(chain: &[u64], syms: &KernelSymbols) -> usize {
    let in_lock = |ip: u64| is_kernel(ip) && syms.lookup(ip).is_some_and(|(f, _)| LOCKS.iter().any(|l| f.starts_with(l)));
    chain.iter().position(|&ip| !in_lock(ip)).unwrap_or(0)
}

/// Another process, named as `ps` would: its command name where it still runs.
fn process_name(pid: u32) -> String {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => format!("{} (pid {pid})", comm.trim()),
        Err(_) => format!("pid {pid}"),
    }
}

/// Whether a sample is the run's own (`run`, the flame graph): one of iolab's threads, or
/// interrupt work on an idle CPU (the idle task whose self layer is not the idle loop).
pub(in crate::meters) fn is_the_runs(pid: u32, own_pid: u32, self_layer: &str) -> bool {
    pid == own_pid || (pid == 0 && self_layer != "idle")
}

/// Where one frame of a sample ran: its layer, module (or mapped file) and function. `names`
/// keeps other processes' names, each read from /proc once, not once per frame.
pub(in crate::meters) fn frame(
    ip: u64,
    pid: u32,
    syms: &KernelSymbols,
    maps: &UserMaps,
    own_pid: u32,
    names: &mut HashMap<u32, String>,
) -> (&'static str, String, String) {
    if is_kernel(ip) {
        match syms.lookup(ip) {
            Some((f, m)) => (kernel_layer(f, m), m.unwrap_or("vmlinux").to_string(), f.to_string()),
            None => ("rest of kernel", "vmlinux".into(), format!("{ip:#x}")),
        }
    } else if pid == own_pid {
        maps.frame(ip)
    } else if pid == 0 {
        ("idle", String::new(), "swapper".into())
    } else {
        ("other processes (user)", String::new(), names.entry(pid).or_insert_with(|| process_name(pid)).clone())
    }
}
