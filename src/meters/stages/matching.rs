//! Time-ordered events matched request by request: [`match_split_requests`] feeds them to the
//! [`Matcher`], a state machine with one handler per kind of event, which follows each request
//! from its system call or io_uring submission through the block layer and the driver to its
//! completion and the system-call exit that hands it back.
use super::{Event, Kind, Point, Timeline, INTERRUPT_CONTEXT};
use std::collections::HashMap;

/// The system calls of the synchronous interfaces (psync, pvsync2): each returns after its I/O.
const SYNC_IO_SYSCALLS: [i64; 8] = [
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
];

/// A request issued to the device whose completion left no record (see `match_requests`).
pub(crate) fn completion_untraced(at: &Timeline) -> bool {
    let seen = |p: Point| at[p as usize].is_some();
    seen(Point::RqIssue) && !seen(Point::RqComplete) && !seen(Point::BioComplete) && !seen(Point::NvmeComplete)
}
#[derive(Default)]
struct Req {
    at: Timeline,
    tid: u32,
    /// Its device-level completion was seen; what remains is handing it to user space.
    completed: bool,
    done: bool,
    /// Times the block layer split its bio, and parts of it completed so far: it completes with
    /// its last part (`splits + 1` parts).
    splits: u32,
    parts_done: u32,
    /// Its bio was refused with EAGAIN and will be queued again (by io-wq).
    retried: bool,
}

/// The requests matched from time-ordered events of process `own_pid`, and how many were
/// started and never finished (in flight at the window's edges, punted to a worker thread,
/// merged into another request, or events lost).
#[cfg(test)]
pub(crate) fn match_requests(events: &[Event], own_pid: u32) -> (Vec<Timeline>, u64) {
    let m = match_split_requests(events, own_pid);
    (m.requests, m.unmatched)
}

/// What matching found: the matched requests, how many of them the block layer split into
/// parts, and how many were started and never finished.
pub struct Matching {
    pub requests: Vec<Timeline>,
    pub split: u64,
    pub unmatched: u64,
}

/// [`match_requests`], also counting the matched requests that were split. A split request
/// (`block:block_split`: its bio was larger than the queue's max_sectors_kb or max_segments, or
/// crossed a chunk) has one request per part, each inserted, issued and completed on its own;
/// its points are its first part's up to the issue and its last completed part's from there,
/// so its device stage runs from the first part issued to the last part completed.
pub(crate) fn match_split_requests(events: &[Event], own_pid: u32) -> Matching {
    let mut m = Matcher { own_pid, ..Default::default() };
    for e in events {
        m.event(e);
    }
    m.finish()
}

/// The state of [`match_split_requests`] as it reads the events in time order: the requests
/// started so far, where each thread is, and the keys each layer's events find a request by.
#[derive(Default)]
struct Matcher {
    own_pid: u32,
    reqs: Vec<Req>,
    /// Per thread: the system call it is in (entry time), the request it is submitting, and
    /// requests completed that wait for its next system-call exit.
    in_call: HashMap<u32, u64>,
    submitting: HashMap<u32, usize>,
    to_user: HashMap<u32, Vec<usize>>,
    by_uring: HashMap<(u64, u64), usize>,
    by_sector: HashMap<(u64, u64), usize>,
    by_nvme: HashMap<(u64, u64), usize>,
    /// io_uring requests not yet at the device level, oldest first: an io-wq worker's bio is the
    /// oldest one's (io_uring punts to io-wq a request the driver cannot take without blocking).
    punted: std::collections::VecDeque<usize>,
    /// Per CPU: an NVMe command set up for the request issued next on it, and the last interrupt.
    setup_on: HashMap<u16, (u64, u64, u64)>,
    last_irq: HashMap<u16, u64>,
}

/// The block layer's dev_t is major << 20 | minor; a bio on a partition is remapped to the whole
/// disk's sectors before it is traced, and its requests carry the disk's dev: the major and the
/// sector name a request on both (dev_t is the low 32 bits: a split's `a` holds more above it).
fn block_key(e: &Event) -> (u64, u64) {
    ((e.a & 0xffff_ffff) >> 20, e.b)
}

/// A request that has not reached the device level yet.
fn fresh_request(r: &Req) -> bool {
    r.at[Point::BioQueue as usize].is_none() && r.at[Point::NvmeSetup as usize].is_none()
}

/// In interrupt context the handler that raised it is the CPU's last irq entry (a softirq runs
/// as a handler exits; timer ticks are no irq_handler_entry).
fn interrupt(r: &mut Req, e: &Event, last_irq: &HashMap<u16, u64>) {
    let issued = r.at[Point::RqIssue as usize].or(r.at[Point::NvmeSetup as usize]).unwrap_or(0);
    if e.flags & INTERRUPT_CONTEXT != 0 && r.at[Point::Irq as usize].is_none() {
        r.at[Point::Irq as usize] = last_irq.get(&e.cpu).copied().filter(|&t| t >= issued);
    }
}

