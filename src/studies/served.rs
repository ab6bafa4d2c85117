//! Served parts: S4.7, IISWC'19 §VI-C and Fig 23. The device is served over NBD by `iolab serve`
//! once per server back end (the kernel's stack through io_uring; iolab's user-space NVMe
//! driver, where the target is an NVMe namespace), the kernel's NBD client connected to it over
//! loopback, ext4 made on /dev/nbdN and mounted on a private directory, and the part's file-set
//! grid run there; then unmounted, disconnected and the server stopped. The part is one sweep:
//! its `server` dimension varies fastest, so each back end's configurations are one share of it
//! (`Share { index, count }`), run while that back end serves.
//!
//! The server is a child process (`iolab serve`), not a thread of this one: the client's runs
//! measure their process's CPU (`cost`), and a server inside it would be counted there; apart, the
//! server's CPU is read from its own /proc entries by thread class for each run's window
//! (`meters::server`). It is told to end (SIGTERM) when this iolab dies (PR_SET_PDEATHSIG), so a
//! `kill -9` of the suite gives the controller back as a clean stop does; the NBD connection and
//! the mount are journaled (`serve::client`) and `iolab restore` undoes them.
use super::ui::{Event, SuiteRun, SuiteUi};
use super::Part;
use crate::failure::Failure;
use crate::meters::server::Serving;
use crate::plan::Plan;
use crate::session::sweep::{Share, SweepEnd};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The server back ends, in the order of the part's `server` dimension: the kernel's, then
/// iolab's user-space driver.
pub(crate) const SERVERS: &[&str] = &["io_uring", "vfio-nvme"];

/// The parts served over NBD.
const PARTS: &[&str] = &["S4.7-server-client"];

/// Where the client's ext4 is mounted: a fixed path (the sweep's target, so its identity, and a
/// suite run again continues it), in a directory only root may enter.
pub(crate) const MOUNT: &str = "/run/iolab/s4.7-client";

pub(crate) fn is_served(p: &Part) -> bool {
    PARTS.contains(&p.name)
}

/// Why the part cannot run here with these targets, in one line; None: it can.
pub(crate) fn cannot_run(s: &SuiteRun) -> Option<String> {
    let Some(target) = s.targets.first().map(|t| t.split(crate::plan::matrix::TARGET_SET).next().unwrap_or(t).to_string()) else {
        return Some("it serves a device or a file over NBD: name one (an NVMe namespace, for the user-space server too) and allow writing it with --destructive".into());
    };
    if !s.destructive.contains(&target) {
        return Some(format!(
            "the client makes ext4 on {target} through NBD, destroying its contents: allow it with --destructive {target}"
        ));
    }
    if let Err(e) = crate::serve::client::available() {
        return Some(e.to_string());
    }
    if mkfs().is_none() {
        return Some("no mkfs.ext4 here (e2fsprogs): the client's file system cannot be made".into());
    }
    None
}

fn mkfs() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(["/sbin", "/usr/sbin"].map(PathBuf::from)).map(|d| d.join("mkfs.ext4")).find(|p| p.is_file())
}

/// Why `server` cannot serve `target` here (the user-space driver takes an NVMe namespace only);
/// None: try it (the server's own refusal, if any, is the reason then).
pub(crate) fn server_cannot(server: &str, target: &str) -> Option<String> {
    if server != "vfio-nvme" {
        return None;
    }
    let name = target.strip_prefix("/dev/").unwrap_or("");
    let nvme_ns = name.strip_prefix("nvme").is_some_and(|r| {
        r.split_once('n').is_some_and(|(c, n)| {
            !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        })
    });
    // A namespace named by its controller's PCI address: DDDD:BB:DD.F/NSID.
    let pci = target.split_once('/').is_some_and(|(a, n)| a.len() == 12 && a.contains(':') && n.parse::<u32>().is_ok());
    (!nvme_ns && !pci).then(|| format!("the user-space driver serves an NVMe namespace (/dev/nvmeXnY), and {target} is not one"))
}

