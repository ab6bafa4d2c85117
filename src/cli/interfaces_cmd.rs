//! `iolab interfaces`: the design-choice table, with availability on this machine.
use crate::interfaces::{Behaviour, InterfaceKind};
use crate::plan::Submit;

pub fn main() -> i32 {
    println!("{:<13} {:<9} {:<9} {:<16} {:<16} {:<10} how", "interface", "execution", "behaviour", "submission", "completion", "available");
    for &kind in InterfaceKind::ALL {
        let (i, rules) = (kind.info(), kind.rules());
        let subs: Vec<&str> = i.submits.iter().map(|s| if *s == Submit::Sqpoll { "sqpoll" } else { "syscall" }).collect();
        let comps: Vec<&str> = i.completes.iter().map(|c| c.name()).collect();
        let avail = match (rules.machine_support)() {
            Ok(()) => match (rules.machine_notes)() {
                Some(n) => format!("yes ({n})"),
                None => "yes".to_string(),
            },
            Err(e) => format!("no: {e}"),
        };
        let beh = if i.behaviour == Behaviour::Sync { "sync" } else { "async" };
        println!("{:<13} {:<9} {:<9} {:<16} {:<16} {:<10} {}", i.name, i.execution, beh, subs.join(","), comps.join(","), avail, i.how);
    }
    let missing: Vec<String> = InterfaceKind::ALL
        .iter()
        .flat_map(|k| (k.rules().kernel_features)().into_iter().map(move |f| (k, f)))
        .filter(|(_, f)| f.present == Some(false))
        .map(|(k, f)| {
            format!("  {k}: {} (Linux {}{}): {}", f.name, f.since, f.until.map(|u| format!(" to {u}")).unwrap_or_default(), f.without)
        })
        .collect();
    if !missing.is_empty() {
        println!("\nThis kernel ({}) lacks, and iolab does without:", crate::host::kernel_release());
        missing.iter().for_each(|m| println!("{m}"));
    }
    println!("\nModes a target's queue cannot do (e.g. polling without poll queues) show in `iolab probe TARGET`, with every kernel feature iolab uses.");
    0
}