impl Matcher {
    fn event(&mut self, e: &Event) {
        let ours = e.pid == self.own_pid;
        match e.kind {
            Kind::SysEnter if ours => {
                self.in_call.insert(e.tid, e.time);
            }
            Kind::SysExit if ours => self.sys_exit(e),
            Kind::UringSubmit if ours => self.uring_submit(e),
            Kind::BioQueue if ours => self.bio_queue(e),
            Kind::BlockSplit if ours => self.block_split(e),
            Kind::RqInsert | Kind::RqIssue => self.rq_insert_or_issue(e),
            Kind::NvmeSetup => self.nvme_setup(e, ours),
            Kind::NvmeComplete => self.nvme_complete(e),
            Kind::RqComplete | Kind::BioComplete => self.block_complete(e),
            Kind::UringComplete => {
                let Some(i) = self.by_uring.remove(&(e.a, e.b)) else { return };
                self.reqs[i].at[Point::UringComplete as usize] = Some(e.time);
                self.complete(i, true);
            }
            Kind::IrqEntry => {
                self.last_irq.insert(e.cpu, e.time);
            }
            _ => {}
        }
    }

    /// The request a thread is submitting that has not reached the device level yet.
    fn fresh(&self, tid: u32) -> Option<usize> {
        let &i = self.submitting.get(&tid)?;
        fresh_request(&self.reqs[i]).then_some(i)
    }

    fn new_request(&mut self, tid: u32, entered: Option<u64>) -> usize {
        let mut r = Req { tid, ..Default::default() };
        r.at[Point::Enter as usize] = entered;
        self.reqs.push(r);
        self.reqs.len() - 1
    }

    fn complete(&mut self, i: usize, last: bool) {
        let r = &mut self.reqs[i];
        if r.completed {
            return;
        }
        // io_uring requests complete to user space through io_uring_complete.
        if r.at[Point::UringSubmit as usize].is_some() && !last {
            return;
        }
        r.completed = true;
        if r.at[Point::Enter as usize].is_some() {
            self.to_user.entry(r.tid).or_default().push(i);
        } else {
            // Submitted with no system call (SQPOLL): its completion is the last point seen.
            r.done = true;
        }
    }

    fn sys_exit(&mut self, e: &Event) {
        let entered = self.in_call.remove(&e.tid);
        // A synchronous read or write returns only once its request completed: where the
        // completion's records are missing (this VM's 6.18 kernel writes no interrupt-context
        // tracepoint record while the CPU idles: 0 of ~85 000 interrupt records came from the
        // idle task), the request still ends here, its device, interrupt and completion one stage.
        if SYNC_IO_SYSCALLS.contains(&(e.a as i64)) {
            if let Some(&i) = self.submitting.get(&e.tid) {
                let r = &mut self.reqs[i];
                if !r.completed && r.at[Point::RqIssue as usize].is_some() && r.at[Point::Enter as usize] == entered {
                    if r.splits > 0 {
                        // An earlier part's interrupt and NVMe completion: not this one's end.
                        r.at[Point::Irq as usize] = None;
                        r.at[Point::NvmeComplete as usize] = None;
                    }
                    r.at[Point::Exit as usize] = Some(e.time);
                    r.completed = true;
                    r.done = true;
                }
            }
        }
        for i in self.to_user.remove(&e.tid).unwrap_or_default() {
            self.reqs[i].at[Point::Exit as usize] = Some(e.time);
            self.reqs[i].done = true;
        }
    }

    fn uring_submit(&mut self, e: &Event) {
        let i = self.new_request(e.tid, self.in_call.get(&e.tid).copied());
        self.reqs[i].at[Point::UringSubmit as usize] = Some(e.time);
        self.by_uring.insert((e.a, e.b), i);
        self.punted.push_back(i);
        self.submitting.insert(e.tid, i);
    }

    fn bio_queue(&mut self, e: &Event) {
        let i = match self.fresh(e.tid) {
            Some(i) => i,
            // A bio inside a system call of a worker: a new request (sync, libaio).
            None if self.in_call.contains_key(&e.tid) => self.new_request(e.tid, self.in_call.get(&e.tid).copied()),
            // Another bio of a request a worker already queued (a split).
            None if self.submitting.contains_key(&e.tid) => return,
            // A bio of one of our threads making no traced system call: an io-wq worker running
            // a request io_uring punted (zram's driver cannot take it without blocking). Matched
            // in submission order, which io-wq keeps per ring.
            None => return self.punted_bio(e),
        };
        self.reqs[i].at[Point::BioQueue as usize] = Some(e.time);
        self.by_sector.insert(block_key(e), i);
        self.submitting.insert(e.tid, i);
    }

