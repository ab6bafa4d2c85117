//! The kernel's NBD client (`nbd.ko`, `/dev/nbdN`) driven by iolab: the negotiation done here in
//! user space (NBD_OPT_GO over each socket), then the sockets handed to the kernel with generic
//! netlink's `NBD_CMD_CONNECT` (include/uapi/linux/nbd-netlink.h), and `NBD_CMD_DISCONNECT` to
//! let go. Plain libc sockets, no crate.
//!
//! A connected device is journaled before it is connected (its index once the kernel gave it):
//! `iolab restore` disconnects what an iolab that is no longer alive left connected.
use super::{proto, ServeError};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;

const NBD_CMD_CONNECT: u8 = 1;
const NBD_CMD_DISCONNECT: u8 = 2;
const NBD_ATTR_INDEX: u16 = 1;
const NBD_ATTR_SIZE_BYTES: u16 = 2;
const NBD_ATTR_BLOCK_SIZE_BYTES: u16 = 3;
const NBD_ATTR_TIMEOUT: u16 = 4;
const NBD_ATTR_SERVER_FLAGS: u16 = 5;
const NBD_ATTR_SOCKETS: u16 = 7;
const NBD_SOCK_ITEM: u16 = 1;
const NBD_SOCK_FD: u16 = 1;
const NBD_GENL_VERSION: u8 = 1;

/// One generic netlink socket.
struct Genl {
    fd: OwnedFd,
    seq: u32,
}

/// An attribute: type and payload.
fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(4 + payload.len() + 3);
    b.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(payload);
    while b.len() % 4 != 0 {
        b.push(0);
    }
    b
}

/// The attributes of a message's payload after `skip` bytes: (type without flags, payload).
fn attrs(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let kind = u16::from_ne_bytes([b[2], b[3]]) & !NLA_F_NESTED;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((kind, b[4..len].to_vec()));
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
    out
}

