//! Process CPU time from getrusage(RUSAGE_SELF): all of iolab's threads, user and system.
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Rusage {
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_ctx: u64,
    pub involuntary_ctx: u64,
}

impl Rusage {
    pub fn minus(&self, earlier: &Rusage) -> Rusage {
        Rusage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
            voluntary_ctx: self.voluntary_ctx.saturating_sub(earlier.voluntary_ctx),
            involuntary_ctx: self.involuntary_ctx.saturating_sub(earlier.involuntary_ctx),
        }
    }
}

pub(crate) fn rusage_self() -> Rusage {
    // SAFETY: ru is a valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Rusage { user_s: tv(ru.ru_utime), system_s: tv(ru.ru_stime), voluntary_ctx: ru.ru_nvcsw as u64, involuntary_ctx: ru.ru_nivcsw as u64 }
}