    fn punted_bio(&mut self, e: &Event) {
        // Its nowait attempt was refused (`block_complete`): the retry has the same sector.
        if let Some(&i) = self.by_sector.get(&block_key(e)).filter(|&&i| self.reqs[i].retried) {
            self.reqs[i].at[Point::BioQueue as usize] = Some(e.time);
            self.reqs[i].retried = false;
            return;
        }
        while let Some(&i) = self.punted.front() {
            if fresh_request(&self.reqs[i]) && !self.reqs[i].completed {
                break;
            }
            self.punted.pop_front();
        }
        let Some(i) = self.punted.pop_front() else { return };
        self.reqs[i].at[Point::BioQueue as usize] = Some(e.time);
        self.by_sector.insert(block_key(e), i);
    }

    fn block_split(&mut self, e: &Event) {
        let Some(&i) = self.by_sector.get(&block_key(e)) else { return };
        if self.reqs[i].completed {
            return;
        }
        // Fired as the part is split off, before it is issued: the request counts the rest as a
        // part before any part can complete.
        self.reqs[i].splits += 1;
        self.by_sector.insert((block_key(e).0, e.b + (e.a >> 32)), i);
    }

    fn rq_insert_or_issue(&mut self, e: &Event) {
        let Some(&i) = self.by_sector.get(&block_key(e)) else { return };
        let p = if e.kind == Kind::RqInsert { Point::RqInsert } else { Point::RqIssue };
        self.reqs[i].at[p as usize].get_or_insert(e.time);
        // An insert also takes the CPU's pending command set-up, and drops it.
        if let (Kind::RqIssue, Some((ctrl, cid, t))) = (e.kind, self.setup_on.remove(&e.cpu)) {
            self.reqs[i].at[Point::NvmeSetup as usize].get_or_insert(t);
            self.by_nvme.insert((ctrl, cid), i);
        }
    }

    fn nvme_setup(&mut self, e: &Event, ours: bool) {
        let entered = self.in_call.get(&e.tid).copied();
        // A block request's command is set up in the same system call as its bio (or by another
        // thread): it is the request issued next on this CPU.
        let block_request = self
            .submitting
            .get(&e.tid)
            .is_some_and(|&i| self.reqs[i].at[Point::BioQueue as usize].is_some() && self.reqs[i].at[Point::Enter as usize] == entered);
        // Passthrough: a command with no bio, of the request this thread is submitting
        // (io_uring) or of the system call it is in (ioctl).
        let passthrough = match self.fresh(e.tid) {
            Some(i) if ours => Some(i),
            None if ours && entered.is_some() && !block_request => Some(self.new_request(e.tid, entered)),
            _ => None,
        };
        match passthrough {
            Some(i) => {
                self.reqs[i].at[Point::NvmeSetup as usize] = Some(e.time);
                self.by_nvme.insert((e.a, e.b), i);
                self.submitting.insert(e.tid, i);
            }
            None => {
                self.setup_on.insert(e.cpu, (e.a, e.b, e.time));
            }
        }
    }

    fn nvme_complete(&mut self, e: &Event) {
        let Some(i) = self.by_nvme.remove(&(e.a, e.b)) else { return };
        let r = &mut self.reqs[i];
        interrupt(r, e, &self.last_irq);
        r.at[Point::NvmeComplete as usize] = Some(e.time);
        if r.at[Point::BioQueue as usize].is_none() {
            self.complete(i, false);
        }
    }

    fn block_complete(&mut self, e: &Event) {
        let key = block_key(e);
        let Some(&i) = self.by_sector.get(&key) else { return };
        let r = &mut self.reqs[i];
        if e.kind == Kind::BioComplete && (e.a >> 32) as u32 as i32 == -libc::EAGAIN && !r.completed {
            // Refused at once rather than blocked (io_uring's nowait attempt at a bio that must
            // be split: 6.18 does not split a REQ_NOWAIT bio): io_uring retries it from an io-wq
            // worker, whose bio queued is the request's.
            r.retried = true;
            return;
        }
        if e.kind == Kind::BioComplete {
            self.by_sector.remove(&key);
        }
        let r = &mut self.reqs[i];
        if !r.completed && r.parts_done < r.splits {
            // A part before the last: the request's interrupt is its last part's.
            r.parts_done += 1;
            r.at[Point::Irq as usize] = None;
            return;
        }
        interrupt(r, e, &self.last_irq);
        let p = if e.kind == Kind::RqComplete { Point::RqComplete } else { Point::BioComplete };
        r.at[p as usize].get_or_insert(e.time);
        self.complete(i, false);
    }

