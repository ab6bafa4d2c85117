//! The NBD wire format (NetworkBlockDevice/nbd, doc/proto.md): the fixed newstyle handshake,
//! option haggling and the transmission phase's requests and replies (simple and structured),
//! as plain bytes in and out. No sockets here: `mod.rs` drives a connection with these.
//! Every number on the wire is big-endian.
use std::io::{self, Read, Write};

/// "NBDMAGIC", the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": newstyle negotiation, and the magic before every option the client sends.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// The magic before every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

/// Handshake flags (server).
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags.
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

/// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_DF: u16 = 1 << 7;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

/// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;

/// Option reply types.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;
pub const REP_ERR_SHUTDOWN: u32 = (1 << 31) + 7;

/// NBD_REP_INFO types.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

/// Commands.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
/// Command flags.
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_DF: u16 = 1 << 2;

/// Structured reply flags and types.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

/// Errors on the wire (the protocol's own numbers, which are Linux's).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const ENOMEM: u32 = 12;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// The largest option payload the server reads (the name is at most 4 KiB by the protocol).
pub const MAX_OPTION_LEN: u32 = 64 << 10;
/// The largest READ or WRITE the server takes, as its NBD_INFO_BLOCK_SIZE maximum (32 MiB is
/// what the protocol says a client may assume every server takes).
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// An errno as the protocol carries it: the values it names, EINVAL for the rest (proto.md:
/// "the server SHOULD map ... to EINVAL").
pub(crate) fn wire_errno(errno: i32) -> u32 {
    match errno as u32 {
        e @ (EPERM | EIO | ENOMEM | EINVAL | ENOSPC | EOVERFLOW | ENOTSUP | ESHUTDOWN) => e,
        e if e == libc::EOPNOTSUPP as u32 => ENOTSUP,
        e if e == libc::EROFS as u32 || e == libc::EACCES as u32 => EPERM,
        e if e == libc::EFBIG as u32 => ENOSPC,
        _ => EINVAL,
    }
}

