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
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            VerifyError::NotVerifyData { offset } => {
                write!(f, "sector at byte {offset} holds no iolab verify data (write it with --verify first)")
            }
            VerifyError::WrongOffset { offset, found } => write!(f, "sector at byte {offset} holds data written for byte {found}"),
            VerifyError::BadHash { offset } => write!(f, "sector at byte {offset} fails its checksum"),
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
}
