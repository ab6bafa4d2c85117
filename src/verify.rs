//! `--verify` block format. Every 512-byte sector carries a header naming its own byte offset
//! and a hash over a pseudo-random payload, so any block size that is a multiple of 512 can be
//! checked, misdirected writes (wrong offset) are caught, and torn or stale data fails the hash.
//!
//! Layout (little endian): magic u64 | offset u64 | seed u64 | hash u64 | 480 payload bytes.
pub const SECTOR: usize = 512;
const MAGIC: u64 = u64::from_le_bytes(*b"IOLABVF1");
const WORDS: usize = (SECTOR - 32) / 8;

#[derive(Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The sector was never written in iolab's verify format.
    NotVerifyData { offset: u64 },
    /// The sector says it belongs elsewhere: a misdirected write or read.
    WrongOffset { offset: u64, found: u64 },
    /// The payload does not match its hash: corruption, a torn or stale write.
    BadHash { offset: u64 },
    /// A byte differs from fio's verify_pattern.
    BadPattern { offset: u64 },
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            VerifyError::NotVerifyData { offset } => {
                write!(f, "sector at byte {offset} holds no iolab verify data (write it with --verify first)")
            }
            VerifyError::WrongOffset { offset, found } => write!(f, "sector at byte {offset} holds data written for byte {found}"),
            VerifyError::BadHash { offset } => write!(f, "sector at byte {offset} fails its checksum"),
            VerifyError::BadPattern { offset } => write!(f, "byte {offset} differs from the verify_pattern"),
        }
    }
}

#[inline(always)]
fn mix(h: u64, w: u64) -> u64 {
    (h ^ w).wrapping_mul(0x9E3779B97F4A7C15).rotate_left(31)
}

#[inline(always)]
fn word(buf: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap())
}

/// Fill `buf` (a whole number of sectors destined for byte `offset`) with verify data.
pub fn fill(buf: &mut [u8], offset: u64, seed: u64) {
    for (i, sector) in buf.chunks_exact_mut(SECTOR).enumerate() {
        let off = offset + (i * SECTOR) as u64;
        let s = seed ^ off.wrapping_mul(0xA24BAED4963EE407);
        let mut x = s;
        let mut h = mix(off, s);
        for w in 0..WORDS {
            // xorshift64*: cheap, and never all-zero for a non-zero start.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h = mix(h, x);
            sector[32 + w * 8..40 + w * 8].copy_from_slice(&x.to_le_bytes());
        }
        sector[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        sector[8..16].copy_from_slice(&off.to_le_bytes());
        sector[16..24].copy_from_slice(&s.to_le_bytes());
        sector[24..32].copy_from_slice(&h.to_le_bytes());
    }
}

/// Check `buf` read from byte `offset`.
pub fn check(buf: &[u8], offset: u64) -> Result<(), VerifyError> {
    for (i, sector) in buf.chunks_exact(SECTOR).enumerate() {
        let off = offset + (i * SECTOR) as u64;
        if word(sector, 0) != MAGIC {
            return Err(VerifyError::NotVerifyData { offset: off });
        }
        let found = word(sector, 1);
        if found != off {
            return Err(VerifyError::WrongOffset { offset: off, found });
        }
        let mut h = mix(off, word(sector, 2));
        for w in 0..WORDS {
            h = mix(h, word(sector, 4 + w));
        }
        if h != word(sector, 3) {
            return Err(VerifyError::BadHash { offset: off });
        }
    }
    Ok(())
}

/// fio's verify header's magic (`FIO_HDR_MAGIC`).
const FIO_MAGIC: u16 = 0xacca;
/// fio 3.33's `struct verify_header`: magic u16, verify_type u16, len u32, rand_seed u64,
/// offset u64, time_sec u32, time_nsec u32, thread u16, numberio u16, crc32 u32 (crc32c of the
/// 36 bytes before it).
pub const FIO_HEADER: usize = 40;
/// fio's `VERIFY_HDR_ONLY` (verify=meta) and `VERIFY_PATTERN_NO_HDR` (verify=pattern).
const FIO_HDR_ONLY: u16 = 1;
/// The longest verify_pattern iolab takes, bytes.
pub const MAX_PATTERN: usize = 32;

/// fio's verify with a pattern, as a job asks for it (`verify=meta` or `verify=pattern`,
/// `verify_pattern`, `verify_interval`, `do_verify`): every `interval` bytes of a written block
/// hold fio's verify header (with `header`: its magic, type, length, the interval's own byte
/// offset, the thread and the write's number, and a crc32c over them) followed by the pattern,
/// or the pattern alone; a read checks each interval's header and pattern. Written in fio's
/// words (`verify=meta verify_pattern=0xaa555aa5 verify_interval=512 do_verify=0`) in the stored
/// spec and a plan's `[options] verify_fio`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FioForm {
    /// fio's header at the start of each interval (verify=meta); false: the pattern alone
    /// (verify=pattern).
    pub header: bool,
    pattern: [u8; MAX_PATTERN],
    /// The pattern's length (0: none: the header alone is checked, the data is iolab's).
    plen: u8,
    /// Bytes per header (verify_interval); 0: the block size.
    pub interval: u32,
    /// Written blocks are read back after the run (do_verify=1, fio's default).
    pub read_back: bool,
}

