//! The completion path read from interrupt counts (`observe_path`), on made-up counts: only lines
//! that the target's own I/O reaches say anything. Zero interrupts from a device that raises none
//! for this I/O (a loop device, whose lines are its backing file's disk's; I/O the page cache
//! served) is "unknown", never "polled"; an NVMe queue that stayed at 0 under polling is polled.
//! Two targets on one controller count its lines once.
use clap::Parser;
use iolab::meters::diskstat::DiskStat;
use iolab::meters::{Cost, DeviceCost};
use iolab::record::{CompletionPath, Path};
use iolab::session::observe_path;

fn job(args: &[&str]) -> iolab::plan::Job {
    let mut v = vec!["iolab", "run"];
    v.extend_from_slice(args);
    match iolab::cli::Cli::try_parse_from(v).unwrap().cmd {
        iolab::cli::Cmd::Run(a) => a.to_job().unwrap(),
        _ => unreachable!(),
    }
}

/// A target with `irqs` interrupts on `ctrl`'s lines (None: no lines) and a device that moved
/// `bytes` (None: no stat).
fn dev(target: &str, device: &str, ctrl: Option<&str>, irqs: Option<u64>, ios: u64, bytes: Option<u64>, behind_loop: bool) -> DeviceCost {
    DeviceCost {
        target: target.into(),
        device: Some(device.into()),
        irq_device: Some(device.into()),
        controller: ctrl.map(Into::into),
        irq_lines: vec![],
        queue_interrupts: irqs,
        queue_interrupts_per_io: None,
        irq_shared_with: vec![],
        irq_behind_loop: behind_loop,
        stat: bytes.map(|b| DiskStat {
            read_ios: 0,
            read_merges: 0,
            read_sectors: b / 512,
            read_ticks_ms: 0,
            write_ios: 0,
            write_merges: 0,
            write_sectors: 0,
            write_ticks_ms: 0,
            in_flight: 0,
            io_ticks_ms: 0,
            time_in_queue_ms: 0,
        }),
        device_ios: None,
        iolab_ios: ios,
        difference: None,
    }
}

fn observe(args: &[&str], devices: Vec<DeviceCost>) -> CompletionPath {
    let j = job(args);
    let cost = Cost {
        window_s: 1.0,
        classes: vec![],
        system: None,
        accounting: None,
        devices,
        interrupts_total: 0,
        interrupts_total_per_io: None,
        counters: None,
        profile: None,
        stages: None,
    };
    let mut p = CompletionPath {
        requested: String::new(),
        mechanism: String::new(),
        expected: Path::Unknown,
        reason: None,
        observed: None,
        evidence: None,
        fell_back: false,
    };
    observe_path(&mut p, &j, &cost);
    p
}

#[test]
fn a_loop_device_over_a_file_is_unknown_not_polled() {
    let lo = |irqs| dev("/dev/loop0", "loop0", Some("virtio1"), Some(irqs), 500, Some(500 * 4096), true);
    for args in [&["-i", "psync"][..], &["-i", "pvsync2", "--complete", "poll"], &["-i", "io_uring", "--complete", "poll"]] {
        for irqs in [0, 3, 700] {
            let p = observe(args, vec![lo(irqs)]);
            assert_eq!(p.observed.map(Path::name), Some("unknown"), "{args:?} {irqs}: {:?}", p.evidence);
            assert!(!p.fell_back);
            assert!(p.evidence.as_deref().unwrap().contains("loop0 completes from the loop driver's worker"), "{:?}", p.evidence);
        }
    }
}

#[test]
fn devices_without_lines_are_unknown() {
    let p = observe(&["-i", "io_uring", "--complete", "poll"], vec![dev("/dev/nullb0", "nullb0", None, None, 500, None, false)]);
    assert_eq!(p.observed.map(Path::name), Some("unknown"));
    // One target without lines makes the whole run unobservable.
    let p = observe(
        &["-i", "io_uring", "--complete", "poll"],
        vec![
            dev("/dev/nvme0n1", "nvme0n1", Some("nvme0"), Some(0), 500, None, false),
            dev("/dev/zram0", "zram0", None, None, 500, None, false),
        ],
    );
    assert_eq!(p.observed.map(Path::name), Some("unknown"), "{:?}", p.evidence);
}

#[test]
fn nvme_queues_show_the_path() {
    let nvme = |irqs, bytes| dev("/dev/nvme0n1", "nvme0n1", Some("nvme0"), Some(irqs), 500, bytes, false);
    let poll = ["-i", "io_uring", "--complete", "poll"];
    // Polled: the queue lines stayed at 0 (or nearly: other traffic).
    for (irqs, bytes) in [(0, None), (0, Some(500 * 4096)), (4, Some(600 * 4096))] {
        let p = observe(&poll, vec![nvme(irqs, bytes)]);
        assert_eq!((p.observed.map(Path::name), p.fell_back), (Some("polled"), false), "{irqs}: {:?}", p.evidence);
    }
    let p = observe(&poll, vec![nvme(480, None)]);
    assert_eq!((p.observed.map(Path::name), p.fell_back), (Some("interrupt"), true), "{:?}", p.evidence);
    let p = observe(&["-i", "pvsync2", "--complete", "poll"], vec![nvme(500, Some(500 * 4096))]);
    assert_eq!((p.observed.map(Path::name), p.fell_back), (Some("interrupt"), true), "{:?}", p.evidence);
    let p = observe(&["-i", "psync"], vec![nvme(500, Some(500 * 4096))]);
    assert_eq!((p.observed.map(Path::name), p.fell_back), (Some("interrupt"), false), "{:?}", p.evidence);
    // Interrupt completion and no interrupt counted: the lines did not see this I/O.
    let p = observe(&["-i", "psync"], vec![nvme(0, None)]);
    assert_eq!(p.observed.map(Path::name), Some("unknown"), "{:?}", p.evidence);
    // The page cache served the I/O: the device moved almost nothing.
    let p = observe(&poll, vec![nvme(0, Some(8 * 4096))]);
    assert_eq!((p.observed.map(Path::name), p.fell_back), (Some("unknown"), false), "{:?}", p.evidence);
    assert!(p.evidence.unwrap().contains("did not reach it"));
}

#[test]
fn shared_lines_are_counted_once() {
    let a = dev("/data/a", "vda", Some("virtio1"), Some(500), 250, None, false);
    let b = dev("/data/b", "vda", Some("virtio1"), Some(500), 250, None, false);
    let p = observe(&["-i", "psync"], vec![a, b]);
    assert_eq!(p.evidence.as_deref(), Some("500 virtio1 queue interrupts for 500 I/Os"), "{:?}", p.evidence);
}