/// Run a served part: for each server back end, its share of the part's sweep with that back end
/// serving. None: nothing ran, the reason shown (the kernel has no NBD client, no mkfs.ext4).
pub(crate) fn run(
    s: &SuiteRun,
    p: &Part,
    plan: &Plan,
    unsupported: &[(String, String)],
    ui: &mut dyn SuiteUi,
) -> Result<Option<SweepEnd>, Failure> {
    if let Some(why) = cannot_run(s) {
        ui.event(Event::CannotRun { what: p.name, why: &why });
        return Ok(None);
    }
    let target = s.targets[0].split(crate::plan::matrix::TARGET_SET).next().unwrap_or(&s.targets[0]).to_string();
    let mount = Path::new(MOUNT);
    private_dir(mount)?;
    let targets = [MOUNT.to_string()];
    let mut end = SweepEnd { code: 0, finished: true };
    for (index, server) in SERVERS.iter().enumerate() {
        let share = Some(Share { index, count: SERVERS.len() });
        let cannot = |why: String| Serving::Cannot { server: server.to_string(), why };
        let ran = match server_cannot(server, &target) {
            Some(why) => {
                ui.event(Event::Served(&format!("{server}: not served here: {why}")));
                ui.run_part(plan, &targets, share, unsupported, Some(&cannot(why)))?
            }
            None => match Stack::up(&target, server, mount, ui)? {
                Err(why) if *server != SERVERS[0] => {
                    ui.event(Event::Served(&format!("{server}: not served here: {why}")));
                    ui.run_part(plan, &targets, share, unsupported, Some(&cannot(why)))?
                }
                // The kernel's server refusing the target is the target's fault: bad input.
                Err(why) => return Err(Failure::invalid(why)),
                Ok(stack) => {
                    let at = Serving::At { server: server.to_string(), dir: mount.into(), pid: stack.server.id(), nbd: stack.nbd };
                    let ran = ui.run_part(plan, &targets, share, unsupported, Some(&at));
                    let down = stack.down();
                    ui.event(Event::Served(&down.0));
                    let ran = ran?;
                    down.1?;
                    ran
                }
            },
        };
        end.code = end.code.max(ran.code);
        if !ran.finished {
            return Ok(Some(SweepEnd { code: ran.code, finished: false }));
        }
    }
    Ok(Some(end))
}