/// The server's first message: the magic words and its handshake flags.
pub(crate) fn server_greeting() -> [u8; 18] {
    let mut b = [0u8; 18];
    b[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    b[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    b[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    b
}

/// One option the client sent: its number and data.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientOption {
    pub option: u32,
    pub data: Vec<u8>,
}

/// Why reading from the client stopped.
#[derive(Debug)]
pub enum WireError {
    /// The socket failed or closed.
    Io(io::Error),
    /// The client broke the protocol: what it sent, in words.
    Protocol(String),
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> WireError {
        WireError::Io(e)
    }
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            WireError::Io(e) => write!(f, "{e}"),
            WireError::Protocol(m) => f.write_str(m),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The client's flags, after the greeting. Err: a client without fixed newstyle, or with flags
/// this server does not know (proto.md: the server MUST close then).
pub(crate) fn read_client_flags(r: &mut impl Read) -> Result<u32, WireError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    let flags = u32::from_be_bytes(b);
    if flags & FLAG_C_FIXED_NEWSTYLE == 0 {
        return Err(WireError::Protocol("the client does not speak fixed newstyle negotiation".into()));
    }
    if flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(WireError::Protocol(format!("unknown client flags {flags:#x}")));
    }
    Ok(flags)
}

/// One option header and its data.
pub(crate) fn read_option(r: &mut impl Read) -> Result<ClientOption, WireError> {
    let mut h = [0u8; 16];
    r.read_exact(&mut h)?;
    if u64_at(&h, 0) != IHAVEOPT {
        return Err(WireError::Protocol(format!("an option without the IHAVEOPT magic ({:#x})", u64_at(&h, 0))));
    }
    let (option, len) = (u32_at(&h, 8), u32_at(&h, 12));
    if len > MAX_OPTION_LEN {
        return Err(WireError::Protocol(format!("option {option} carries {len} bytes, more than the {MAX_OPTION_LEN} this server reads")));
    }
    let mut data = vec![0u8; len as usize];
    r.read_exact(&mut data)?;
    Ok(ClientOption { option, data })
}

/// An option reply: header and data.
pub fn option_reply(option: u32, reply: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    b
}

/// NBD_REP_SERVER's data for one export.
pub(crate) fn server_entry(name: &str) -> Vec<u8> {
    let mut b = (name.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b
}

/// NBD_INFO_EXPORT: the size and the transmission flags.
pub(crate) fn info_export(size: u64, flags: u16) -> Vec<u8> {
    let mut b = INFO_EXPORT.to_be_bytes().to_vec();
    b.extend_from_slice(&size.to_be_bytes());
    b.extend_from_slice(&flags.to_be_bytes());
    b
}

/// NBD_INFO_NAME.
pub(crate) fn info_name(name: &str) -> Vec<u8> {
    let mut b = INFO_NAME.to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b
}

/// NBD_INFO_DESCRIPTION.
pub(crate) fn info_description(text: &str) -> Vec<u8> {
    let mut b = INFO_DESCRIPTION.to_be_bytes().to_vec();
    b.extend_from_slice(text.as_bytes());
    b
}

/// NBD_INFO_BLOCK_SIZE: minimum, preferred and maximum.
pub(crate) fn info_block_size(min: u32, preferred: u32, max: u32) -> Vec<u8> {
    let mut b = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
    for v in [min, preferred, max] {
        b.extend_from_slice(&v.to_be_bytes());
    }
    b
}

/// NBD_OPT_EXPORT_NAME's answer: the size, the flags and, unless the client said
/// NO_ZEROES, 124 bytes of zeroes.
pub(crate) fn export_name_reply(size: u64, flags: u16, no_zeroes: bool) -> Vec<u8> {
    let mut b = size.to_be_bytes().to_vec();
    b.extend_from_slice(&flags.to_be_bytes());
    if !no_zeroes {
        b.extend_from_slice(&[0u8; 124]);
    }
    b
}

/// NBD_OPT_INFO's and NBD_OPT_GO's data: the export's name and the information asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct InfoRequest {
    pub name: String,
    pub requests: Vec<u16>,
}

pub(crate) fn parse_info_request(data: &[u8]) -> Result<InfoRequest, String> {
    if data.len() < 6 {
        return Err(format!("{} bytes are too few for a name length and a request count", data.len()));
    }
    let n = u32_at(data, 0) as usize;
    if data.len() < 4 + n + 2 {
        return Err(format!("the name's length {n} runs past the option's {} bytes", data.len()));
    }
    let name = String::from_utf8(data[4..4 + n].to_vec()).map_err(|_| "the export name is not UTF-8".to_string())?;
    let count = u16_at(data, 4 + n) as usize;
    let rest = &data[4 + n + 2..];
    if rest.len() != count * 2 {
        return Err(format!("{count} information requests need {} bytes, the option has {}", count * 2, rest.len()));
    }
    Ok(InfoRequest { name, requests: rest.chunks(2).map(|c| u16_at(c, 0)).collect() })
}

/// One request of the transmission phase (the header; a WRITE's data follows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub kind: u16,
    pub cookie: u64,
    pub offset: u64,
    pub len: u32,
}

pub const REQUEST_LEN: usize = 28;

/// A request header from its 28 bytes.
pub(crate) fn parse_request(h: &[u8; REQUEST_LEN]) -> Result<Request, WireError> {
    let magic = u32_at(h, 0);
    if magic != REQUEST_MAGIC {
        return Err(WireError::Protocol(format!("a request without the request magic ({magic:#x})")));
    }
    Ok(Request { flags: u16_at(h, 4), kind: u16_at(h, 6), cookie: u64_at(h, 8), offset: u64_at(h, 16), len: u32_at(h, 24) })
}

/// A request header's bytes (for clients: the tests).
#[cfg(test)]
pub(crate) fn request_bytes(r: &Request) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&r.flags.to_be_bytes());
    b[6..8].copy_from_slice(&r.kind.to_be_bytes());
    b[8..16].copy_from_slice(&r.cookie.to_be_bytes());
    b[16..24].copy_from_slice(&r.offset.to_be_bytes());
    b[24..].copy_from_slice(&r.len.to_be_bytes());
    b
}

