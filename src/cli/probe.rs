//! `iolab probe [TARGET]`: run a short read-only job for every interface and mode and say what
//! works here, and why not for what doesn't (`session::probe`). Nothing is written to the target.
use crate::session::probe::{probe, ProbeRow};
use std::path::PathBuf;

pub fn main(target: Option<&PathBuf>, vfio_noiommu: bool) -> i32 {
    let temp = match target {
        Some(_) => None,
        None => match crate::device::create_default_target(16 << 20, crate::engine::interrupt()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("iolab: {e}");
                return crate::failure::Kinded::kind(&e).code();
            }
        },
    };
    let path = target.cloned().unwrap_or_else(|| temp.as_ref().unwrap().path.clone());
    if !path.exists() {
        eprintln!("iolab: target {} does not exist: give an existing file or block device", path.display());
        return 2;
    }
    // Probing only reads, but a kernel interface (/proc/self/mem, a sysfs attribute) is no
    // storage to read from either: the target rules `run` applies.
    if let Err(e) = crate::device::check_safe(&path, false, &[]) {
        eprintln!("iolab: {e}");
        return crate::failure::Kinded::kind(&e).code();
    }
    println!("probing {} (read-only, 256 random 4 KiB reads per mode)", path.display());
    println!("{:<13} {:<8} {:<7} {:<6} detail", "interface", "submit", "complete", "works");
    probe(&path.display().to_string(), vfio_noiommu, &mut |r: ProbeRow| {
        let works = if r.works { "yes" } else { "no" };
        println!("{:<13} {:<8} {:<7} {:<6} {}", r.interface, r.submit.name(), r.complete.name(), works, r.detail);
    });
    println!(
        "\nkernel features iolab uses (Linux {}): found by asking the kernel, not by its version, except where noted",
        crate::host::kernel_release()
    );
    let features: Vec<_> = crate::interfaces::InterfaceKind::ALL
        .iter()
        .flat_map(|&kind| (kind.rules().kernel_features)().into_iter().map(move |f| (kind, f)))
        .collect();
    let width = features.iter().map(|(_, f)| f.name.chars().count()).max().unwrap_or(7);
    println!("{:<13} {:<width$} {:<10} {:<4} without it", "interface", "feature", "Linux", "here");
    for (kind, f) in features {
        let here = match f.present {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        let linux = match f.until {
            Some(u) => format!("{}..{}", f.since, u.split(' ').next().unwrap_or(u)),
            None => format!("{}+", f.since),
        };
        println!("{:<13} {:<width$} {:<10} {:<4} {} (found by {})", kind.name(), f.name, linux, here, f.without, f.detected_by);
    }
    println!("\nenergy sources");
    for e in crate::energy::probe(&crate::energy::EnergyConfig::default()) {
        let scopes = if e.scopes.is_empty() { String::new() } else { format!(" [{}]", e.scopes.join(", ")) };
        println!("{:<10} {:<6} {}{scopes}", e.backend, if e.available { "yes" } else { "no" }, e.detail);
    }
    0
}
