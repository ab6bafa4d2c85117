//! `iolab serve`, without the kernel's NBD client: a small NBD client written here, byte for
//! byte from NetworkBlockDevice/nbd's doc/proto.md (fixed newstyle handshake, options, simple
//! and structured replies), against the server on a file or a loop device.
use crate::common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const NBDMAGIC: &[u8; 8] = b"NBDMAGIC";
const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const OPT_LIST: u32 = 3;
const OPT_INFO: u32 = 6;
const OPT_GO: u32 = 7;
const OPT_STRUCTURED_REPLY: u32 = 8;
const REP_ACK: u32 = 1;
const REP_SERVER: u32 = 2;
const REP_INFO: u32 = 3;
const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const CMD_TRIM: u16 = 4;
const FLAG_READ_ONLY: u16 = 1 << 1;
const FLAG_SEND_FLUSH: u16 = 1 << 2;
const FLAG_SEND_TRIM: u16 = 1 << 5;
const EPERM: u32 = 1;
const EINVAL: u32 = 22;

/// A running `iolab serve`, killed on drop.
struct Server {
    child: Option<Child>,
    port: u16,
    first_line: String,
}

impl Server {
    /// `iolab serve TARGET ARGS --listen 127.0.0.1:0`, waiting for its first line (the port).
    fn start(target: &Path, args: &[&str], env: &[(&str, &Path)]) -> Result<Server, Run> {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve").arg(target).args(["--listen", "127.0.0.1:0"]).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("cannot run iolab");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        if line.is_empty() {
            let o = child.wait_with_output().unwrap();
            let mut all = vec!["serve".to_string(), target.display().to_string()];
            all.extend(args.iter().map(|a| a.to_string()));
            return Err(Run::from(o, all));
        }
        // Whatever else it prints goes on being read, so the pipe never fills.
        let port = line.split(" on 127.0.0.1:").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("no port in the first line: {line}"));
        let rest = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        std::mem::forget(rest);
        Ok(Server { child: Some(child), port, first_line: line })
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
        s
    }

    /// SIGTERM, then its exit code and stderr.
    fn stop(mut self) -> (i32, String) {
        let mut child = self.child.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        (status.code().unwrap_or(-1), err)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_be_bytes());
}
fn get<const N: usize>(s: &mut TcpStream) -> [u8; N] {
    let mut b = [0u8; N];
    s.read_exact(&mut b).unwrap();
    b
}
fn get_u16(s: &mut TcpStream) -> u16 {
    u16::from_be_bytes(get(s))
}
fn get_u32(s: &mut TcpStream) -> u32 {
    u32::from_be_bytes(get(s))
}
fn get_u64(s: &mut TcpStream) -> u64 {
    u64::from_be_bytes(get(s))
}
fn get_vec(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

/// The greeting, checked, and the client's flags (fixed newstyle, no zeroes).
fn handshake(s: &mut TcpStream) {
    assert_eq!(&get::<8>(s), NBDMAGIC);
    assert_eq!(get_u64(s), IHAVEOPT);
    assert_eq!(get_u16(s), 3, "handshake flags: fixed newstyle and no zeroes");
    s.write_all(&3u32.to_be_bytes()).unwrap();
}

fn send_option(s: &mut TcpStream, option: u32, data: &[u8]) {
    let mut b = Vec::new();
    put_u64(&mut b, IHAVEOPT);
    put_u32(&mut b, option);
    put_u32(&mut b, data.len() as u32);
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// One option reply: (reply type, data).
fn option_reply(s: &mut TcpStream, option: u32) -> (u32, Vec<u8>) {
    assert_eq!(get_u64(s), REPLY_MAGIC);
    assert_eq!(get_u32(s), option);
    let kind = get_u32(s);
    let len = get_u32(s) as usize;
    (kind, get_vec(s, len))
}

fn info_data(name: &str, requests: &[u16]) -> Vec<u8> {
    let mut d = Vec::new();
    put_u32(&mut d, name.len() as u32);
    d.extend_from_slice(name.as_bytes());
    put_u16(&mut d, requests.len() as u16);
    for r in requests {
        put_u16(&mut d, *r);
    }
    d
}

/// A client in the transmission phase.
struct Client {
    s: TcpStream,
    structured: bool,
    size: u64,
    flags: u16,
    cookie: u64,
}

impl Client {
    /// NBD_OPT_GO (after NBD_OPT_STRUCTURED_REPLY when `structured`).
    fn go(server: &Server, name: &str, structured: bool) -> Client {
        let mut s = server.connect();
        handshake(&mut s);
        if structured {
            send_option(&mut s, OPT_STRUCTURED_REPLY, &[]);
            assert_eq!(option_reply(&mut s, OPT_STRUCTURED_REPLY).0, REP_ACK);
        }
        send_option(&mut s, OPT_GO, &info_data(name, &[3]));
        let (mut size, mut flags, mut block) = (None, 0, None);
        loop {
            let (kind, data) = option_reply(&mut s, OPT_GO);
            match kind {
                REP_ACK => break,
                REP_INFO if data[..2] == [0, 0] => {
                    size = Some(u64::from_be_bytes(data[2..10].try_into().unwrap()));
                    flags = u16::from_be_bytes([data[10], data[11]]);
                }
                REP_INFO if data[..2] == [0, 3] => block = Some(u32::from_be_bytes(data[2..6].try_into().unwrap())),
                REP_INFO => {}
                other => panic!("NBD_OPT_GO answered {other:#x}: {}", String::from_utf8_lossy(&data)),
            }
        }
        assert!(block.is_some_and(|b| b >= 1), "NBD_INFO_BLOCK_SIZE was asked for and not given");
        Client { s, structured, size: size.expect("NBD_INFO_EXPORT"), flags, cookie: 0 }
    }

    /// NBD_OPT_EXPORT_NAME (the oldest way in).
    fn export_name(server: &Server, name: &str) -> Client {
        let mut s = server.connect();
        handshake(&mut s);
        send_option(&mut s, OPT_EXPORT_NAME, name.as_bytes());
        let size = get_u64(&mut s);
        let flags = get_u16(&mut s);
        Client { s, structured: false, size, flags, cookie: 0 }
    }

    /// One command; Ok(read data) or Err(error number).
    fn cmd(&mut self, kind: u16, offset: u64, len: u32, payload: &[u8]) -> Result<Vec<u8>, u32> {
        self.cookie += 1;
        let cookie = self.cookie;
        let mut b = Vec::new();
        put_u32(&mut b, 0x2560_9513);
        put_u16(&mut b, 0);
        put_u16(&mut b, kind);
        put_u64(&mut b, cookie);
        put_u64(&mut b, offset);
        put_u32(&mut b, len);
        b.extend_from_slice(payload);
        self.s.write_all(&b).unwrap();
        if kind == CMD_DISC {
            return Ok(Vec::new());
        }
        if !self.structured {
            assert_eq!(get_u32(&mut self.s), 0x6744_6698, "simple reply magic");
            let error = get_u32(&mut self.s);
            assert_eq!(get_u64(&mut self.s), cookie);
            if error != 0 {
                return Err(error);
            }
            return Ok(if kind == CMD_READ { get_vec(&mut self.s, len as usize) } else { Vec::new() });
        }
        let mut data = vec![0u8; if kind == CMD_READ { len as usize } else { 0 }];
        let mut error = None;
        loop {
            assert_eq!(get_u32(&mut self.s), 0x668e_33ef, "structured reply magic");
            let flags = get_u16(&mut self.s);
            let ty = get_u16(&mut self.s);
            assert_eq!(get_u64(&mut self.s), cookie);
            let n = get_u32(&mut self.s) as usize;
            let body = get_vec(&mut self.s, n);
            match ty {
                0 => assert_eq!(n, 0),
                1 => {
                    let at = u64::from_be_bytes(body[..8].try_into().unwrap()) - offset;
                    data[at as usize..at as usize + n - 8].copy_from_slice(&body[8..]);
                }
                t if t & 0x8000 != 0 => error = Some(u32::from_be_bytes(body[..4].try_into().unwrap())),
                t => panic!("unexpected chunk type {t}"),
            }
            if flags & 1 != 0 {
                break;
            }
        }
        error.map_or(Ok(data), Err)
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

fn target_file(dir: &Path, size: u64) -> PathBuf {
    let p = dir.join("served.img");
    std::fs::write(&p, pattern(size as usize, 7)).unwrap();
    p
}

fn summary(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn serve_proto_write_read_flush_trim_through_psync_and_io_uring() {
    for (iface, structured) in [("psync", false), ("io_uring", true)] {
        let dir = tempdir();
        let img = target_file(dir.path(), 4 << 20);
        let json = dir.path().join("summary.json");
        let server = Server::start(&img, &["-i", iface, "--destructive", "--json", json.to_str().unwrap()], &[])
            .unwrap_or_else(|r| panic!("{}", r.describe()));
        assert!(server.first_line.contains("writable") && server.first_line.contains(iface), "{}", server.first_line);
        let mut c = Client::go(&server, "iolab", structured);
        assert_eq!(c.size, 4 << 20);
        assert_eq!(c.flags & FLAG_READ_ONLY, 0);
        assert!(c.flags & FLAG_SEND_FLUSH != 0 && c.flags & FLAG_SEND_TRIM != 0, "flags {:#x}", c.flags);
        // Several of the server's 128 KiB chunks, not starting at a chunk.
        let data = pattern(300 << 10, 99);
        c.cmd(CMD_WRITE, 8192, data.len() as u32, &data).unwrap();
        assert_eq!(c.cmd(CMD_READ, 8192, data.len() as u32, &[]).unwrap(), data, "{iface}: read back");
        c.cmd(CMD_FLUSH, 0, 0, &[]).unwrap();
        c.cmd(CMD_TRIM, 1 << 20, 64 << 10, &[]).unwrap();
        assert_eq!(c.cmd(CMD_READ, 1 << 20, 4096, &[]).unwrap(), vec![0u8; 4096], "{iface}: a trimmed range of a file reads zeroes");
        // Out of range, and not a multiple of the O_DIRECT block.
        assert_eq!(c.cmd(CMD_READ, 4 << 20, 4096, &[]), Err(EINVAL));
        assert_eq!(c.cmd(CMD_READ, 100, 4096, &[]), Err(EINVAL));
        c.cmd(CMD_DISC, 0, 0, &[]).unwrap();
        // The bytes are on the file, where the client put them.
        let on_disk = std::fs::read(&img).unwrap();
        assert_eq!(&on_disk[8192..8192 + data.len()], &data[..], "{iface}: the file holds what was written");
        assert_eq!(&on_disk[..8192], &pattern(4 << 20, 7)[..8192], "{iface}: nothing else changed");
        let (code, err) = server.stop();
        assert_eq!(code, 0, "{iface}: {err}");
        let s = summary(&json);
        assert_eq!(s["connections"], 1, "{s:#}");
        assert_eq!(s["requests"]["write"], 1, "{s:#}");
        assert_eq!(s["requests"]["read"], 4, "{s:#}");
        assert_eq!(s["requests"]["flush"], 1);
        assert_eq!(s["requests"]["trim"], 1);
        assert_eq!(s["requests"]["errors"], 2);
        assert_eq!(s["requests"]["bytes_written"], 300 << 10);
        assert!(s["cpu_us_per_request"].as_f64().is_some_and(|v| v > 0.0), "CPU per request measured: {s:#}");
    }
}

#[test]
fn serve_two_connections_see_each_others_writes() {
    let dir = tempdir();
    let img = target_file(dir.path(), 2 << 20);
    let json = dir.path().join("summary.json");
    let server = Server::start(&img, &["-i", "io_uring", "--destructive", "--connections", "2", "--json", json.to_str().unwrap()], &[])
        .unwrap_or_else(|r| panic!("{}", r.describe()));
    let mut a = Client::go(&server, "iolab", true);
    let mut b = Client::export_name(&server, "");
    assert_eq!(b.size, 2 << 20);
    let data = pattern(64 << 10, 3);
    a.cmd(CMD_WRITE, 0, data.len() as u32, &data).unwrap();
    a.cmd(CMD_FLUSH, 0, 0, &[]).unwrap();
    assert_eq!(b.cmd(CMD_READ, 0, data.len() as u32, &[]).unwrap(), data, "the second connection reads the first's write");
    // A third connection while two are served is closed at once.
    let mut third = server.connect();
    let mut buf = [0u8; 1];
    assert!(matches!(third.read(&mut buf), Ok(0) | Err(_)), "a third connection was served");
    a.cmd(CMD_DISC, 0, 0, &[]).unwrap();
    b.cmd(CMD_DISC, 0, 0, &[]).unwrap();
    let (code, err) = server.stop();
    assert_eq!(code, 0, "{err}");
    let s = summary(&json);
    assert_eq!(s["connections"], 2, "{s:#}");
    assert_eq!(s["connections_refused"], 1, "{s:#}");
}

#[test]
fn serve_options_list_info_unknown_unsupported_abort() {
    let dir = tempdir();
    let img = target_file(dir.path(), 1 << 20);
    let server = Server::start(&img, &["-i", "psync", "--export", "disk0"], &[]).unwrap_or_else(|r| panic!("{}", r.describe()));
    let mut s = server.connect();
    handshake(&mut s);
    send_option(&mut s, OPT_LIST, &[]);
    let (kind, data) = option_reply(&mut s, OPT_LIST);
    assert_eq!(kind, REP_SERVER);
    assert_eq!(data, [&[0u8, 0, 0, 5][..], b"disk0"].concat());
    assert_eq!(option_reply(&mut s, OPT_LIST).0, REP_ACK);
    send_option(&mut s, OPT_INFO, &info_data("nope", &[]));
    assert_eq!(option_reply(&mut s, OPT_INFO).0, REP_ERR_UNKNOWN);
    send_option(&mut s, OPT_INFO, &info_data("disk0", &[1]));
    let (kind, data) = option_reply(&mut s, OPT_INFO);
    assert_eq!((kind, data.len()), (REP_INFO, 12));
    assert_eq!(u64::from_be_bytes(data[2..10].try_into().unwrap()), 1 << 20);
    assert_eq!(option_reply(&mut s, OPT_INFO), (REP_INFO, [&[0u8, 1][..], b"disk0"].concat()));
    assert_eq!(option_reply(&mut s, OPT_INFO).0, REP_ACK);
    send_option(&mut s, 99, &[]);
    assert_eq!(option_reply(&mut s, 99).0, REP_ERR_UNSUP);
    send_option(&mut s, OPT_ABORT, &[]);
    assert_eq!(option_reply(&mut s, OPT_ABORT).0, REP_ACK);
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "the server closes after NBD_OPT_ABORT");
    let (code, err) = server.stop();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn serve_read_only_export_refuses_writes_and_trims() {
    let dir = tempdir();
    let img = target_file(dir.path(), 1 << 20);
    let before = std::fs::read(&img).unwrap();
    let server = Server::start(&img, &["-i", "io_uring"], &[]).unwrap_or_else(|r| panic!("{}", r.describe()));
    assert!(server.first_line.contains("read-only"), "{}", server.first_line);
    for structured in [true, false] {
        let mut c = Client::go(&server, "", structured);
        assert!(c.flags & FLAG_READ_ONLY != 0, "flags {:#x}", c.flags);
        assert_eq!(c.cmd(CMD_WRITE, 0, 4096, &[1u8; 4096]), Err(EPERM));
        assert_eq!(c.cmd(CMD_TRIM, 0, 4096, &[]), Err(EPERM));
        assert_eq!(c.cmd(CMD_READ, 4096, 4096, &[]).unwrap(), &before[4096..8192]);
        c.cmd(CMD_DISC, 0, 0, &[]).unwrap();
    }
    let (code, err) = server.stop();
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(&img).unwrap() == before, "a read-only export changed the file");
}

#[test]
fn serve_bad_input_is_one_line_before_anything_changes() {
    let dir = tempdir();
    let img = target_file(dir.path(), 1 << 20);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = holder.local_addr().unwrap().to_string();
    let img_s = img.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["serve", img_s, "--listen", &busy], "cannot listen on"),
        (vec!["serve", img_s, "--listen", "localhost"], "not an address and port"),
        (vec!["serve", img_s, "--listen", "0.0.0.0:0"], "--listen-any"),
        (vec!["serve", img_s, "-i", "libaio", "--listen", "127.0.0.1:0"], "through io_uring, psync, vfio-nvme"),
        (vec!["serve", img_s, "--connections", "0", "--listen", "127.0.0.1:0"], "--connections"),
        (vec!["serve", "/nonexistent/x", "--listen", "127.0.0.1:0"], "does not exist"),
    ];
    for (args, want) in cases {
        let r = iolab(&args);
        let line = r.assert_usage_error();
        assert!(line.contains(want), "{want:?} not in: {}", r.describe());
        assert!(r.stdout.is_empty(), "{}", r.describe());
    }
    assert_eq!(std::fs::read(&img).unwrap(), pattern(1 << 20, 7));
}

/// A loop device over a file of `size` bytes, detached on drop.
struct Loop(String);
impl Loop {
    fn attach(backing: &Path) -> Option<Loop> {
        let out = Command::new("losetup").args(["-f", "--show"]).arg(backing).output().ok()?;
        out.status.success().then(|| Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }
}
impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

fn loops_usable(test: &str) -> bool {
    if !is_root() || !Path::new("/dev/loop-control").exists() {
        skip(test, "needs root and loop devices");
        return false;
    }
    true
}

#[test]
fn serve_mounted_device_is_refused_and_a_blank_one_needs_destructive() {
    let test = "serve_mounted_device_is_refused_and_a_blank_one_needs_destructive";
    if !loops_usable(test) {
        return;
    }
    let _g = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let img = zero_file(dir.path(), "ext4.img", 16 << 20);
    let mkfs = Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img).output();
    if !mkfs.is_ok_and(|o| o.status.success()) {
        skip(test, "mkfs.ext4 is not usable here");
        return;
    }
    let Some(lp) = Loop::attach(&img) else {
        skip(test, "losetup failed");
        return;
    };
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = Command::new("mount").args(["-o", "ro", &lp.0]).arg(&mnt).output().unwrap();
    if !m.status.success() {
        skip(test, &format!("cannot mount ext4: {}", String::from_utf8_lossy(&m.stderr).trim()));
        return;
    }
    let r = iolab(&["serve", &lp.0, "--destructive", "--listen", "127.0.0.1:0"]);
    let _ = Command::new("umount").arg(&mnt).status();
    let line = r.assert_usage_error();
    assert!(line.contains("mounted"), "{}", r.describe());
}

#[test]
fn serve_kill_9_leaves_nothing_behind() {
    let test = "serve_kill_9_leaves_nothing_behind";
    if !loops_usable(test) {
        return;
    }
    let _g = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempdir();
    let img = zero_file(dir.path(), "blank.img", 8 << 20);
    let Some(lp) = Loop::attach(&img) else {
        skip(test, "losetup failed");
        return;
    };
    let journal = dir.path().join("journal.json");
    let dev = PathBuf::from(&lp.0);
    let mut server = Server::start(&dev, &["-i", "io_uring", "--destructive"], &[("IOLAB_JOURNAL", &journal)])
        .unwrap_or_else(|r| panic!("{}", r.describe()));
    let s = &mut server;
    let mut c = Client::go(s, "iolab", true);
    let data = pattern(128 << 10, 5);
    c.cmd(CMD_WRITE, 0, data.len() as u32, &data).unwrap();
    let mut child = s.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // The device is free again (nothing holds it open exclusively) and nothing is journaled.
    let excl = std::fs::OpenOptions::new().read(true).custom_flags_excl().open(&dev);
    assert!(excl.is_ok(), "{} is still held: {excl:?}", dev.display());
    let out = Command::new(BIN).arg("restore").env("IOLAB_JOURNAL", &journal).output().unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to restore"), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(&std::fs::read(&img).unwrap()[..data.len()], &data[..], "the write was on the device before the kill");
}

trait Excl {
    fn custom_flags_excl(&mut self) -> &mut Self;
}
impl Excl for std::fs::OpenOptions {
    fn custom_flags_excl(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_EXCL)
    }
}

#[test]
fn nbd_client_without_the_kernels_nbd_is_one_line() {
    if Path::new("/sys/module/nbd").exists() {
        skip("nbd_client_without_the_kernels_nbd_is_one_line", "this kernel has nbd (the rig's nbd.sh drives it)");
        return;
    }
    let r = iolab(&["nbd", "connect", "127.0.0.1:10809"]);
    let line = r.assert_usage_error();
    assert!(line.contains("no NBD client"), "{}", r.describe());
    let r = iolab(&["nbd", "connect", "nowhere"]);
    assert!(r.assert_usage_error().contains("not an address and port"), "{}", r.describe());
    let r = iolab(&["nbd", "disconnect", "/dev/sda"]);
    assert!(r.assert_usage_error().contains("not an NBD device"), "{}", r.describe());
}

/// A suite killed while S4.7's client file system was mounted: the mount is journaled with the
/// NBD connection (`mounted`), and `iolab restore` unmounts it (detached at once) before it
/// disconnects the device. Here a tmpfs stands in for the client's ext4 (this kernel may have no
/// nbd: the disconnect is then said not done, in its line).
#[test]
fn restore_unmounts_what_a_killed_served_part_mounted() {
    let test = "restore_unmounts_what_a_killed_served_part_mounted";
    let dir = tempdir();
    let mnt = dir.path().join("client");
    std::fs::create_dir(&mnt).unwrap();
    let mounted =
        |p: &Path| std::fs::read_to_string("/proc/mounts").unwrap().lines().any(|l| l.split(' ').nth(1) == Some(&*p.to_string_lossy()));
    let ok = Command::new("mount").args(["-t", "tmpfs", "tmpfs"]).arg(&mnt).status().is_ok_and(|s| s.success());
    if !ok || !mounted(&mnt) {
        skip(test, "cannot mount a tmpfs here");
        return;
    }
    // An iolab that is gone: a child that has ended.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let journal = dir.path().join("journal.json");
    let entry = serde_json::json!([{
        "index": 7,
        "server": "127.0.0.1:10809",
        "owner": {"pid": pid, "started_at": 1, "command": "iolab suite run S4 --part S4.7"},
        "mounted": mnt.display().to_string(),
    }]);
    std::fs::write(dir.path().join("journal.json.nbd"), entry.to_string()).unwrap();
    let out = Command::new(BIN).arg("restore").env("IOLAB_JOURNAL", &journal).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let still = mounted(&mnt);
    if still {
        let _ = Command::new("umount").arg("-l").arg(&mnt).status();
    }
    assert!(!still, "{} is still mounted: {}", mnt.display(), said(&out));
    assert!(stdout.contains(&format!("unmounted {} (/dev/nbd7, mounted by iolab pid {pid}", mnt.display())), "{}", said(&out));
    assert!(stdout.contains("/dev/nbd7"), "the device's own line: {}", said(&out));
    // Forgotten: a second restore has nothing of it.
    let again = Command::new(BIN).arg("restore").env("IOLAB_JOURNAL", &journal).output().unwrap();
    assert!(!String::from_utf8_lossy(&again.stdout).contains("nbd7"), "{}", said(&again));
}