/// A simple reply's header (a successful READ's data follows it).
pub(crate) fn simple_reply(error: u32, cookie: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..].copy_from_slice(&cookie.to_be_bytes());
    b
}

/// A structured reply chunk's header, for `len` bytes of payload.
pub(crate) fn chunk_header(flags: u16, kind: u16, cookie: u64, len: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&cookie.to_be_bytes());
    b[16..].copy_from_slice(&len.to_be_bytes());
    b
}

/// An NBD_REPLY_TYPE_OFFSET_DATA chunk's header and offset, for `data_len` bytes of data after it.
pub(crate) fn offset_data_header(cookie: u64, offset: u64, data_len: u32, done: bool) -> [u8; 28] {
    let mut b = [0u8; 28];
    let flags = if done { REPLY_FLAG_DONE } else { 0 };
    b[..20].copy_from_slice(&chunk_header(flags, REPLY_TYPE_OFFSET_DATA, cookie, data_len + 8));
    b[20..].copy_from_slice(&offset.to_be_bytes());
    b
}

/// The final chunk of a successful request without data.
pub(crate) fn none_chunk(cookie: u64) -> [u8; 20] {
    chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_NONE, cookie, 0)
}

/// The final chunk of a failed request: NBD_REPLY_TYPE_ERROR with the message.
pub(crate) fn error_chunk(cookie: u64, error: u32, message: &str) -> Vec<u8> {
    let msg = &message.as_bytes()[..message.len().min(4096)];
    let mut b = chunk_header(REPLY_FLAG_DONE, REPLY_TYPE_ERROR, cookie, 6 + msg.len() as u32).to_vec();
    b.extend_from_slice(&error.to_be_bytes());
    b.extend_from_slice(&(msg.len() as u16).to_be_bytes());
    b.extend_from_slice(msg);
    b
}