/// The mount point: made (0700, in /run/iolab, 0700) where absent; refused where it is a link,
/// not a directory, or something is mounted on it already.
fn private_dir(dir: &Path) -> Result<(), Failure> {
    let parent = dir.parent().unwrap_or(Path::new("/"));
    // /run itself, where a system has none (a minimal initramfs): made as the system would.
    if let Some(run) = parent.parent() {
        std::fs::create_dir_all(run).map_err(|e| Failure::failed(format!("cannot make {}: {e}", run.display())))?;
    }
    for d in [parent, dir] {
        match std::fs::symlink_metadata(d) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
                .mode(0o700)
                .create(d)
                .map_err(|e| Failure::failed(format!("cannot make {}: {e}", d.display())))?,
            Err(e) => return Err(Failure::failed(format!("cannot use {}: {e}", d.display()))),
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(Failure::invalid(format!("{} is not a directory (a link or another file): remove it", d.display())))
            }
            Ok(m) if m.permissions().mode() & 0o022 != 0 => {
                return Err(Failure::invalid(format!(
                    "{} may be written by others: iolab mounts only in a directory of its own",
                    d.display()
                )))
            }
            Ok(_) => {}
        }
    }
    let (a, b) = (std::fs::metadata(parent), std::fs::metadata(dir));
    if let (Ok(a), Ok(b)) = (a, b) {
        if std::os::unix::fs::MetadataExt::dev(&a) != std::os::unix::fs::MetadataExt::dev(&b) {
            return Err(Failure::invalid(format!(
                "something is mounted on {} already (a suite killed earlier? `iolab restore` unmounts what it left)",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// One back end's server, client and file system, up.
struct Stack {
    server: Child,
    json: tempfile::TempDir,
    nbd: u32,
    mount: PathBuf,
    mounted: bool,
    connected: bool,
    label: String,
}

impl Stack {
    /// Start `iolab serve TARGET -i SERVER`, connect /dev/nbdN to it, make ext4 and mount it.
    /// Ok(Err): the server refused or could not start (its line); Err: a step of the client
    /// failed (everything already up is taken down).
    fn up(target: &str, server: &str, mount: &Path, ui: &mut dyn SuiteUi) -> Result<Result<Stack, String>, Failure> {
        let json = tempfile::tempdir().map_err(|e| Failure::failed(format!("cannot make a temporary directory: {e}")))?;
        let exe = std::env::current_exe().map_err(|e| Failure::failed(format!("cannot find iolab's own executable: {e}")))?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", target, "-i", server, "--destructive", "--listen", "127.0.0.1:0", "--connections", "1", "--json"])
            .arg(json.path().join("summary.json"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a Ctrl-C at the terminal stops the suite, which takes the
            // client down before it stops the server, not both at once.
            .process_group(0);
        // VFIO without an IOMMU only where the machine was set up for it (vfio loaded with
        // enable_unsafe_noiommu_mode=1), as the rig's no-IOMMU boot is.
        if server == "vfio-nvme"
            && std::fs::read_to_string("/sys/module/vfio/parameters/enable_unsafe_noiommu_mode").is_ok_and(|v| v.trim() == "Y")
        {
            cmd.arg("--vfio-noiommu");
        }
        // SAFETY: prctl only, between fork and exec: the server is told to stop (SIGTERM, a clean
        // stop that gives its controller back) when this iolab dies.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| Failure::failed(format!("cannot start iolab serve: {e}")))?;
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let addr = line.split(" on ").nth(1).and_then(|r| r.split(' ').next()).and_then(|a| a.parse::<std::net::SocketAddr>().ok());
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            let mut err = String::new();
            let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
            let said = err.lines().next().unwrap_or("").trim_start_matches("iolab: ").to_string();
            return Ok(Err(format!("iolab serve -i {server} did not start: {}", if said.is_empty() { line.trim() } else { &said })));
        };
        // The rest of its output (the summary at its end) is read when it ends.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        ui.event(Event::Served(line.trim()));
        let mut stack = Stack { server: child, json, nbd: 0, mount: mount.into(), mounted: false, connected: false, label: server.into() };
        stack.nbd = crate::serve::client::connect(addr, "iolab", None, 1, 4096).map_err(Failure::from)?;
        stack.connected = true;
        let dev = format!("/dev/nbd{}", stack.nbd);
        ui.event(Event::Served(&format!("{dev} connected to {addr}; making ext4 on it and mounting it at {}", mount.display())));
        let mkfs = mkfs().expect("checked before");
        let made = Command::new(&mkfs).args(["-q", "-F", "-E", "nodiscard", &dev]).stdin(Stdio::null()).output();
        match made {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("").to_string();
                return Err(Failure::failed(format!("mkfs.ext4 {dev} failed: {why}")));
            }
            Err(e) => return Err(Failure::failed(format!("cannot run {}: {e}", mkfs.display()))),
        }
        crate::serve::client::mount(stack.nbd, mount, "ext4").map_err(Failure::from)?;
        stack.mounted = true;
        Ok(Ok(stack))
    }

    /// Unmount, disconnect, stop the server: the line saying what it served and cost, and the
    /// first step that failed.
    fn down(mut self) -> (String, Result<(), Failure>) {
        let r = self.take_down();
        let summary = std::fs::read_to_string(self.json.path().join("summary.json")).ok();
        let v: Option<serde_json::Value> = summary.and_then(|t| serde_json::from_str(&t).ok());
        let line = match v {
            Some(v) => {
                let n = |p: &str| v.pointer(p).and_then(serde_json::Value::as_u64).unwrap_or(0);
                let cpu = v.pointer("/cpu_us_per_request").and_then(serde_json::Value::as_f64);
                format!(
                    "{} server stopped: {} reads and {} writes served, {} of its CPU per request",
                    self.label,
                    n("/requests/read"),
                    n("/requests/write"),
                    cpu.map_or("-".to_string(), |c| format!("{c:.1} µs"))
                )
            }
            None => format!("{} server stopped (no summary)", self.label),
        };
        (line, r)
    }

    fn take_down(&mut self) -> Result<(), Failure> {
        let mut first: Result<(), Failure> = Ok(());
        let mut keep = |r: Result<(), Failure>| {
            if first.is_ok() {
                first = r;
            }
        };
        if std::mem::take(&mut self.mounted) {
            keep(crate::serve::client::unmount(self.nbd, &self.mount).map_err(Failure::from));
        }
        if std::mem::take(&mut self.connected) {
            keep(crate::serve::client::disconnect(self.nbd).map_err(Failure::from));
        }
        // SAFETY: a signal to our own child, not yet reaped.
        if self.server.try_wait().ok().flatten().is_none() {
            unsafe { libc::kill(self.server.id() as i32, libc::SIGTERM) };
            let started = std::time::Instant::now();
            while self.server.try_wait().ok().flatten().is_none() {
                if started.elapsed() > std::time::Duration::from_secs(30) {
                    let _ = self.server.kill();
                    keep(Err(Failure::failed(format!("the {} server did not stop in 30 s: killed", self.label))));
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = self.server.wait();
        }
        first
    }
}

impl Drop for Stack {
    /// Whatever is still up (a step of `up` failed) is taken down.
    fn drop(&mut self) {
        let _ = self.take_down();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_space_server_takes_an_nvme_namespace_only() {
        assert_eq!(server_cannot("io_uring", "/tmp/file"), None);
        assert_eq!(server_cannot("vfio-nvme", "/dev/nvme0n1"), None);
        assert_eq!(server_cannot("vfio-nvme", "/dev/nvme12n3"), None);
        assert_eq!(server_cannot("vfio-nvme", "0000:00:04.0/1"), None);
        for t in ["/dev/sda", "/dev/nvme0n1p1", "/dev/nvme0", "/tmp/file", "/dev/loop0"] {
            assert!(server_cannot("vfio-nvme", t).unwrap().contains("is not one"), "{t}");
        }
    }

    /// Each back end's configurations are one share of the part's one sweep: `server` varies
    /// fastest, so share i of the plan is SERVERS[i]'s.
    #[test]
    fn each_server_is_one_share_of_the_sweep() {
        let p = super::super::part("S4.7-server-client").unwrap();
        assert!(is_served(p));
        for quick in [true, false] {
            let text = p.plan(quick, &super::super::Given::default()).unwrap().unwrap();
            let e = crate::plan::sweep::expand(&text, &[MOUNT.to_string()]).unwrap();
            assert_eq!(e.configs.len(), 2 * 2 * SERVERS.len(), "read and write, seq and random, per server");
            for (index, server) in SERVERS.iter().enumerate() {
                let keys = Share { index, count: SERVERS.len() }.keys(&e);
                assert_eq!(keys.len(), 4);
                assert!(keys.iter().all(|k| k.contains(&format!("server={server}"))), "{keys:?}");
            }
            for c in &e.configs {
                assert_eq!(c.job.targets.paths, [MOUNT]);
                let set = c.job.fileset.as_ref().unwrap();
                assert_eq!(set.file_size.to_string(), "4096-65536");
            }
        }
    }
}