impl FioForm {
    /// The pattern, if one was given.
    pub fn pattern(&self) -> &[u8] {
        &self.pattern[..self.plen as usize]
    }

    /// Sets one of fio's words from its value.
    pub fn set(&mut self, key: &str, v: &str) -> Result<(), String> {
        let v = v.trim();
        match key {
            "verify" => {
                self.header = match v {
                    "meta" => true,
                    "pattern" => false,
                    o => {
                        return Err(format!(
                    "'{o}': iolab checks fio's pattern with verify=meta (its header and the pattern) or verify=pattern (the pattern alone)"
                ))
                    }
                }
            }
            "verify_pattern" => {
                let bytes = parse_pattern(v)?;
                self.pattern = [0; MAX_PATTERN];
                self.pattern[..bytes.len()].copy_from_slice(&bytes);
                self.plen = bytes.len() as u8;
            }
            "verify_interval" => {
                self.interval = v.parse().map_err(|_| format!("'{v}' is not a whole number of bytes"))?;
            }
            "do_verify" => {
                self.read_back = match v {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    o => return Err(format!("'{o}' is not 0 or 1")),
                }
            }
            o => return Err(format!("'{o}' is not a word of fio's verify (verify, verify_pattern, verify_interval, do_verify)")),
        }
        Ok(())
    }

    /// What is wrong with it for blocks of `bs` bytes (every block size of the job), in one line.
    pub fn check_for(&self, bs: u64) -> Result<(), String> {
        if !self.header && self.plen == 0 {
            return Err("verify=pattern checks a pattern: give verify_pattern".into());
        }
        let interval = if self.interval == 0 { bs } else { self.interval as u64 };
        if interval == 0 || !bs.is_multiple_of(interval) {
            return Err(format!("verify_interval {interval} does not divide the block size {bs}"));
        }
        if self.header && interval <= FIO_HEADER as u64 {
            return Err(format!("verify_interval {interval} leaves no room after fio's {FIO_HEADER}-byte header"));
        }
        Ok(())
    }

    fn interval_for(&self, len: usize) -> usize {
        if self.interval == 0 {
            len
        } else {
            self.interval as usize
        }
    }

