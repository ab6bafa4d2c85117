//! The names of sampled addresses: kernel text from /proc/kallsyms, the process's executable
//! mappings from /proc/PID/maps, and the functions in each mapped ELF file.
use std::collections::HashMap;

/// /proc/kallsyms: text symbols by address.
pub struct KernelSymbols {
    syms: Vec<(u64, String, Option<String>)>,
}

impl KernelSymbols {
    /// Parse kallsyms text. None when addresses are hidden (all zero: kptr_restrict).
    pub fn parse(text: &str) -> Option<KernelSymbols> {
        let mut syms: Vec<(u64, String, Option<String>)> = text
            .lines()
            .filter_map(text_symbol)
            .map(|(addr, name, module)| (addr, name.to_string(), module.map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string())))
            .collect();
        if syms.iter().all(|s| s.0 == 0) {
            return None;
        }
        syms.sort_by_key(|s| s.0);
        Some(KernelSymbols { syms })
    }

    /// The lines of kallsyms `text` that name `ips`: each address's containing function and the
    /// function after it (where it ends), byte for byte and in the file's order, so a recorded
    /// profile names its kernel frames as the whole file did (`IOLAB_PROFILE_DUMP`).
    pub(crate) fn excerpt(text: &str, ips: impl Iterator<Item = u64>) -> String {
        let lines: Vec<&str> = text.lines().collect();
        let mut by_addr: Vec<(u64, usize)> =
            lines.iter().enumerate().filter_map(|(i, l)| Some((text_symbol(l)?.0, i))).filter(|s| s.0 != 0).collect();
        by_addr.sort();
        let mut keep = vec![false; lines.len()];
        for ip in ips.filter(|&ip| is_kernel(ip)) {
            let Some(i) = by_addr.partition_point(|s| s.0 <= ip).checked_sub(1) else { continue };
            by_addr[i..by_addr.len().min(i + 2)].iter().for_each(|s| keep[s.1] = true);
        }
        lines.iter().zip(keep).filter(|x| x.1).map(|(l, _)| format!("{l}\n")).collect()
    }

    /// The function containing `ip` and its module.
    pub fn lookup(&self, ip: u64) -> Option<(&str, Option<&str>)> {
        let i = self.syms.partition_point(|s| s.0 <= ip);
        let s = self.syms.get(i.checked_sub(1)?)?;
        Some((s.1.as_str(), s.2.as_deref()))
    }
}

/// A kallsyms line of a function: its address, name and `[module]`, if any.
fn text_symbol(line: &str) -> Option<(u64, &str, Option<&str>)> {
    let mut it = line.split_whitespace();
    let addr = u64::from_str_radix(it.next()?, 16).ok()?;
    if !matches!(it.next()?, "t" | "T" | "w" | "W") {
        return None;
    }
    Some((addr, it.next()?, it.next()))
}

/// Kernel addresses on x86_64 have the top bit set; user addresses never do.
pub(in crate::meters) fn is_kernel(ip: u64) -> bool {
    ip >= 0xffff_8000_0000_0000
}

/// Our process's executable mappings, and the functions in each mapped file (from its ELF
/// symbol tables, read once when the profile is made).
pub struct UserMaps {
    /// (start, end, file offset, path)
    exe: Vec<(u64, u64, u64, String)>,
    own_binary: Option<String>,
    /// Per path: its symbols and where its segments load.
    functions: HashMap<String, ElfImage>,
}

impl UserMaps {
    pub(crate) fn of_process(pid: u32) -> UserMaps {
        let text = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let own_binary = std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.display().to_string());
        let mut maps = UserMaps::parse(&text, own_binary);
        let paths: Vec<String> = maps.exe.iter().map(|m| m.3.clone()).filter(|p| p.starts_with('/')).collect();
        for p in paths {
            maps.functions.entry(p).or_insert_with_key(|p| std::fs::read(p).map(|data| ElfImage::parse(&data)).unwrap_or_default());
        }
        maps
    }

    pub fn parse(text: &str, own_binary: Option<String>) -> UserMaps {
        let exe = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let (range, perms, offset) = (it.next()?, it.next()?, it.next()?);
                if !perms.contains('x') {
                    return None;
                }
                let path = it.nth(2).unwrap_or("").to_string();
                let (a, z) = range.split_once('-')?;
                Some((u64::from_str_radix(a, 16).ok()?, u64::from_str_radix(z, 16).ok()?, u64::from_str_radix(offset, 16).ok()?, path))
            })
            .collect();
        UserMaps { exe, own_binary, functions: HashMap::new() }
    }

    /// The layer of a user-space address in our process, and its function where the file's
    /// symbols name it (else the file).
    pub fn layer(&self, ip: u64) -> (&'static str, String) {
        let (layer, _, function) = self.frame(ip);
        (layer, function)
    }

    /// A user-space address's layer, mapped file (its name: `iolab`, `libc.so.6`) and function.
    pub fn frame(&self, ip: u64) -> (&'static str, String, String) {
        let Some(m) = self.exe.iter().find(|m| m.0 <= ip && ip < m.1) else {
            return ("user libraries", "(unknown mapping)".into(), "(unknown mapping)".into());
        };
        let file = m.3.rsplit('/').next().unwrap_or(&m.3).to_string();
        let layer = if Some(&m.3) == self.own_binary.as_ref() { "iolab" } else { "user libraries" };
        // The offset in the file, then the address in the ELF image through its load segments.
        let offset = ip - m.0 + m.2;
        let name = self.functions.get(&m.3).and_then(|image| image.function_at_offset(offset));
        let function = name.unwrap_or_else(|| file.clone());
        (layer, file, function)
    }
}

/// What profiling needs of an ELF file: where its segments load, and its functions.
#[derive(Default)]
pub struct ElfImage {
    /// (file offset, size, virtual address) of each loaded segment.
    segments: Vec<(u64, u64, u64)>,
    /// (virtual address, size, demangled name), sorted by address.
    pub(super) functions: Vec<(u64, u64, String)>,
}

impl ElfImage {
    pub fn parse(data: &[u8]) -> ElfImage {
        use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
        let Ok(file) = object::File::parse(data) else { return ElfImage::default() };
        let segments = file.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), format!("{:#}", rustc_demangle::demangle(s.name().ok()?)))))
            .collect();
        functions.sort();
        functions.dedup_by(|a, b| a.0 == b.0);
        ElfImage { segments, functions }
    }

    /// The function containing the byte at `offset` in the file, once loaded.
    pub(crate) fn function_at_offset(&self, offset: u64) -> Option<String> {
        let seg = self.segments.iter().find(|s| s.0 <= offset && offset < s.0 + s.1)?;
        let at = offset - seg.0 + seg.2;
        let i = self.functions.partition_point(|f| f.0 <= at);
        let f = self.functions.get(i.checked_sub(1)?)?;
        (at < f.0 + f.1.max(1)).then(|| f.2.clone())
    }
}