/// Writes all of `parts` (one write call where the socket takes it). The slices live on the
/// stack, `N` of them (a reply is a header and at most its data): no allocation per reply.
pub fn send<const N: usize>(w: &mut impl Write, parts: &[&[u8]; N]) -> io::Result<()> {
    // Empty parts left out: a write of nothing would read as a client that stopped reading.
    let mut slices = [io::IoSlice::new(&[]); N];
    let mut k = 0;
    for p in parts.iter().filter(|p| !p.is_empty()) {
        slices[k] = io::IoSlice::new(p);
        k += 1;
    }
    let mut bufs = &mut slices[..k];
    while !bufs.is_empty() {
        let n = w.write_vectored(bufs)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "the client stopped reading"));
        }
        io::IoSlice::advance_slices(&mut bufs, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greeting_is_the_fixed_newstyle_bytes() {
        let g = server_greeting();
        assert_eq!(&g[..8], b"NBDMAGIC");
        assert_eq!(&g[8..16], b"IHAVEOPT");
        assert_eq!(&g[16..], &[0, 3]);
    }

    #[test]
    fn client_flags() {
        assert_eq!(read_client_flags(&mut &[0u8, 0, 0, 3][..]).unwrap(), 3);
        assert!(matches!(read_client_flags(&mut &[0u8, 0, 0, 0][..]), Err(WireError::Protocol(_))));
        assert!(matches!(read_client_flags(&mut &[0u8, 0, 0, 5][..]), Err(WireError::Protocol(_))));
        assert!(matches!(read_client_flags(&mut &[0u8, 0][..]), Err(WireError::Io(_))));
    }

    #[test]
    fn options_read_and_reply() {
        let mut b = IHAVEOPT.to_be_bytes().to_vec();
        b.extend_from_slice(&OPT_GO.to_be_bytes());
        b.extend_from_slice(&3u32.to_be_bytes());
        b.extend_from_slice(b"abc");
        assert_eq!(read_option(&mut &b[..]).unwrap(), ClientOption { option: OPT_GO, data: b"abc".to_vec() });
        b[0] = 0;
        assert!(matches!(read_option(&mut &b[..]), Err(WireError::Protocol(_))));
        let mut big = IHAVEOPT.to_be_bytes().to_vec();
        big.extend_from_slice(&OPT_LIST.to_be_bytes());
        big.extend_from_slice(&(MAX_OPTION_LEN + 1).to_be_bytes());
        assert!(matches!(read_option(&mut &big[..]), Err(WireError::Protocol(m)) if m.contains("more than")));
        let r = option_reply(OPT_LIST, REP_SERVER, &server_entry("x"));
        assert_eq!(&r[..8], &[0, 3, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9]);
        assert_eq!(&r[8..12], &[0, 0, 0, 3]);
        assert_eq!(&r[12..16], &[0, 0, 0, 2]);
        assert_eq!(&r[16..20], &[0, 0, 0, 5]);
        assert_eq!(&r[20..], &[0, 0, 0, 1, b'x']);
    }

    #[test]
    fn info_requests_parse_and_refuse() {
        let mut d = 4u32.to_be_bytes().to_vec();
        d.extend_from_slice(b"disk");
        d.extend_from_slice(&2u16.to_be_bytes());
        d.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        d.extend_from_slice(&INFO_NAME.to_be_bytes());
        assert_eq!(parse_info_request(&d).unwrap(), InfoRequest { name: "disk".into(), requests: vec![3, 1] });
        assert!(parse_info_request(&d[..d.len() - 1]).is_err());
        assert!(parse_info_request(&[0, 0, 0, 9, 0, 0]).is_err());
        assert!(parse_info_request(&[0, 0, 0]).is_err());
        let mut empty = 0u32.to_be_bytes().to_vec();
        empty.extend_from_slice(&0u16.to_be_bytes());
        assert_eq!(parse_info_request(&empty).unwrap(), InfoRequest { name: String::new(), requests: vec![] });
    }

    #[test]
    fn info_replies() {
        assert_eq!(info_export(0x1000, 0x21), vec![0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x21]);
        assert_eq!(info_block_size(512, 4096, 1 << 25), vec![0, 3, 0, 0, 2, 0, 0, 0, 0x10, 0, 2, 0, 0, 0]);
        assert_eq!(info_name("a"), vec![0, 1, b'a']);
        assert_eq!(export_name_reply(1, 1, true).len(), 10);
        assert_eq!(export_name_reply(1, 1, false).len(), 134);
    }

    #[test]
    fn requests_round_trip() {
        let r = Request { flags: CMD_FLAG_FUA, kind: CMD_WRITE, cookie: 0xdead_beef, offset: 1 << 40, len: 4096 };
        let b = request_bytes(&r);
        assert_eq!(&b[..4], &[0x25, 0x60, 0x95, 0x13]);
        assert_eq!(parse_request(&b).unwrap(), r);
        let mut bad = b;
        bad[0] = 0;
        assert!(parse_request(&bad).unwrap_err().to_string().contains("magic"));
    }

    #[test]
    fn replies_are_byte_exact() {
        assert_eq!(simple_reply(EIO, 7), [0x67, 0x44, 0x66, 0x98, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7]);
        assert_eq!(none_chunk(7), [0x66, 0x8e, 0x33, 0xef, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0]);
        let d = offset_data_header(7, 512, 4096, true);
        assert_eq!(&d[4..8], &[0, 1, 0, 1]);
        assert_eq!(&d[16..20], &(4096u32 + 8).to_be_bytes());
        assert_eq!(&d[20..], &512u64.to_be_bytes());
        let e = error_chunk(7, EPERM, "ro");
        assert_eq!(&e[4..8], &[0, 1, 0x80, 1]);
        assert_eq!(&e[16..20], &[0, 0, 0, 8]);
        assert_eq!(&e[20..], &[0, 0, 0, 1, 0, 2, b'r', b'o']);
    }

    #[test]
    fn errnos_on_the_wire() {
        assert_eq!(wire_errno(libc::EIO), EIO);
        assert_eq!(wire_errno(libc::EROFS), EPERM);
        assert_eq!(wire_errno(libc::EOPNOTSUPP), ENOTSUP);
        assert_eq!(wire_errno(libc::EBADF), EINVAL);
    }

    #[test]
    fn send_writes_every_part() {
        let mut out = Vec::new();
        send(&mut out, &[b"ab", b"", b"cde"]).unwrap();
        assert_eq!(out, b"abcde");
    }
}