    /// Fill `buf` (a block for byte `offset`) as fio does: the pattern from the block's start,
    /// then each interval's header over it; `numberio`: the write's number, `thread`: the
    /// writer's. Without a pattern the data is left as it is (iolab's random bytes).
    pub fn fill(&self, buf: &mut [u8], offset: u64, numberio: u64, thread: u16) {
        let p = self.pattern();
        if !p.is_empty() {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = p[i % p.len()];
            }
        }
        if !self.header {
            return;
        }
        let interval = self.interval_for(buf.len());
        for (n, chunk) in buf.chunks_exact_mut(interval).enumerate() {
            let h = &mut chunk[..FIO_HEADER];
            h[0..2].copy_from_slice(&FIO_MAGIC.to_le_bytes());
            h[2..4].copy_from_slice(&FIO_HDR_ONLY.to_le_bytes());
            h[4..8].copy_from_slice(&(interval as u32).to_le_bytes());
            h[8..16].fill(0); // rand_seed: no random payload
            h[16..24].copy_from_slice(&(offset + (n * interval) as u64).to_le_bytes());
            h[24..32].fill(0); // time: not recorded
            h[32..34].copy_from_slice(&thread.to_le_bytes());
            h[34..36].copy_from_slice(&(numberio as u16).to_le_bytes());
            let crc = crc32c(&h[..36]);
            h[36..40].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// Check `buf` read from byte `offset`: each interval's header (magic, length, its own
    /// offset, crc) and the pattern after it.
    pub fn check(&self, buf: &[u8], offset: u64) -> Result<(), VerifyError> {
        let interval = self.interval_for(buf.len());
        let p = self.pattern();
        for (n, chunk) in buf.chunks_exact(interval).enumerate() {
            let off = offset + (n * interval) as u64;
            let from = if self.header {
                let h = &chunk[..FIO_HEADER];
                let u16_at = |i: usize| u16::from_le_bytes([h[i], h[i + 1]]);
                let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
                if u16_at(0) != FIO_MAGIC || u32_at(4) != interval as u32 {
                    return Err(VerifyError::NotVerifyData { offset: off });
                }
                let found = u64::from_le_bytes(h[16..24].try_into().unwrap());
                if found != off {
                    return Err(VerifyError::WrongOffset { offset: off, found });
                }
                if crc32c(&h[..36]) != u32_at(36) {
                    return Err(VerifyError::BadHash { offset: off });
                }
                FIO_HEADER
            } else {
                0
            };
            if !p.is_empty() {
                let base = n * interval;
                if let Some(i) = (from..interval).find(|&i| chunk[i] != p[(base + i) % p.len()]) {
                    return Err(VerifyError::BadPattern { offset: off + i as u64 });
                }
            }
        }
        Ok(())
    }
}

impl Default for FioForm {
    fn default() -> FioForm {
        FioForm { header: true, pattern: [0; MAX_PATTERN], plen: 0, interval: 0, read_back: true }
    }
}

/// fio's verify_pattern: `0x` and hexadecimal digits (the bytes in the order written), or a
/// quoted string; up to [`MAX_PATTERN`] bytes.
fn parse_pattern(v: &str) -> Result<Vec<u8>, String> {
    let bytes = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        let hex = if hex.len() % 2 == 1 { format!("0{hex}") } else { hex.to_string() };
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| format!("'{v}' is not a hexadecimal pattern"))?
    } else if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        v.as_bytes()[1..v.len() - 1].to_vec()
    } else {
        return Err(format!(
            "'{v}': iolab takes a verify_pattern as 0x and hexadecimal digits, or a quoted string (not fio's numbers or formats)"
        ));
    };
    if bytes.is_empty() || bytes.len() > MAX_PATTERN {
        return Err(format!("'{v}': iolab takes a verify_pattern of 1 to {MAX_PATTERN} bytes"));
    }
    Ok(bytes)
}

impl std::fmt::Display for FioForm {
    /// fio's words: `verify=meta verify_pattern=0xaa555aa5 verify_interval=512 do_verify=0`.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "verify={}", if self.header { "meta" } else { "pattern" })?;
        if self.plen > 0 {
            let hex: String = self.pattern().iter().map(|b| format!("{b:02x}")).collect();
            write!(f, " verify_pattern=0x{hex}")?;
        }
        if self.interval > 0 {
            write!(f, " verify_interval={}", self.interval)?;
        }
        if !self.read_back {
            write!(f, " do_verify=0")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FioForm {
    type Err = String;
    fn from_str(s: &str) -> Result<FioForm, String> {
        let mut form = FioForm::default();
        for w in s.split_whitespace() {
            let (k, v) = w.split_once('=').ok_or_else(|| format!("'{w}' is not KEY=VALUE"))?;
            form.set(k, v).map_err(|e| format!("{k}: {e}"))?;
        }
        if !form.header && form.plen == 0 {
            return Err("verify=pattern checks a pattern: give verify_pattern".into());
        }
        Ok(form)
    }
}

impl serde::Serialize for FioForm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FioForm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FioForm, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How a run's blocks are written and checked: iolab's own sectors, or fio's form; `thread`
/// is the writer's number (fio's header names it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    #[default]
    Iolab,
    Fio(FioForm, u16),
}

impl Form {
    /// A job's form: fio's where it asks for it.
    pub fn of(fio: Option<FioForm>, thread: u16) -> Form {
        fio.map_or(Form::Iolab, |f| Form::Fio(f, thread))
    }

