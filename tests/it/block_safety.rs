//! Write safety on real block devices (loop devices over temporary files): iolab refuses to
//! write to a device holding a filesystem, a mounted one, one with a partition table, or a blank
//! one without `--destructive` naming that exact device, and leaves every byte as it was; it
//! writes when `--destructive` names the device. Also O_DIRECT alignment on a 4096-byte-sector
//! device and polling on a queue that cannot poll.
//!
//! Needs root and losetup; skips (with the reason on stderr) otherwise. The tests take a lock
//! so only one of them sets up loop devices at a time.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::MutexGuard;

use crate::common::LOOPS;

fn lock() -> MutexGuard<'static, ()> {
    LOOPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why loop-device tests cannot run here, if they cannot.
fn cannot_use_loops() -> Option<String> {
    if !is_root() {
        return Some("needs root".into());
    }
    match Command::new("losetup").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => return Some("losetup is not available".into()),
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control (loop driver missing)".into());
    }
    None
}

macro_rules! needs_loops {
    ($name:expr) => {
        if let Some(why) = cannot_use_loops() {
            skip($name, &why);
            return;
        }
    };
}

/// An attached loop device, detached on drop.
struct Loop {
    dev: String,
    backing: PathBuf,
}

impl Loop {
    /// Attach `backing`; `extra` are losetup options such as `-P` or `--sector-size 4096`.
    fn attach(backing: &Path, extra: &[&str]) -> Result<Loop, String> {
        let out = Command::new("losetup").args(extra).args(["-f", "--show"]).arg(backing).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("losetup {extra:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        Ok(Loop { dev, backing: backing.to_path_buf() })
    }
    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
    fn partition_exists(&self, n: u32) -> bool {
        Path::new(&format!("{}p{n}", self.dev)).exists() && Path::new(&format!("/sys/block/{}/{}p{n}", self.name(), self.name())).exists()
    }
    /// Partition 1 (from `start`, `len` bytes) as the kernel found it in the table; where the
    /// kernel has no parser for the table (CONFIG_MSDOS_PARTITION / CONFIG_EFI_PARTITION unset),
    /// added by hand with BLKPG as partx would. Err when neither works.
    fn partition_1(&self, start: u64, len: u64) -> Result<String, String> {
        let wait = |tries: u32| {
            (0..tries).any(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                self.partition_exists(1)
            })
        };
        if !wait(20) {
            #[repr(C)]
            struct BlkpgPartition {
                start: i64,
                length: i64,
                pno: i32,
                devname: [u8; 64],
                volname: [u8; 64],
            }
            #[repr(C)]
            struct BlkpgIoctlArg {
                op: i32,
                flags: i32,
                datalen: i32,
                data: *mut libc::c_void,
            }
            const BLKPG: libc::c_ulong = 0x1269;
            const BLKPG_ADD_PARTITION: i32 = 1;
            let mut part = BlkpgPartition { start: start as i64, length: len as i64, pno: 1, devname: [0; 64], volname: [0; 64] };
            let mut arg = BlkpgIoctlArg {
                op: BLKPG_ADD_PARTITION,
                flags: 0,
                datalen: std::mem::size_of::<BlkpgPartition>() as i32,
                data: &mut part as *mut _ as *mut libc::c_void,
            };
            let f = std::fs::File::open(&self.dev).map_err(|e| e.to_string())?;
            // SAFETY: BLKPG reads a blkpg_ioctl_arg pointing at a blkpg_partition, both alive here.
            let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&f), BLKPG, &mut arg) };
            if rc != 0 {
                return Err(format!(
                    "the kernel did not scan the table and BLKPG_ADD_PARTITION failed: {}",
                    std::io::Error::last_os_error()
                ));
            }
            if !wait(300) {
                return Err(format!("{}p1 did not appear", self.dev));
            }
        }
        Ok(format!("{}p1", self.dev))
    }
    /// The whole device's bytes, as seen through the backing file and through the device.
    fn contents(&self) -> (Vec<u8>, Vec<u8>) {
        (std::fs::read(&self.backing).unwrap(), std::fs::read(&self.dev).unwrap())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A mount, unmounted on drop (declare it after the Loop so it goes first).
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn backing_file(dir: &Path, name: &str, size: u64) -> PathBuf {
    zero_file(dir, name, size)
}

/// `iolab run ARGS` (with a JSON record in `dir`), expecting a refusal: exit 2, one line,
/// naming the device and --destructive, nothing written anywhere.
fn assert_refused(dir: &Path, lp: &Loop, target: &str, args: &[&str]) -> String {
    let before = lp.contents();
    let json = dir.join("refused.json");
    let mut a = vec!["run", "-q", "--json", json.to_str().unwrap()];
    a.extend(args);
    a.push(target);
    let r = iolab_in(dir, &a);
    let line = r.assert_usage_error();
    assert!(line.contains(target), "should name {target}: {line}");
    assert!(line.contains("--destructive"), "should mention --destructive: {line}");
    assert!(!json.exists());
    let after = lp.contents();
    assert!(after.0 == before.0, "backing file of {} changed after a refused run:\n{}", lp.dev, r.describe());
    assert!(after.1 == before.1, "{} changed after a refused run:\n{}", lp.dev, r.describe());
    line
}

/// `iolab run ARGS`, expecting success; returns the record.
fn assert_runs(dir: &Path, target: &str, args: &[&str]) -> serde_json::Value {
    let json = dir.join("ok.json");
    let _ = std::fs::remove_file(&json);
    let mut a = vec!["run", "-q", "--json", json.to_str().unwrap()];
    a.extend(args);
    a.push(target);
    let r = iolab_in(dir, &a);
    r.assert_ok();
    let rec = record(&json);
    assert_clean(&rec, &r.describe());
    rec
}

const WRITE: &[&str] = &["--rw", "randwrite", "--ios", "64"];

#[test]
fn blank_device_needs_consent_naming_it() {
    needs_loops!("blank_device_needs_consent_naming_it");
    let _g = lock();
    let dir = tempdir();
    let lp = Loop::attach(&backing_file(dir.path(), "blank.img", 16 << 20), &[]).unwrap();
    let other = Loop::attach(&backing_file(dir.path(), "other.img", 1 << 20), &[]).unwrap();
    let dev = lp.dev.as_str();

    let l = assert_refused(dir.path(), &lp, dev, WRITE);
    assert!(l.contains("without consent") && l.contains(&format!("--destructive {dev}")), "{l}");
    for rw in ["write", "randrw"] {
        assert_refused(dir.path(), &lp, dev, &["--rw", rw, "--ios", "8"]);
    }
    // Consent for another device, or for a file, is no consent for this one.
    assert_refused(dir.path(), &lp, dev, &[WRITE, &["--destructive", &other.dev]].concat());
    assert_refused(dir.path(), &lp, dev, &[WRITE, &["--destructive", lp.backing.to_str().unwrap()]].concat());
    assert_refused(dir.path(), &lp, dev, &[WRITE, &["--destructive", "/dev/nonexistent"]].concat());
    // Reading needs no consent.
    let before = lp.contents();
    let rec = assert_runs(dir.path(), dev, &["--rw", "randread", "--ios", "64"]);
    assert_eq!(u(&rec, "/results/read/ios"), 64);
    assert!(lp.contents() == before);

    // Named: the whole device is written and read back with --verify.
    let rec = assert_runs(dir.path(), dev, &["--rw", "write", "--bs", "1m", "--verify", "--bytes", "16m", "--destructive", dev]);
    assert_eq!(u(&rec, "/results/write/ios"), 16);
    assert_eq!(u(&rec, "/results/verify/written_blocks_read_back"), 16);
    assert!(lp.contents().0 != before.0, "nothing was written");
    for i in ["psync", "libaio", "io_uring"] {
        let rec = assert_runs(dir.path(), dev, &["-i", i, "--rw", "randrw", "--verify", "--ios", "200", "--destructive", dev]);
        assert_eq!(u(&rec, "/results/total/ios"), 200);
        assert_eq!(u(&rec, "/results/verify/reads_checked"), u(&rec, "/results/read/ios"));
    }
    let rec = assert_runs(dir.path(), dev, &["--rw", "read", "--bs", "1m", "--verify", "--bytes", "16m"]);
    assert_eq!(u(&rec, "/results/verify/reads_checked"), 16);
    // Named through another path to the same device (a symlink): still that exact device.
    let link = dir.path().join("disk-link");
    std::os::unix::fs::symlink(dev, &link).unwrap();
    assert_runs(dir.path(), dev, &[WRITE, &["--destructive", link.to_str().unwrap()]].concat());
    // The untouched other device is still all zeros.
    assert!(other.contents().0.iter().all(|b| *b == 0));
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("-V").output().is_ok()
}

fn mkfs_ext4(img: &Path) {
    let out = Command::new("mkfs.ext4").args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]).arg(img).output().unwrap();
    assert!(out.status.success(), "mkfs.ext4: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn filesystem_signature_is_refused() {
    needs_loops!("filesystem_signature_is_refused");
    if !have("mkfs.ext4") {
        skip("filesystem_signature_is_refused", "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let img = backing_file(dir.path(), "ext4.img", 16 << 20);
    mkfs_ext4(&img);
    let lp = Loop::attach(&img, &[]).unwrap();
    let dev = lp.dev.as_str();
    let l = assert_refused(dir.path(), &lp, dev, WRITE);
    assert!(l.contains("ext2/3/4 filesystem"), "should name the filesystem: {l}");
    assert!(l.contains(&format!("--destructive {dev}")), "{l}");
    assert_refused(dir.path(), &lp, dev, &[WRITE, &["-i", "io_uring", "--qd", "8"]].concat());
    // Reading is harmless.
    assert_runs(dir.path(), dev, &["--rw", "randread", "--ios", "32"]);
    // Consent destroys it.
    assert_runs(dir.path(), dev, &["--rw", "write", "--bs", "64k", "--ios", "32", "--destructive", dev]);
    let head = &lp.contents().1[..4096];
    assert!(head[1080..1082] != [0x53, 0xEF], "the ext4 superblock survived a write over it");
}

/// A 16 MiB ext4 image in `dir`, on a loop device, mounted read-only (so the file system itself
/// writes nothing while bytes are compared); unmounted, then detached, on drop.
struct MountedExt4 {
    mount: Option<Mount>,
    lp: Loop,
    img: PathBuf,
    mnt: PathBuf,
}

impl MountedExt4 {
    /// None (the test skipped) where ext4 cannot be mounted.
    fn new(test: &str, dir: &Path, name: &str) -> Option<MountedExt4> {
        let img = backing_file(dir, name, 16 << 20);
        mkfs_ext4(&img);
        let lp = Loop::attach(&img, &[]).unwrap();
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let st = Command::new("mount").args(["-o", "ro", &lp.dev]).arg(&mnt).output().unwrap();
        if !st.status.success() {
            skip(test, &format!("cannot mount ext4 here: {}", String::from_utf8_lossy(&st.stderr).trim()));
            return None;
        }
        Some(MountedExt4 { mount: Some(Mount(mnt.clone())), lp, img, mnt })
    }
}

#[test]
fn mounted_device_is_refused_even_with_consent() {
    needs_loops!("mounted_device_is_refused_even_with_consent");
    if !have("mkfs.ext4") {
        skip("mounted_device_is_refused_even_with_consent", "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let Some(m) = MountedExt4::new("mounted_device_is_refused_even_with_consent", dir.path(), "mnt.img") else { return };
    let (lp, mnt) = (&m.lp, &m.mnt);
    let dev = lp.dev.as_str();
    let l = assert_refused(dir.path(), lp, dev, WRITE);
    assert!(l.contains(&format!("mounted on {}", mnt.display())), "should say where it is mounted: {l}");
    let l = assert_refused(dir.path(), lp, dev, &[WRITE, &["--destructive", dev]].concat());
    assert!(l.contains("mounted on") && l.contains("does not override"), "{l}");
}

/// An MBR with one Linux partition from 1 MiB, 4 MiB long.
fn write_mbr(img: &Path) {
    use std::io::{Seek, SeekFrom, Write};
    let mut s = [0u8; 512];
    s[440..444].copy_from_slice(&0x1234_5678u32.to_le_bytes()); // disk signature
    let e = &mut s[446..462];
    e[0] = 0x00; // not bootable
    e[1..4].copy_from_slice(&[0xfe, 0xff, 0xff]); // CHS: use LBA
    e[4] = 0x83; // Linux
    e[5..8].copy_from_slice(&[0xfe, 0xff, 0xff]);
    e[8..12].copy_from_slice(&2048u32.to_le_bytes());
    e[12..16].copy_from_slice(&8192u32.to_le_bytes());
    s[510] = 0x55;
    s[511] = 0xAA;
    let mut f = std::fs::OpenOptions::new().write(true).open(img).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(&s).unwrap();
    f.sync_all().unwrap();
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A GPT (protective MBR, primary and backup headers and entry arrays) with one Linux
/// partition from 1 MiB, 4 MiB long, on a device of 512-byte sectors.
fn write_gpt(img: &Path) {
    let size = std::fs::metadata(img).unwrap().len();
    let lbas = size / 512;
    let mut d = std::fs::read(img).unwrap();
    // Protective MBR.
    let e = &mut d[446..462];
    e[1..4].copy_from_slice(&[0x00, 0x02, 0x00]);
    e[4] = 0xEE;
    e[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
    e[8..12].copy_from_slice(&1u32.to_le_bytes());
    e[12..16].copy_from_slice(&((lbas - 1).min(0xFFFF_FFFF) as u32).to_le_bytes());
    d[510] = 0x55;
    d[511] = 0xAA;
    // Partition entries: 128 of 128 bytes.
    let mut entries = vec![0u8; 128 * 128];
    // Linux filesystem data 0FC63DAF-8483-4772-8E79-3D69D8477DE4, mixed-endian.
    entries[0..16].copy_from_slice(&[0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47, 0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4]);
    entries[16..32].copy_from_slice(&[0x11; 16]); // partition GUID
    entries[32..40].copy_from_slice(&2048u64.to_le_bytes());
    entries[40..48].copy_from_slice(&(2048u64 + 8192 - 1).to_le_bytes());
    for (i, c) in "iolab".encode_utf16().enumerate() {
        entries[56 + 2 * i..58 + 2 * i].copy_from_slice(&c.to_le_bytes());
    }
    let entries_crc = crc32(&entries);
    let header = |current: u64, backup: u64, entries_lba: u64| {
        let mut h = vec![0u8; 92];
        h[0..8].copy_from_slice(b"EFI PART");
        h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&current.to_le_bytes());
        h[32..40].copy_from_slice(&backup.to_le_bytes());
        h[40..48].copy_from_slice(&34u64.to_le_bytes());
        h[48..56].copy_from_slice(&(lbas - 34).to_le_bytes());
        h[56..72].copy_from_slice(&[0x22; 16]); // disk GUID
        h[72..80].copy_from_slice(&entries_lba.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&entries_crc.to_le_bytes());
        let c = crc32(&h);
        h[16..20].copy_from_slice(&c.to_le_bytes());
        h
    };
    let put = |d: &mut Vec<u8>, lba: u64, b: &[u8]| d[(lba * 512) as usize..(lba * 512) as usize + b.len()].copy_from_slice(b);
    put(&mut d, 1, &header(1, lbas - 1, 2));
    put(&mut d, 2, &entries);
    put(&mut d, lbas - 33, &entries);
    put(&mut d, lbas - 1, &header(lbas - 1, 1, lbas - 33));
    std::fs::write(img, &d).unwrap();
}

fn partition_table_case(test: &str, write_table: fn(&Path), table_word: &str) {
    needs_loops!(test);
    let _g = lock();
    let dir = tempdir();
    let img = backing_file(dir.path(), "parts.img", 16 << 20);
    write_table(&img);
    let lp = match Loop::attach(&img, &["-P"]) {
        Ok(l) => l,
        Err(e) => {
            skip(test, &e);
            return;
        }
    };
    let dev = lp.dev.clone();
    let part = match lp.partition_1(1 << 20, 4 << 20) {
        Ok(p) => p,
        Err(e) => {
            skip(test, &e);
            return;
        }
    };

    // The whole disk: refused, naming the partition table, with and without a scan of the table.
    let l = assert_refused(dir.path(), &lp, &dev, WRITE);
    assert!(l.contains("partition table") && l.contains(&format!("{}p1", lp.name())), "should name the partitions: {l}");
    assert!(l.contains(table_word), "should name the kind of table: {l}");
    // The (blank) partition: refused without consent, and consent for the whole disk is not
    // consent for the partition.
    let l = assert_refused(dir.path(), &lp, &part, WRITE);
    assert!(l.contains("without consent"), "{l}");
    assert_refused(dir.path(), &lp, &part, &[WRITE, &["--destructive", &dev]].concat());
    // Nor the other way round.
    assert_refused(dir.path(), &lp, &dev, &[WRITE, &["--destructive", &part]].concat());

    // Consent for the partition writes inside the partition only: the table survives.
    let before = lp.contents().0;
    assert_runs(dir.path(), &part, &["--rw", "write", "--bs", "1m", "--verify", "--bytes", "4m", "--destructive", &part]);
    let after = lp.contents().0;
    let (start, end) = (1 << 20, 5 << 20);
    assert!(after[..start] == before[..start], "bytes before the partition changed");
    assert!(after[end..] == before[end..], "bytes after the partition changed");
    assert!(after[start..end] != before[start..end], "the partition was not written");
    // Still a partitioned disk.
    assert_refused(dir.path(), &lp, &dev, WRITE);
}

#[test]
fn mbr_partition_table_is_refused() {
    partition_table_case("mbr_partition_table_is_refused", write_mbr, "MBR");
}

#[test]
fn gpt_partition_table_is_refused() {
    partition_table_case("gpt_partition_table_is_refused", write_gpt, "GPT");
}

/// A partition table the kernel has not scanned (no `-P`): found by its signature alone.
#[test]
fn unscanned_partition_table_is_refused() {
    needs_loops!("unscanned_partition_table_is_refused");
    let _g = lock();
    let dir = tempdir();
    for (name, write) in [("MBR", write_mbr as fn(&Path)), ("GPT", write_gpt)] {
        let img = backing_file(dir.path(), &format!("{name}.img"), 16 << 20);
        write(&img);
        let lp = Loop::attach(&img, &[]).unwrap();
        let l = assert_refused(dir.path(), &lp, &lp.dev.clone(), WRITE);
        assert!(l.contains(name) && l.contains("partition table"), "{l}");
    }
}

#[test]
fn block_size_below_the_logical_block_size() {
    needs_loops!("block_size_below_the_logical_block_size");
    let _g = lock();
    let dir = tempdir();
    let lp = match Loop::attach(&backing_file(dir.path(), "4k.img", 16 << 20), &["--sector-size", "4096"]) {
        Ok(l) => l,
        Err(e) => {
            skip("block_size_below_the_logical_block_size", &e);
            return;
        }
    };
    let lbs = std::fs::read_to_string(format!("/sys/block/{}/queue/logical_block_size", lp.name())).unwrap();
    assert_eq!(lbs.trim(), "4096");
    let dev = lp.dev.as_str();
    for (bs, args) in [
        ("512", vec!["--rw", "randread"]),
        ("2k", vec!["-i", "io_uring", "--rw", "read"]),
        ("6k", vec!["-i", "libaio", "--rw", "randread"]),
        ("512", vec!["--rw", "randwrite", "--destructive", dev]),
        ("8k", vec!["--rw", "randread", "--blockalign", "512"]),
    ] {
        let json = dir.path().join("x.json");
        let mut a = vec!["run", "--bs", bs, "--ios", "10", "--json", json.to_str().unwrap()];
        a.extend(&args);
        a.push(dev);
        let before = lp.contents();
        let r = iolab_in(dir.path(), &a);
        let l = r.assert_usage_error();
        assert!(l.contains("logical block size 4096") && l.contains("--buffered"), "{l}");
        assert!(!json.exists());
        assert!(lp.contents() == before);
    }
    // 4k works, reading and (with consent) writing; 512 works through the page cache.
    assert_runs(dir.path(), dev, &["--bs", "4k", "--rw", "randread", "--ios", "32"]);
    assert_runs(dir.path(), dev, &["--bs", "8k", "--rw", "randwrite", "--verify", "--ios", "32", "--destructive", dev]);
    assert_runs(dir.path(), dev, &["--bs", "512", "--buffered", "--rw", "randread", "--ios", "32"]);
}

#[test]
fn polling_a_loop_device_needs_allow_fallback() {
    needs_loops!("polling_a_loop_device_needs_allow_fallback");
    if iolab::interfaces::machine_support("io_uring").is_err() {
        skip("polling_a_loop_device_needs_allow_fallback", "io_uring is not available");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let lp = Loop::attach(&backing_file(dir.path(), "poll.img", 8 << 20), &[]).unwrap();
    let io_poll = std::fs::read_to_string(format!("/sys/block/{}/queue/io_poll", lp.name())).unwrap_or_default();
    if io_poll.trim() != "0" {
        skip("polling_a_loop_device_needs_allow_fallback", "this loop device claims it can poll");
        return;
    }
    let r = iolab_in(dir.path(), &["run", "-i", "io_uring", "--complete", "poll", "--ios", "10", &lp.dev]);
    let l = r.assert_usage_error();
    assert!(l.contains("io_poll") && l.contains("poll_queues") && l.contains("--allow-fallback"), "{l}");
}

/// A device another program holds open exclusively (as device-mapper, md, bcache or a mount
/// would) is in use: refused even with consent.
#[test]
fn exclusively_claimed_device_is_refused() {
    needs_loops!("exclusively_claimed_device_is_refused");
    use std::os::unix::fs::OpenOptionsExt;
    let _g = lock();
    let dir = tempdir();
    let lp = Loop::attach(&backing_file(dir.path(), "claimed.img", 8 << 20), &[]).unwrap();
    let dev = lp.dev.clone();
    let claim = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(&dev).unwrap();
    let l = assert_refused(dir.path(), &lp, &dev, &[WRITE, &["--destructive", &dev]].concat());
    assert!(l.contains("EBUSY") && l.contains("does not override"), "{l}");
    drop(claim);
    assert_runs(dir.path(), &dev, &[WRITE, &["--destructive", &dev]].concat());
}

/// A mount only another mount namespace can see (a container's, say) is found too.
#[test]
fn device_mounted_in_another_namespace_is_refused() {
    needs_loops!("device_mounted_in_another_namespace_is_refused");
    if !have("mkfs.ext4") || Command::new("unshare").arg("--version").output().is_err() {
        skip("device_mounted_in_another_namespace_is_refused", "needs mkfs.ext4 and unshare");
        return;
    }
    use std::io::BufRead;
    let _g = lock();
    let dir = tempdir();
    let img = backing_file(dir.path(), "ns.img", 16 << 20);
    mkfs_ext4(&img);
    let lp = Loop::attach(&img, &[]).unwrap();
    let mnt = dir.path().join("nsmnt");
    std::fs::create_dir(&mnt).unwrap();
    struct Child(std::process::Child);
    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let script = format!("mount -o ro {} '{}' && echo ready && exec sleep 60", lp.dev, mnt.display());
    let mut child = Child(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(child.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    if line.trim() != "ready" {
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err);
        skip("device_mounted_in_another_namespace_is_refused", &format!("cannot mount in a new namespace: {}", err.trim()));
        return;
    }
    let mine = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mine.contains(&mnt.display().to_string()), "the mount leaked into this namespace");
    let dev = lp.dev.clone();
    let l = assert_refused(dir.path(), &lp, &dev, &[WRITE, &["--destructive", &dev]].concat());
    assert!(l.contains("in use") && l.contains("does not override"), "{l}");
    drop(child);
}

/// A file backing a loop device whose ext4 is mounted is the mounted file system's storage:
/// writing it (under any of its names) is refused like writing the device, and so is writing a
/// second loop device over the same file. Reading stays allowed.
#[test]
fn file_backing_a_mounted_loop_device_is_refused() {
    needs_loops!("file_backing_a_mounted_loop_device_is_refused");
    if !have("mkfs.ext4") {
        skip("file_backing_a_mounted_loop_device_is_refused", "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let Some(mut m) = MountedExt4::new("file_backing_a_mounted_loop_device_is_refused", dir.path(), "mounted.img") else { return };
    let (lp, img, mnt) = (&m.lp, m.img.clone(), m.mnt.clone());
    let file = img.to_str().unwrap();
    let l = assert_refused(dir.path(), lp, file, &["--rw", "randwrite", "--size", "8M", "--ios", "64"]);
    assert!(
        l.contains(&format!("it backs {}, which is mounted on {}", lp.name(), mnt.display())) && l.contains("does not override"),
        "{l}"
    );
    let link = dir.path().join("hard.img");
    std::fs::hard_link(&img, &link).unwrap();
    let sym = dir.path().join("sym.img");
    std::os::unix::fs::symlink(&img, &sym).unwrap();
    for other in [&link, &sym] {
        let l = assert_refused(dir.path(), lp, other.to_str().unwrap(), &["--rw", "write", "--size", "8M", "--ios", "16"]);
        assert!(l.contains(&format!("backs {}", lp.name())), "{l}");
    }
    let before = lp.contents();
    assert_runs(dir.path(), file, &["--rw", "randread", "--ios", "64"]);
    assert!(lp.contents() == before);
    // A second loop device over the mounted one's file, named with --destructive: still in use.
    let second = Loop::attach(&img, &[]).unwrap();
    let dev = second.dev.clone();
    let l = assert_refused(dir.path(), lp, &dev, &[WRITE, &["--destructive", &dev]].concat());
    assert!(
        l.contains(&format!("{} over the same backing file", lp.name()))
            && l.contains(&format!("is mounted on {}", mnt.display()))
            && l.contains("does not override"),
        "{l}"
    );
    drop(second);
    m.mount = None;
    // Unmounted, the file is an ordinary file again.
    assert_runs(dir.path(), file, &["--rw", "randwrite", "--size", "8M", "--ios", "64"]);
}

/// Mount `dev` read-only on a new directory `dir/name`; None (the test skipped) where it cannot.
fn mount_ro(test: &str, dev: &str, dir: &Path, name: &str) -> Option<(Mount, PathBuf)> {
    let mnt = dir.join(name);
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new("mount").args(["-o", "ro", dev]).arg(&mnt).output().unwrap();
    if !st.status.success() {
        skip(test, &format!("cannot mount ext4 here: {}", String::from_utf8_lossy(&st.stderr).trim()));
        return None;
    }
    Some((Mount(mnt.clone()), mnt))
}

/// A file under a loop device under another loop device, ext4 mounted on the top one: the file
/// and the middle loop device are the mounted file system's storage, refused even with consent.
#[test]
fn loop_stack_under_a_mount_is_refused_at_every_level() {
    let test = "loop_stack_under_a_mount_is_refused_at_every_level";
    needs_loops!(test);
    if !have("mkfs.ext4") {
        skip(test, "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let img = backing_file(dir.path(), "stack.img", 16 << 20);
    let a = Loop::attach(&img, &[]).unwrap();
    let b = match Loop::attach(Path::new(&a.dev), &[]) {
        Ok(b) => b,
        Err(e) => {
            skip(test, &e);
            return;
        }
    };
    mkfs_ext4(Path::new(&b.dev));
    let Some((mount, mnt)) = mount_ro(test, &b.dev, dir.path(), "mnt") else { return };
    let top = format!("which is under {}, which is mounted on {}", b.name(), mnt.display());
    let file = img.to_str().unwrap();
    let l = assert_refused(dir.path(), &a, file, &["--rw", "randwrite", "--size", "8M", "--ios", "64"]);
    assert!(l.contains(&format!("it backs {}, {top}", a.name())) && l.contains("does not override"), "{l}");
    // The middle loop device, named with --destructive: in use like a mounted device.
    let l = assert_refused(dir.path(), &a, &a.dev, &[WRITE, &["--destructive", &a.dev]].concat());
    assert!(
        l.contains(&format!("it is under {}, which is mounted on {}", b.name(), mnt.display())) && l.contains("does not override"),
        "{l}"
    );
    // A second loop device over the same file reaches the mount through the first.
    let c = Loop::attach(&img, &[]).unwrap();
    let l = assert_refused(dir.path(), &a, &c.dev, &[WRITE, &["--destructive", &c.dev]].concat());
    assert!(l.contains(&format!("{} over the same backing file {file} is under {}", a.name(), b.name())), "{l}");
    drop(c);
    drop(mount);
    // Unmounted, nothing above the file is in use.
    assert_runs(dir.path(), file, &["--rw", "randwrite", "--size", "8M", "--ios", "64"]);
}

/// The loop device's file lost the name it was attached by (sysfs shows "NAME (deleted)"); its
/// other name is still the mounted file system's storage.
#[test]
fn file_whose_first_name_was_deleted_is_still_refused() {
    let test = "file_whose_first_name_was_deleted_is_still_refused";
    needs_loops!(test);
    if !have("mkfs.ext4") {
        skip(test, "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    let first = backing_file(dir.path(), "first.img", 16 << 20);
    mkfs_ext4(&first);
    let second = dir.path().join("second.img");
    std::fs::hard_link(&first, &second).unwrap();
    let mut lp = Loop::attach(&first, &[]).unwrap();
    std::fs::remove_file(&first).unwrap();
    lp.backing = second.clone();
    let shown = std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", lp.name())).unwrap();
    assert!(shown.trim_end().ends_with("(deleted)"), "{shown}");
    let Some((_mount, mnt)) = mount_ro(test, &lp.dev, dir.path(), "mnt") else { return };
    let l = assert_refused(dir.path(), &lp, second.to_str().unwrap(), &["--rw", "randwrite", "--size", "8M", "--ios", "64"]);
    assert!(l.contains(&format!("it backs {}, which is mounted on {}", lp.name(), mnt.display())), "{l}");
}

/// Backing file names are read byte for byte: a name ending in a space, a newline inside a name.
#[test]
fn files_with_odd_names_backing_a_mount_are_refused() {
    let test = "files_with_odd_names_backing_a_mount_are_refused";
    needs_loops!(test);
    if !have("mkfs.ext4") {
        skip(test, "mkfs.ext4 is not installed");
        return;
    }
    let _g = lock();
    let dir = tempdir();
    // The same name without the odd byte exists too, and is not what is mounted.
    let plain = backing_file(dir.path(), "odd.img", 16 << 20);
    for (k, name) in ["odd.img ", "odd\n.img", "odd.img\t"].into_iter().enumerate() {
        let img = backing_file(dir.path(), name, 16 << 20);
        mkfs_ext4(&img);
        let lp = match Loop::attach(&img, &[]) {
            Ok(l) => l,
            Err(e) => {
                skip(test, &format!("{name:?}: {e}"));
                continue;
            }
        };
        let Some((_mount, mnt)) = mount_ro(test, &lp.dev, dir.path(), &format!("mnt{k}")) else { return };
        let before = lp.contents();
        let json = dir.path().join("refused.json");
        let r = iolab_in(
            dir.path(),
            &["run", "-q", "--json", json.to_str().unwrap(), "--rw", "randwrite", "--size", "8M", "--ios", "64", img.to_str().unwrap()],
        );
        let l = r.assert_usage_error();
        assert!(l.contains(&format!("it backs {}, which is mounted on {}", lp.name(), mnt.display())), "{name:?}: {l}");
        assert!(l.contains(&name.escape_default().to_string()), "{name:?} should be shown escaped: {l}");
        assert!(!json.exists() && lp.contents() == before, "{name:?}: written:\n{}", r.describe());
        // The plain name is another file: written.
        assert_runs(dir.path(), plain.to_str().unwrap(), &["--rw", "randwrite", "--ios", "16"]);
    }
}

/// `probe` only reads, but a kernel interface is no target for it either.
#[test]
fn probe_refuses_pseudo_files() {
    for p in ["/proc/self/mem", "/proc/self/status"] {
        let r = iolab(&["probe", p]);
        let l = r.assert_usage_error();
        assert!(l.contains(&format!("{p} is on proc, a kernel pseudo-file system")), "{l}");
    }
}