    /// Matched: started (a system call or an io_uring submission), reached the device level (a
    /// bio or an NVMe command), completed there, and handed back.
    fn finish(self) -> Matching {
        let device_done = |r: &Req| {
            let at = |p: Point| r.at[p as usize].is_some();
            (at(Point::BioQueue) || at(Point::NvmeSetup))
                && (at(Point::RqComplete) || at(Point::BioComplete) || at(Point::NvmeComplete) || completion_untraced(&r.at))
        };
        let started = |r: &Req| r.at[Point::Enter as usize].is_some() || r.at[Point::UringSubmit as usize].is_some();
        let (good, bad): (Vec<Req>, Vec<Req>) = self.reqs.into_iter().partition(|r| r.done && started(r) && device_done(r));
        Matching {
            split: good.iter().filter(|r| r.splits > 0).count() as u64,
            requests: good.into_iter().map(|r| r.at).collect(),
            unmatched: bad.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meters::stages::decode::Decoder;
    use crate::meters::stages::summary::summarize;
    use crate::meters::stages::ALL_POINTS;
    use std::path::Path;

    fn ev(time: u64, kind: Kind, tid: u32, cpu: u16, a: u64, b: u64, flags: u8) -> Event {
        Event { time, a, b, pid: if tid == 0 { 0 } else { 42 }, tid, cpu, kind, flags }
    }

    fn names(at: &Timeline) -> Vec<Point> {
        ALL_POINTS.iter().copied().filter(|&p| at[p as usize].is_some()).collect()
    }

    /// A recorded fixture (`IOLAB_STAGES_DUMP`, tests/fixtures/tracefs/NAME: format files and
    /// ring records copied byte for byte from a 2-CPU kernel): its tracepoints, and its requests
    /// matched as `report` matches them.
    fn recorded(name: &str) -> (Decoder, Vec<Timeline>, u64) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs").join(name);
        let d = Decoder::load(&dir);
        let (mut events, mut lost) = (Vec::new(), 0);
        for cpu in 0..2 {
            d.decode(&std::fs::read(dir.join(format!("cpu{cpu}.raw"))).unwrap(), &mut events, &mut lost);
        }
        events.sort_by_key(|e| e.time);
        assert_eq!(lost, 0, "{name}");
        // The system-call events were filtered to the worker: their pid is iolab's.
        let pid = events.iter().find(|e| e.kind == Kind::SysEnter).unwrap().pid;
        let (matched, unmatched) = match_requests(&events, pid);
        (d, matched, unmatched)
    }

    /// A psync run of 100 reads on a file on ext4 over virtio-blk (6.18).
    #[test]
    fn recorded_records_of_a_virtio_run_match_every_request_into_stages() {
        let (d, matched, unmatched) = recorded("6.18-ext4-virtio");
        assert!(d.found.contains(&"block:block_rq_issue".to_string()) && d.found.contains(&"raw_syscalls:sys_enter".to_string()));
        assert!(d.missing.iter().any(|m| m.starts_with("nvme:")), "no nvme driver on this VM: {:?}", d.missing);
        assert_eq!((matched.len(), unmatched), (100, 0));
        use Point::*;
        for at in &matched {
            assert_eq!(names(at), vec![Enter, BioQueue, RqInsert, RqIssue, Irq, RqComplete, Exit]);
        }
        let (whole, stages) = summarize(&matched);
        let share: f64 = stages.iter().map(|s| s.share).sum();
        assert!((share - 1.0).abs() < 1e-9, "{share}");
        let whole = whole.unwrap();
        let mean_sum: f64 = stages.iter().map(|s| s.mean_ns).sum();
        assert!((mean_sum - whole.mean_ns).abs() < 1.0, "the stages add up to the end to end: {mean_sum} {}", whole.mean_ns);
        let device = stages.iter().find(|s| s.to == "interrupt").unwrap();
        assert_eq!(device.layer, "device (issue to interrupt)");
        assert!(device.p50_ns > 10_000.0 && device.p50_ns < whole.p50_ns, "{device:?}");
    }

    /// A psync read whose interrupt landed on an idle CPU: no irq and no completion record, yet
    /// the read returned, so the request ends at its system call's exit; an io_submit's exit
    /// does not end its request.
    #[test]
    fn a_sync_read_whose_completion_left_no_record_ends_at_its_exit() {
        let dev = 253 << 20;
        let read = libc::SYS_pread64 as u64;
        let events = [
            ev(10, Kind::SysEnter, 7, 0, read, 0, 0),
            ev(12, Kind::BioQueue, 7, 0, dev, 8, 0),
            ev(13, Kind::RqInsert, 7, 0, dev, 8, 0),
            ev(14, Kind::RqIssue, 7, 0, dev, 8, 0),
            ev(60, Kind::SysExit, 7, 0, read, 0, 0),
            ev(70, Kind::SysEnter, 7, 0, libc::SYS_io_submit as u64, 0, 0),
            ev(72, Kind::BioQueue, 7, 0, dev, 16, 0),
            ev(73, Kind::RqIssue, 7, 0, dev, 16, 0),
            ev(75, Kind::SysExit, 7, 0, libc::SYS_io_submit as u64, 0, 0),
        ];
        let (m, unmatched) = match_requests(&events, 42);
        assert_eq!((m.len(), unmatched), (1, 1));
        use Point::*;
        assert_eq!(names(&m[0]), vec![Enter, BioQueue, RqInsert, RqIssue, Exit]);
        assert!(completion_untraced(&m[0]));
        let (_, stages) = summarize(&m);
        assert!(stages.last().unwrap().layer.starts_with("device, interrupt and return (the completion left no record"), "{stages:?}");
    }

    /// `block:block_split`: the part split off keeps `sector`, the rest goes on at `new_sector`.
    fn split(time: u64, tid: u32, dev: u64, sector: u64, new_sector: u64) -> Event {
        ev(time, Kind::BlockSplit, tid, 0, dev | (new_sector - sector) << 32, sector, 0)
    }

    /// A psync read of 64 KiB on a queue taking 16 KiB (max_sectors_kb 16): the bio split three
    /// times, four requests, each inserted and issued as the next part is split off.
    fn a_split_read(dev: u64, first_sector: u64, start: u64) -> Vec<Event> {
        let read = libc::SYS_pread64 as u64;
        let mut events = vec![ev(start, Kind::SysEnter, 7, 0, read, 0, 0), ev(start + 2, Kind::BioQueue, 7, 0, dev, first_sector, 0)];
        for part in 0..4u64 {
            let (t, sector) = (start + 3 + part * 10, first_sector + part * 32);
            if part < 3 {
                events.push(split(t, 7, dev, sector, sector + 32));
            }
            events.push(ev(t + 1, Kind::RqInsert, 7, 0, dev, sector, 0));
            events.push(ev(t + 2, Kind::RqIssue, 7, 0, dev, sector, 0));
        }
        events
    }

    #[test]
    fn a_read_split_into_four_parts_completes_at_its_last_part() {
        let dev = 7 << 20;
        let read = libc::SYS_pread64 as u64;
        let mut events = a_split_read(dev, 0, 10);
        // Each part completes by interrupt on CPU 1, in the order issued.
        for part in 0..4u64 {
            let t = 100 + part * 20;
            events.push(ev(t, Kind::IrqEntry, 0, 1, 30, 0, 0x09));
            events.push(ev(t + 1, Kind::RqComplete, 0, 1, dev, part * 32, 0x10));
        }
        events.push(ev(180, Kind::SysExit, 7, 0, read, 0, 0));
        // Then a 4 KiB read the queue takes whole.
        events.extend([
            ev(200, Kind::SysEnter, 7, 0, read, 0, 0),
            ev(202, Kind::BioQueue, 7, 0, dev, 512, 0),
            ev(203, Kind::RqInsert, 7, 0, dev, 512, 0),
            ev(204, Kind::RqIssue, 7, 0, dev, 512, 0),
            ev(250, Kind::IrqEntry, 0, 1, 30, 0, 0x09),
            ev(251, Kind::RqComplete, 0, 1, dev, 512, 0x10),
            ev(260, Kind::SysExit, 7, 0, read, 0, 0),
        ]);
        let m = match_split_requests(&events, 42);
        assert_eq!((m.requests.len(), m.split, m.unmatched), (2, 1, 0));
        use Point::*;
        let at = &m.requests[0];
        assert_eq!(names(at), vec![Enter, BioQueue, RqInsert, RqIssue, Irq, RqComplete, Exit]);
        // Inserted and issued: the first part; the interrupt and completion: the last part's.
        assert_eq!((at[RqInsert as usize], at[RqIssue as usize]), (Some(14), Some(15)));
        assert_eq!((at[Irq as usize], at[RqComplete as usize], at[Exit as usize]), (Some(160), Some(161), Some(180)));
        let (_, stages) = summarize(&m.requests[..1]);
        let device = stages.iter().find(|s| s.layer == "device (issue to interrupt)").unwrap();
        assert_eq!(device.p50_ns, 145.0, "from the first part issued to the last part's interrupt");
        assert_eq!(match_requests(&events, 42), (m.requests, 0));
    }

    #[test]
    fn parts_completing_out_of_order_end_the_request_at_the_last_one() {
        let dev = 7 << 20;
        let read = libc::SYS_pread64 as u64;
        let mut events = a_split_read(dev, 0, 10);
        // The third part first, on CPU 0; then the first; the last two on CPU 1.
        events.extend([
            ev(100, Kind::IrqEntry, 0, 0, 30, 0, 0x09),
            ev(101, Kind::RqComplete, 0, 0, dev, 64, 0x10),
            ev(110, Kind::RqComplete, 0, 0, dev, 0, 0x10),
            ev(120, Kind::IrqEntry, 0, 1, 31, 0, 0x09),
            ev(121, Kind::RqComplete, 0, 1, dev, 96, 0x10),
            ev(122, Kind::RqComplete, 0, 1, dev, 32, 0x10),
            ev(130, Kind::SysExit, 7, 0, read, 0, 0),
        ]);
        // A second split read whose last part's completion left no record (an interrupt on an
        // idle CPU): it still returned, so it ends at its exit, with no earlier part's interrupt.
        events.extend(a_split_read(dev, 1024, 200));
        events.extend([
            ev(300, Kind::IrqEntry, 0, 1, 31, 0, 0x09),
            ev(301, Kind::RqComplete, 0, 1, dev, 1024, 0x10),
            ev(302, Kind::RqComplete, 0, 1, dev, 1056, 0x10),
            ev(303, Kind::RqComplete, 0, 1, dev, 1088, 0x10),
            ev(400, Kind::SysExit, 7, 0, read, 0, 0),
        ]);
        let m = match_split_requests(&events, 42);
        assert_eq!((m.requests.len(), m.split, m.unmatched), (2, 2, 0));
        use Point::*;
        let at = &m.requests[0];
        assert_eq!((at[RqIssue as usize], at[Irq as usize], at[RqComplete as usize]), (Some(15), Some(120), Some(122)));
        assert_eq!(names(&m.requests[1]), vec![Enter, BioQueue, RqInsert, RqIssue, Exit]);
        assert!(completion_untraced(&m.requests[1]));
    }

    #[test]
    fn a_split_on_nvme_sets_up_a_command_per_part_and_ends_with_the_last() {
        let (dev, q) = (259 << 20, 1 << 32 | 1);
        let events = [
            ev(100, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(110, Kind::UringSubmit, 7, 0, 0xc0, 1, 0),
            ev(120, Kind::BioQueue, 7, 0, dev, 800, 0),
            // Split in two; both parts dispatched at the plug's flush, a command each.
            split(121, 7, dev, 800, 864),
            ev(130, Kind::NvmeSetup, 7, 0, q, 17, 0),
            ev(131, Kind::RqIssue, 7, 0, dev, 800, 0),
            ev(132, Kind::NvmeSetup, 7, 0, q, 18, 0),
            ev(133, Kind::RqIssue, 7, 0, dev, 864, 0),
            ev(140, Kind::SysExit, 7, 0, 426, 0, 0),
            // The first part by interrupt on CPU 1, the second on CPU 0 a little later.
            ev(200, Kind::IrqEntry, 0, 1, 30, 0, 0x09),
            ev(201, Kind::NvmeComplete, 0, 1, q, 17, 0x09),
            ev(202, Kind::RqComplete, 0, 1, dev, 800, 0x09),
            ev(210, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(250, Kind::IrqEntry, 0, 0, 31, 0, 0x09),
            ev(251, Kind::NvmeComplete, 0, 0, q, 18, 0x09),
            ev(252, Kind::RqComplete, 0, 0, dev, 864, 0x09),
            ev(260, Kind::UringComplete, 7, 0, 0xc0, 1, 0),
            ev(270, Kind::SysExit, 7, 0, 426, 0, 0),
        ];
        let m = match_split_requests(&events, 42);
        assert_eq!((m.requests.len(), m.split, m.unmatched), (1, 1, 0));
        use Point::*;
        let at = &m.requests[0];
        assert_eq!(names(at), vec![Enter, UringSubmit, BioQueue, NvmeSetup, RqIssue, Irq, NvmeComplete, RqComplete, UringComplete, Exit]);
        assert_eq!((at[NvmeSetup as usize], at[RqIssue as usize]), (Some(130), Some(131)));
        assert_eq!((at[Irq as usize], at[NvmeComplete as usize], at[RqComplete as usize]), (Some(250), Some(251), Some(252)));
    }

    /// 6.18 does not split a REQ_NOWAIT bio: io_uring's nowait attempt completes at once with
    /// EAGAIN and an io-wq worker queues the bio again, where it is split.
    #[test]
    fn an_io_uring_read_refused_for_a_split_is_matched_through_its_io_wq_retry() {
        let dev = 7 << 20;
        let eagain = (-libc::EAGAIN) as u32 as u64;
        let mut events = vec![
            ev(100, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(110, Kind::UringSubmit, 7, 0, 0xc0, 1, 0),
            ev(111, Kind::BioQueue, 7, 0, dev, 0, 0),
            ev(112, Kind::BioComplete, 7, 0, dev | eagain << 32, 0, 0),
            ev(115, Kind::SysExit, 7, 0, 426, 0, 0),
            // The io-wq worker (thread 8, making no system call) queues it again.
            ev(120, Kind::BioQueue, 8, 1, dev, 0, 0),
            split(121, 8, dev, 0, 64),
            ev(122, Kind::RqIssue, 8, 1, dev, 0, 0),
            ev(123, Kind::RqIssue, 8, 1, dev, 64, 0),
            ev(200, Kind::RqComplete, 7, 0, dev, 64, 0),
            ev(201, Kind::RqComplete, 7, 0, dev, 0, 0),
            ev(210, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(220, Kind::UringComplete, 7, 0, 0xc0, 1, 0),
            ev(230, Kind::SysExit, 7, 0, 426, 0, 0),
        ];
        let m = match_split_requests(&events, 42);
        assert_eq!((m.requests.len(), m.split, m.unmatched), (1, 1, 0));
        use Point::*;
        let at = &m.requests[0];
        assert_eq!(names(at), vec![Enter, UringSubmit, BioQueue, RqIssue, RqComplete, UringComplete, Exit]);
        assert_eq!((at[BioQueue as usize], at[RqComplete as usize]), (Some(120), Some(201)));
        // Any other error ends the bio: the request completes there.
        events[3].a = dev | ((-libc::EIO) as u32 as u64) << 32;
        assert_eq!(names(&match_requests(&events, 42).0[0]), vec![Enter, UringSubmit, BioQueue, BioComplete, UringComplete, Exit]);
    }

    #[test]
    fn io_uring_on_nvme_links_the_command_to_its_request_and_a_polled_one_has_no_interrupt() {
        let dev = 259 << 20;
        let events = [
            ev(100, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(110, Kind::UringSubmit, 7, 0, 0xc0, 1, 0),
            ev(120, Kind::BioQueue, 7, 0, dev, 800, 0),
            // A second request in the same call, then both dispatched at the plug's flush.
            ev(125, Kind::UringSubmit, 7, 0, 0xc0, 2, 0),
            ev(126, Kind::BioQueue, 7, 0, dev, 1600, 0),
            ev(130, Kind::NvmeSetup, 7, 0, 1 << 32 | 1, 17, 0),
            ev(131, Kind::RqIssue, 7, 0, dev, 800, 0),
            ev(132, Kind::NvmeSetup, 7, 0, 1 << 32 | 1, 18, 0),
            ev(133, Kind::RqIssue, 7, 0, dev, 1600, 0),
            ev(140, Kind::SysExit, 7, 0, 426, 0, 0),
            ev(150, Kind::SysEnter, 7, 0, 426, 0, 0),
            // Polled by the task: no interrupt context.
            ev(200, Kind::NvmeComplete, 7, 0, 1 << 32 | 1, 17, 0),
            ev(201, Kind::RqComplete, 7, 0, dev, 800, 0),
            ev(205, Kind::UringComplete, 7, 0, 0xc0, 1, 0),
            ev(210, Kind::SysExit, 7, 0, 426, 0, 0),
            // The second completes by interrupt on CPU 1.
            ev(300, Kind::IrqEntry, 0, 1, 30, 0, 0x09),
            ev(305, Kind::NvmeComplete, 0, 1, 1 << 32 | 1, 18, 0x09),
            ev(306, Kind::RqComplete, 0, 1, dev, 1600, 0x09),
            ev(320, Kind::SysEnter, 7, 0, 426, 0, 0),
            ev(330, Kind::UringComplete, 7, 0, 0xc0, 2, 0),
            ev(340, Kind::SysExit, 7, 0, 426, 0, 0),
        ];
        let (m, unmatched) = match_requests(&events, 42);
        assert_eq!((m.len(), unmatched), (2, 0));
        use Point::*;
        assert_eq!(names(&m[0]), vec![Enter, UringSubmit, BioQueue, NvmeSetup, RqIssue, NvmeComplete, RqComplete, UringComplete, Exit]);
        assert_eq!(m[0][NvmeSetup as usize], Some(130));
        assert_eq!(
            names(&m[1]),
            vec![Enter, UringSubmit, BioQueue, NvmeSetup, RqIssue, Irq, NvmeComplete, RqComplete, UringComplete, Exit]
        );
        assert_eq!((m[1][NvmeSetup as usize], m[1][Irq as usize], m[1][Exit as usize]), (Some(132), Some(300), Some(340)));
        let (_, stages) = summarize(&m);
        assert!(stages.iter().any(|s| s.layer == "device (issue to interrupt)" && s.requests == 1));
        assert!(stages.iter().any(|s| s.layer.starts_with("driver and device (issue to completion, no interrupt") && s.requests == 1));
    }

    #[test]
    fn passthrough_has_no_bio_and_zram_no_request_stages() {
        // An NVMe passthrough ioctl: the command is set up in the system call, with no bio.
        let pt = [
            ev(10, Kind::SysEnter, 7, 0, 16, 0, 0),
            ev(20, Kind::NvmeSetup, 7, 0, 1 << 32 | 2, 5, 0),
            ev(21, Kind::RqIssue, 7, 0, 259 << 20, 0, 0),
            ev(60, Kind::IrqEntry, 0, 0, 30, 0, 0x09),
            ev(61, Kind::NvmeComplete, 0, 0, 1 << 32 | 2, 5, 0x09),
            ev(80, Kind::SysExit, 7, 0, 16, 0, 0),
        ];
        let (m, _) = match_requests(&pt, 42);
        use Point::*;
        assert_eq!(names(&m[0]), vec![Enter, NvmeSetup, Irq, NvmeComplete, Exit]);
        // zram: a bio-based driver completes the bio in the submitting task.
        let zram = [
            ev(10, Kind::SysEnter, 7, 0, 17, 0, 0),
            ev(12, Kind::BioQueue, 7, 0, 252 << 20, 8, 0),
            ev(20, Kind::BioComplete, 7, 0, 252 << 20, 8, 0),
            ev(22, Kind::SysExit, 7, 0, 17, 0, 0),
        ];
        let (m, _) = match_requests(&zram, 42);
        assert_eq!(names(&m[0]), vec![Enter, BioQueue, BioComplete, Exit]);
        let (_, stages) = summarize(&m);
        assert_eq!(
            stages.iter().map(|s| s.layer.as_str()).collect::<Vec<_>>(),
            ["system call, VFS and file system", "bio-based driver (zram, loop ...)", "return to user space (and wake-up, if it slept)"]
        );
        // Another process's bio and a request still in flight at the window's end.
        let other = [
            ev(1, Kind::SysEnter, 7, 0, 17, 0, 0),
            ev(2, Kind::BioQueue, 7, 0, 8 << 20, 8, 0),
            Event { pid: 9, ..ev(3, Kind::BioQueue, 9, 0, 8 << 20, 16, 0) },
        ];
        assert_eq!(match_requests(&other, 42), (vec![], 1));
    }

    /// Recorded in the rig's Debian 6.1 guest on the emulated NVMe namespace (io_uring at QD4,
    /// 100 reads each; tests/vm/guest/profile.sh): by interrupt, polled (IOPOLL), and passthrough
    /// on its generic device. Every request passes the nvme driver's points; only the interrupt
    /// run's have an interrupt; passthrough has no bio and no block request.
    #[test]
    fn recorded_nvme_runs_of_a_6_1_guest_match_every_request_with_the_nvme_points() {
        use Point::*;
        let nvme = [Enter, UringSubmit, BioQueue, NvmeSetup, RqIssue];
        let irq = [&nvme[..], &[Irq, NvmeComplete, RqComplete, UringComplete, Exit]].concat();
        let polled = [&nvme[..], &[NvmeComplete, RqComplete, UringComplete, Exit]].concat();
        let passthru = vec![Enter, UringSubmit, NvmeSetup, Irq, NvmeComplete, UringComplete, Exit];
        for (name, points) in [("6.1-nvme-uring-irq", irq), ("6.1-nvme-uring-poll", polled), ("6.1-nvme-passthru", passthru)] {
            let (d, matched, unmatched) = recorded(name);
            let found = |t: &str| d.found.iter().any(|f| f == t);
            assert!(found("nvme:nvme_setup_cmd") && found("io_uring:io_uring_submit_sqe"), "6.1's names: {:?}", d.found);
            assert_eq!((matched.len(), unmatched), (100, 0), "{name}");
            for at in &matched {
                assert_eq!(names(at), points, "{name}");
            }
            let (whole, stages) = summarize(&matched);
            let mean_sum: f64 = stages.iter().map(|s| s.mean_ns).sum();
            assert!((mean_sum - whole.unwrap().mean_ns).abs() < 1.0, "{name}: the stages add up to the end to end");
        }
    }
}
