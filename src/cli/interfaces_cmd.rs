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
    println!("\nModes a target's queue cannot do (e.g. polling without poll queues) show in `iolab probe TARGET`.");
    0
}