impl Genl {
    fn open() -> Result<Genl, ServeError> {
        // SAFETY: plain socket creation; the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_GENERIC) };
        if fd < 0 {
            return Err(ServeError::Failed(format!("cannot open a generic netlink socket: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: fd was just created and is ours.
        Ok(Genl { fd: unsafe { OwnedFd::from_raw_fd(fd) }, seq: 1 })
    }

    /// Sends one request and reads every reply up to the ACK: the payloads (after the genl
    /// header) of the data messages, or the kernel's errno.
    fn request(&mut self, family: u16, cmd: u8, version: u8, body: &[u8]) -> Result<Vec<Vec<u8>>, i32> {
        self.seq += 1;
        let mut m = Vec::with_capacity(20 + body.len());
        m.extend_from_slice(&((20 + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&family.to_ne_bytes());
        m.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        m.extend_from_slice(&self.seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&[cmd, version, 0, 0]);
        m.extend_from_slice(body);
        // SAFETY: sockaddr_nl zeroed is the kernel's address.
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: m and to are live for the call.
        let n = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                m.as_ptr() as *const libc::c_void,
                m.len(),
                0,
                &to as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 32 << 10];
        loop {
            // SAFETY: buf is writable for its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
            if n < 0 {
                return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
            }
            let mut b = &buf[..n as usize];
            while b.len() >= 16 {
                let len = u32::from_ne_bytes(b[..4].try_into().expect("4")) as usize;
                let kind = u16::from_ne_bytes([b[4], b[5]]);
                if len < 16 || len > b.len() {
                    return Err(libc::EPROTO);
                }
                match kind {
                    NLMSG_ERROR => {
                        let errno = -i32::from_ne_bytes(b[16..20].try_into().expect("4"));
                        return if errno == 0 { Ok(out) } else { Err(errno) };
                    }
                    NLMSG_DONE => return Ok(out),
                    _ if len >= 20 => out.push(b[20..len].to_vec()),
                    _ => {}
                }
                b = &b[len.next_multiple_of(4).min(b.len())..];
            }
        }
    }

    /// The nbd family's id, or why there is none.
    fn nbd_family(&mut self) -> Result<u16, ServeError> {
        let body = attr(CTRL_ATTR_FAMILY_NAME, b"nbd\0");
        match self.request(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 1, &body) {
            Ok(msgs) => msgs
                .iter()
                .flat_map(|m| attrs(m))
                .find(|(k, v)| *k == CTRL_ATTR_FAMILY_ID && v.len() >= 2)
                .map(|(_, v)| u16::from_ne_bytes([v[0], v[1]]))
                .ok_or_else(|| ServeError::Failed("the kernel answered without the nbd family's id".to_string())),
            Err(libc::ENOENT) => Err(ServeError::Unsupported(no_nbd())),
            Err(e) => Err(ServeError::Failed(format!("cannot look up the nbd netlink family: {}", std::io::Error::from_raw_os_error(e)))),
        }
    }
}

/// The line for a kernel without the NBD client.
fn no_nbd() -> String {
    "this kernel has no NBD client (no nbd netlink family: `modprobe nbd`, or a kernel built with CONFIG_BLK_DEV_NBD)".into()
}

/// Whether this kernel has the NBD client; Err (unsupported here) says why not.
pub fn available() -> Result<(), ServeError> {
    // Asked before anything is done: whatever keeps netlink from answering, this kernel's NBD
    // client cannot be driven here.
    Genl::open().and_then(|mut g| g.nbd_family()).map(drop).map_err(|e| match e {
        ServeError::Failed(why) => ServeError::Unsupported(why),
        other => other,
    })
}

/// What a server said of its export.
#[derive(Clone, Copy, Debug)]
pub struct Negotiated {
    pub size: u64,
    pub flags: u16,
}

/// Fixed newstyle negotiation up to NBD_OPT_GO on one socket (no structured replies: the
/// kernel's client takes simple replies only).
/// Every error is the server's answer to what was asked: bad input.
pub(crate) fn negotiate(s: &mut TcpStream, export: &str) -> Result<Negotiated, ServeError> {
    use proto::*;
    let io = |e: std::io::Error| ServeError::Invalid(format!("the server closed the negotiation: {e}"));
    let mut g = [0u8; 18];
    s.read_exact(&mut g).map_err(io)?;
    if g[..8] != NBDMAGIC.to_be_bytes() || g[8..16] != IHAVEOPT.to_be_bytes() {
        return Err(ServeError::Invalid("the server does not speak NBD's newstyle negotiation".into()));
    }
    let server = u16::from_be_bytes([g[16], g[17]]);
    if server & FLAG_FIXED_NEWSTYLE == 0 {
        return Err(ServeError::Invalid("the server does not speak fixed newstyle negotiation".into()));
    }
    let flags = FLAG_C_FIXED_NEWSTYLE | if server & FLAG_NO_ZEROES != 0 { FLAG_C_NO_ZEROES } else { 0 };
    let mut data = (export.len() as u32).to_be_bytes().to_vec();
    data.extend_from_slice(export.as_bytes());
    data.extend_from_slice(&0u16.to_be_bytes());
    let mut m = flags.to_be_bytes().to_vec();
    m.extend_from_slice(&IHAVEOPT.to_be_bytes());
    m.extend_from_slice(&OPT_GO.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(&data);
    s.write_all(&m).map_err(io)?;
    let mut got: Option<Negotiated> = None;
    loop {
        let mut h = [0u8; 20];
        s.read_exact(&mut h).map_err(io)?;
        let kind = u32::from_be_bytes(h[12..16].try_into().expect("4"));
        let len = u32::from_be_bytes(h[16..20].try_into().expect("4"));
        if u64::from_be_bytes(h[..8].try_into().expect("8")) != REPLY_MAGIC || len > MAX_OPTION_LEN {
            return Err(ServeError::Invalid("the server's option reply is malformed".into()));
        }
        let mut d = vec![0u8; len as usize];
        s.read_exact(&mut d).map_err(io)?;
        match kind {
            REP_ACK => {
                return got.ok_or_else(|| ServeError::Invalid("the server acknowledged NBD_OPT_GO without NBD_INFO_EXPORT".to_string()))
            }
            REP_INFO if d.len() >= 12 && d[..2] == INFO_EXPORT.to_be_bytes() => {
                got = Some(Negotiated {
                    size: u64::from_be_bytes(d[2..10].try_into().expect("8")),
                    flags: u16::from_be_bytes([d[10], d[11]]),
                })
            }
            REP_INFO => {}
            e if e & (1 << 31) != 0 => {
                return Err(ServeError::Invalid(format!(
                    "the server refused export '{export}' (reply {e:#x}): {}",
                    String::from_utf8_lossy(&d)
                )))
            }
            other => return Err(ServeError::Invalid(format!("the server answered NBD_OPT_GO with reply type {other}"))),
        }
    }
}

/// A device the kernel's client is connected with, as journaled.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Connection {
    /// /dev/nbdN's N; None until the kernel said which.
    pub index: Option<u32>,
    pub server: String,
    /// The iolab that connected it (its pid and start time, to tell it alive).
    pub owner: crate::settings::Holder,
    /// Where that iolab mounted the device's file system (a served suite part, S4.7):
    /// journaled before the mount, so `restore` unmounts it before it disconnects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mounted: Option<String>,
}

/// The journal of connected devices: beside the settings journal (`IOLAB_JOURNAL` or the
/// default), `<journal>.nbd`.
pub(crate) fn journal_path() -> PathBuf {
    let j = crate::settings::Settings::default_journal_path();
    let mut name = j.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "iolab-journal".into());
    name.push(".nbd");
    j.with_file_name(name)
}

fn load(path: &Path) -> Result<Vec<Connection>, ServeError> {
    match std::fs::read_to_string(path) {
        Ok(t) => serde_json::from_str(&t).map_err(|e| ServeError::Failed(format!("{} is damaged: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(ServeError::Failed(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Writes the journal durably (temporary file, fsync, rename), under its lock.
fn store(path: &Path, entries: &[Connection]) -> Result<(), ServeError> {
    let failed = |what: &Path, e: std::io::Error| ServeError::Failed(format!("cannot write {}: {e}", what.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServeError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    let tmp = path.with_extension("nbd.tmp");
    let text = serde_json::to_string_pretty(entries).map_err(|e| ServeError::Failed(e.to_string()))?;
    let mut f = std::fs::File::create(&tmp).map_err(|e| failed(&tmp, e))?;
    f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(|e| failed(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| failed(path, e))
}

/// `f` over the journal of connected devices, under its lock; Err: the journal failed (a
/// failed command, whatever was asked).
fn with_journal<T>(f: impl FnOnce(&mut Vec<Connection>) -> T) -> Result<T, ServeError> {
    with_journal_at(&journal_path(), f)
}

/// `with_journal` on the journal at `path`.
fn with_journal_at<T>(path: &Path, f: impl FnOnce(&mut Vec<Connection>) -> T) -> Result<T, ServeError> {
    // One read-modify-write at a time, machine-wide: an advisory lock on `<journal>.lock`.
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServeError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    let lock_path = path.with_extension("nbd.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&lock_path)
        .map_err(|e| ServeError::Failed(format!("cannot open {}: {e}", lock_path.display())))?;
    // SAFETY: flock on an open descriptor; released when the file closes.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(ServeError::Failed(format!("cannot lock {}: {}", lock_path.display(), std::io::Error::last_os_error())));
    }
    let mut entries = load(path)?;
    let out = f(&mut entries);
    store(path, &entries)?;
    Ok(out)
}

/// Connects the kernel's client to `server` with `connections` sockets, as /dev/nbd`index`
/// (None: the kernel picks a free one). Journaled first. Returns the index. Err: what was asked
/// is refused (bad input: the device in use, the server unreachable or refusing), or netlink,
/// the kernel or the journal failed (a failed command).
pub fn connect(server: SocketAddr, export: &str, index: Option<u32>, connections: u32, block_size: u64) -> Result<u32, ServeError> {
    let mut genl = Genl::open()?;
    let family = genl.nbd_family()?;
    if let Some(i) = index {
        if std::fs::read_to_string(format!("/sys/block/nbd{i}/pid")).is_ok() {
            return Err(ServeError::Invalid(format!("/dev/nbd{i} is already connected")));
        }
    }
    let mut socks = Vec::new();
    let mut first: Option<Negotiated> = None;
    for _ in 0..connections.max(1) {
        let mut s = TcpStream::connect_timeout(&server, std::time::Duration::from_secs(10))
            .map_err(|e| ServeError::Invalid(format!("cannot reach the NBD server at {server}: {e}")))?;
        let _ = s.set_nodelay(true);
        let n = negotiate(&mut s, export)?;
        first.get_or_insert(n);
        socks.push(s);
    }
    let n = first.expect("one connection at least");
    if n.flags & proto::FLAG_CAN_MULTI_CONN == 0 && socks.len() > 1 {
        return Err(ServeError::Invalid("the server does not allow several connections to one export (no NBD_FLAG_CAN_MULTI_CONN)".into()));
    }
    let me = Connection { index, server: server.to_string(), owner: crate::settings::Holder::us(), mounted: None };
    with_journal(|j| j.push(me.clone()))?;
    let mut items = Vec::new();
    for s in &socks {
        items.extend(attr(NBD_SOCK_ITEM | NLA_F_NESTED, &attr(NBD_SOCK_FD, &(s.as_raw_fd() as u32).to_ne_bytes())));
    }
    let mut body = Vec::new();
    if let Some(i) = index {
        body.extend(attr(NBD_ATTR_INDEX, &i.to_ne_bytes()));
    }
    body.extend(attr(NBD_ATTR_SIZE_BYTES, &n.size.to_ne_bytes()));
    body.extend(attr(NBD_ATTR_BLOCK_SIZE_BYTES, &block_size.to_ne_bytes()));
    body.extend(attr(NBD_ATTR_TIMEOUT, &30u64.to_ne_bytes()));
    body.extend(attr(NBD_ATTR_SERVER_FLAGS, &(n.flags as u64).to_ne_bytes()));
    body.extend(attr(NBD_ATTR_SOCKETS | NLA_F_NESTED, &items));
    let connected = genl.request(family, NBD_CMD_CONNECT, NBD_GENL_VERSION, &body);
    let forget = |j: &mut Vec<Connection>| j.retain(|c| c != &me);
    let msgs = match connected {
        Ok(m) => m,
        Err(e) => {
            with_journal(forget)?;
            // What was asked (a device, a size) the kernel will not take.
            return Err(ServeError::Invalid(format!("the kernel refused NBD_CMD_CONNECT: {}", std::io::Error::from_raw_os_error(e))));
        }
    };
    let got = msgs.iter().flat_map(|m| attrs(m)).find(|(k, v)| *k == NBD_ATTR_INDEX && v.len() >= 4);
    let Some(i) = got.map(|(_, v)| u32::from_ne_bytes(v[..4].try_into().expect("4"))).or(index) else {
        return Err(ServeError::Failed("the kernel connected a device without saying which".into()));
    };
    with_journal(|j| {
        if let Some(c) = j.iter_mut().find(|c| **c == me) {
            c.index = Some(i);
        }
    })?;
    // The kernel holds the sockets now; ours may close.
    drop(socks);
    Ok(i)
}

/// Disconnects /dev/nbd`index` and forgets it.
pub fn disconnect(index: u32) -> Result<(), ServeError> {
    let mut genl = Genl::open()?;
    let family = genl.nbd_family()?;
    let r = genl.request(family, NBD_CMD_DISCONNECT, NBD_GENL_VERSION, &attr(NBD_ATTR_INDEX, &index.to_ne_bytes()));
    with_journal(|j| j.retain(|c| c.index != Some(index)))?;
    r.map(|_| ()).map_err(|e| ServeError::Failed(format!("cannot disconnect /dev/nbd{index}: {}", std::io::Error::from_raw_os_error(e))))
}

/// Mounts /dev/nbd`index` (connected by this iolab) at `dir` as `fstype`, journaled first: a
/// `kill -9` leaves nothing `restore` cannot undo (it unmounts, then disconnects). Err: the
/// journal (a failed command) or the mount (the kernel's answer, a failed command).
pub(crate) fn mount(index: u32, dir: &Path, fstype: &str) -> Result<(), ServeError> {
    let shown = dir.display().to_string();
    let mine = |c: &Connection| c.index == Some(index) && c.owner.pid == crate::settings::Holder::us().pid;
    if !with_journal(|j| j.iter_mut().find(|c| mine(c)).map(|c| c.mounted = Some(shown.clone())).is_some())? {
        return Err(ServeError::Failed(format!("/dev/nbd{index} is not connected by this iolab: not mounting it")));
    }
    let c = |s: &str| std::ffi::CString::new(s).map_err(|_| ServeError::Invalid(format!("{s}: a NUL in the path")));
    let (dev, at, fs) = (c(&format!("/dev/nbd{index}"))?, c(&shown)?, c(fstype)?);
    // SAFETY: valid C strings; no data argument.
    if unsafe { libc::mount(dev.as_ptr(), at.as_ptr(), fs.as_ptr(), libc::MS_NOSUID | libc::MS_NODEV, std::ptr::null()) } != 0 {
        let e = std::io::Error::last_os_error();
        with_journal(|j| j.iter_mut().filter(|c| mine(c)).for_each(|c| c.mounted = None))?;
        return Err(ServeError::Failed(format!("cannot mount /dev/nbd{index} ({fstype}) at {shown}: {e}")));
    }
    Ok(())
}

/// Unmounts what [`mount`] mounted on /dev/nbd`index` and forgets the mount. A file system still
/// busy is detached (lazily unmounted) after a few tries.
pub(crate) fn unmount(index: u32, dir: &Path) -> Result<(), ServeError> {
    let at = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|_| ServeError::Invalid("a NUL in the path".into()))?;
    let mut tries = 0;
    loop {
        // SAFETY: a valid C string.
        if unsafe { libc::umount2(at.as_ptr(), 0) } == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() == Some(libc::EBUSY) && tries < 20 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            continue;
        }
        // SAFETY: as above.
        if e.raw_os_error() == Some(libc::EINVAL) || unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) } == 0 {
            break;
        }
        return Err(ServeError::Failed(format!("cannot unmount {}: {e}", dir.display())));
    }
    with_journal(|j| j.iter_mut().filter(|c| c.index == Some(index)).for_each(|c| c.mounted = None))
}

/// Disconnects every device an iolab that is no longer alive left connected (unmounting first
/// what it mounted on it): lines saying what was done.
pub fn restore() -> Result<Vec<String>, ServeError> {
    if !journal_path().exists() {
        return Ok(Vec::new());
    }
    let dead: Vec<Connection> = with_journal(|j| {
        let (dead, live): (Vec<_>, Vec<_>) = j.drain(..).partition(|c| matches!(c.owner.state(), crate::settings::Owner::Dead(_)));
        *j = live;
        dead
    })?;
    let mut lines = Vec::new();
    for c in dead {
        let Some(i) = c.index else {
            lines.push(format!("an NBD connection to {} was never made (its iolab died connecting)", c.server));
            continue;
        };
        if let Some(dir) = &c.mounted {
            // Detached at once: its server may be gone, and the file system's last writes with it.
            let at = std::ffi::CString::new(dir.as_str()).unwrap_or_default();
            // SAFETY: a valid C string.
            match unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) } {
                0 => lines.push(format!("unmounted {dir} (/dev/nbd{i}, mounted by {})", c.owner.describe())),
                _ => lines.push(format!("{dir}: {} (already unmounted?)", std::io::Error::last_os_error())),
            }
        }
        // Netlink failing is said for this device; the others (and what was unmounted) still are.
        let family = Genl::open().and_then(|mut g| g.nbd_family().map(|f| (g, f)));
        let Ok((mut genl, family)) = family else {
            lines.push(format!("/dev/nbd{i} not disconnected: {}", family.err().map(|e| e.to_string()).unwrap_or_default()));
            continue;
        };
        match genl.request(family, NBD_CMD_DISCONNECT, NBD_GENL_VERSION, &attr(NBD_ATTR_INDEX, &i.to_ne_bytes())) {
            Ok(_) => lines.push(format!("disconnected /dev/nbd{i} (from {}, left by {})", c.server, c.owner.describe())),
            Err(e) => lines.push(format!("/dev/nbd{i}: {} (already disconnected?)", std::io::Error::from_raw_os_error(e))),
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Kinded;

    /// A journal that cannot be written fails the command (exit 1), whatever was asked: `nbd
    /// connect` said it as bad input (exit 2).
    #[test]
    fn a_journal_that_cannot_be_written_is_a_failed_command() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = with_journal_at(&file.join("journal.nbd"), |j| j.len()).unwrap_err();
        assert_eq!(e.kind(), crate::failure::FailureKind::Failed, "{e}");
        assert_eq!(crate::failure::Failure::from(e).code(), 1);
        let damaged = dir.path().join("damaged.nbd");
        std::fs::write(&damaged, "not json").unwrap();
        let e = with_journal_at(&damaged, |j| j.len()).unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
        assert_eq!(e.kind(), crate::failure::FailureKind::Failed);
        assert_eq!(with_journal_at(&dir.path().join("new.nbd"), |j| j.len()).unwrap(), 0);
    }

    #[test]
    fn attributes_are_padded_and_read_back() {
        let a = attr(NBD_ATTR_INDEX, &7u32.to_ne_bytes());
        assert_eq!(a.len(), 8);
        let b = attr(CTRL_ATTR_FAMILY_NAME, b"nbd\0");
        assert_eq!(b.len(), 8);
        let odd = attr(9, &[1, 2, 3, 4, 5]);
        assert_eq!(odd.len(), 12);
        let nested = attr(NBD_ATTR_SOCKETS | NLA_F_NESTED, &attr(NBD_SOCK_ITEM | NLA_F_NESTED, &attr(NBD_SOCK_FD, &3u32.to_ne_bytes())));
        let all = [a, odd, nested].concat();
        let got = attrs(&all);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (NBD_ATTR_INDEX, 7u32.to_ne_bytes().to_vec()));
        assert_eq!(got[1], (9, vec![1, 2, 3, 4, 5]));
        assert_eq!(got[2].0, NBD_ATTR_SOCKETS);
        let inner = attrs(&got[2].1);
        assert_eq!(inner[0].0, NBD_SOCK_ITEM);
        assert_eq!(attrs(&inner[0].1), vec![(NBD_SOCK_FD, 3u32.to_ne_bytes().to_vec())]);
    }
}