    /// Fill a block written to byte `offset`; `gen`: the thread's write count.
    #[inline]
    pub fn fill(&self, buf: &mut [u8], offset: u64, gen: u64) {
        match self {
            Form::Iolab => fill(buf, offset, gen),
            Form::Fio(f, thread) => f.fill(buf, offset, gen, *thread),
        }
    }

    /// Check a block read from byte `offset`.
    pub fn check(&self, buf: &[u8], offset: u64) -> Result<(), VerifyError> {
        match self {
            Form::Iolab => check(buf, offset),
            Form::Fio(f, _) => f.check(buf, offset),
        }
    }
}

/// CRC-32C (Castagnoli), as fio's `fio_crc32c`: reflected 0x82F63B78, initial and final
/// inversion.
pub fn crc32c(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 { (c >> 1) ^ 0x82F6_3B78 } else { c >> 1 };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    !data.iter().fold(!0u32, |c, &b| TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip_and_failures() {
        let mut buf = vec![0u8; 4096];
        fill(&mut buf, 8192, 77);
        assert_eq!(check(&buf, 8192), Ok(()));
        assert_eq!(check(&buf, 4096), Err(VerifyError::WrongOffset { offset: 4096, found: 8192 }));
        buf[1000] ^= 1;
        assert_eq!(check(&buf, 8192), Err(VerifyError::BadHash { offset: 8192 + 512 }));
        let zeros = vec![0u8; 512];
        assert_eq!(check(&zeros, 0), Err(VerifyError::NotVerifyData { offset: 0 }));
    }

    /// fio's form: the header and pattern per interval, read back; a changed byte, a header
    /// moved elsewhere and a changed header are each found; the words read and written back.
    #[test]
    fn fios_pattern_with_its_header_per_interval() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283, "crc32c's check value");
        let form: FioForm = "verify=meta verify_pattern=0xaa555aa5 verify_interval=512 do_verify=0".parse().unwrap();
        assert_eq!((form.pattern(), form.interval, form.read_back), (&[0xaa, 0x55, 0x5a, 0xa5][..], 512, false));
        assert_eq!(form.to_string().parse::<FioForm>().unwrap(), form);
        let f = Form::of(Some(form), 1);
        let mut buf = vec![0u8; 4096];
        f.fill(&mut buf, 65536, 7);
        assert_eq!(f.check(&buf, 65536), Ok(()));
        assert_eq!(&buf[512..514], &[0xca, 0xac], "fio's magic at each interval");
        assert_eq!(&buf[40..44], &[0xaa, 0x55, 0x5a, 0xa5], "the pattern after the header, in phase with the block");
        assert_eq!(f.check(&buf, 0), Err(VerifyError::WrongOffset { offset: 0, found: 65536 }));
        let mut bad = buf.clone();
        bad[1000] ^= 1;
        assert_eq!(f.check(&bad, 65536), Err(VerifyError::BadPattern { offset: 65536 + 1000 }));
        let mut bad = buf.clone();
        bad[512 + 35] ^= 1;
        assert_eq!(f.check(&bad, 65536), Err(VerifyError::BadHash { offset: 65536 + 512 }));
        assert_eq!(f.check(&vec![0u8; 4096], 0), Err(VerifyError::NotVerifyData { offset: 0 }));
        // The pattern alone.
        let p = Form::of(Some("verify=pattern verify_pattern=0x01020304".parse().unwrap()), 1);
        let mut buf = vec![0u8; 1024];
        p.fill(&mut buf, 0, 1);
        assert_eq!((&buf[..5], p.check(&buf, 0)), (&[1, 2, 3, 4, 1][..], Ok(())));
        assert!("verify=pattern".parse::<FioForm>().is_err());
        assert!("verify=meta verify_pattern=12".parse::<FioForm>().is_err());
        assert!(form.check_for(65536).is_ok() && form.check_for(1000).is_err());
    }
}
