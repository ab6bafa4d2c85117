#!/usr/bin/env python3
"""iolab against fio on RAM-backed targets, one core, same workloads.

Not a test: a measurement to run by hand (as root) on an otherwise idle machine.

For each row (psync QD1, libaio QD32, io_uring QD32, io_uring QD32 in batches of 8) it runs
iolab and Debian's fio alternately, several repetitions each, both pinned to one CPU, both
doing 4 KiB random reads for the same time with latency recorded for every I/O, on one or both
of two RAM-backed targets (--target, default both, each with its own table):

  zram       /dev/zram0 filled with random data, O_DIRECT. Every read goes through the block
             layer and zram copies the page. zram cannot take non-blocking reads, so io_uring
             hands every read to an io-wq worker thread: on the io_uring rows the kernel's
             punt path (3-5 us per I/O) decides the result, whatever the tools do.
  pagecache  a file on a disk filesystem (ext4, xfs, btrfs; default a new 1 GiB file in
             /var/tmp) held entirely in the page cache, buffered reads (iolab --buffered, fio
             --direct=0 --invalidate=0). A read is a page-cache lookup and a copy, and
             io_uring completes it inline in the submitting task (no io-wq): the kernel path
             is short and the same for both tools, so the tools' own overhead shows.
  null       (only with --target null, its own rows: null QD1, null QD32) no I/O at all: iolab
             -i null and fio --ioengine=null over a 1 GiB address space, no file, no root. All
             that is left is each tool's own cost per I/O; both record a latency for every I/O
             (the table checks fio's lat samples against its I/Os). Goal: 10x fio's IOPS.

For each run it measures

  * the tool's own user-space CPU time per I/O: the user time the kernel accounts to the tool
    process (wait4 rusage of the child: every thread, startup and teardown included, nothing
    subtracted) divided by the I/Os the tool reports having done;
  * IOPS per busy core: the IOPS the tool reports, divided by the average number of busy CPUs
    over the run, where busy is taken system-wide from /proc/stat (user + nice + system + irq +
    softirq + steal; guest time is already inside user) so that work done by kernel threads or
    on other CPUs on the tool's behalf counts against it;
  * the kernel path actually taken: how many io_uring io-wq workers (iou-wrk threads) the tool
    had during the run, sampled from /proc twice a second.

Shared machines: before each run it waits for the CPUs to be idle; after it, it compares the
system-wide busy time with what the run is responsible for (the tool's own CPU time, every kernel
thread's, interrupts). A run during which other programs used more than --noise cores is rerun;
one still shared after --retries is charged its attributed busy time and counted as shared.

It prints per target and row the medians for both tools, the ratios and PASS/FAIL against the
targets: iolab user time per I/O at most 1/3 of fio's; iolab IOPS per busy core at least 1.08x
fio's on the psync and libaio rows and at least 1.25x on the io_uring rows.

zram0: its disksize is set (default 1 GiB) if it is 0 and reset afterwards; an already
initialised zram0 is only used with --reuse-zram (its contents are overwritten). It is filled
once with random data, so every page is stored (incompressible, i.e. as a plain page copy) and
reads hit allocated memory rather than zram's cheap path for unwritten sectors.

The page-cache file: created with random data (and removed afterwards) unless --file names an
existing one; it is mapped and mlock()ed for the whole benchmark so no page can be reclaimed
(the tools read it with read system calls, not through the mapping), and mincore confirms after
every run that every page is still cached.

The iolab binary is copied before the first run, so a rebuild during the benchmark changes
nothing. docs/benchmarks.md has the settings, their reasons and measured results.

Usage (from the repository root, after `cargo build --release`):

    sudo python3 benches/vs_fio.py                  # both targets, 10 s runs, 3 repetitions
    sudo python3 benches/vs_fio.py --target zram --runtime 5 --reps 5 --markdown table.md --json runs.json
    python3 benches/vs_fio.py --target null --runtime 5 --reps 5   # the harness itself, no root

Only the Python 3 standard library is used.
"""
import argparse
import ctypes
import errno
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ZRAM = "zram0"
FIO_COMMON = [
    "--name=vs_fio", "--rw=randread", "--bs=4k", "--time_based",
    # Favourable but ordinary: a thread rather than a forked process, and no random map
    # (iolab draws offsets uniformly with replacement, which is exactly fio's norandommap).
    "--thread", "--norandommap",
    # fio records slat, clat and lat for every I/O by default.  iolab records one latency per
    # I/O (submission to completion, in a histogram with percentiles), i.e. fio's "lat".
    # Keep fio to that same one: no slat, no clat, lat with percentiles.
    "--disable_slat=1", "--disable_clat=1", "--lat_percentiles=1",
    "--output-format=json",
]
ROWS = [
    # name, iolab args, fio args, IOPS-per-busy-core target
    ("psync QD1", ["-i", "psync", "--qd", "1"], ["--ioengine=psync", "--iodepth=1"], 1.08),
    ("libaio QD32", ["-i", "libaio", "--qd", "32"], ["--ioengine=libaio", "--iodepth=32"], 1.08),
    ("io_uring QD32", ["-i", "io_uring", "--qd", "32"],
     ["--ioengine=io_uring", "--iodepth=32", "--fixedbufs", "--registerfiles"], 1.25),
    ("io_uring QD32 batch 8", ["-i", "io_uring", "--qd", "32", "--batch-submit", "8", "--batch-reap", "8"],
     ["--ioengine=io_uring", "--iodepth=32", "--fixedbufs", "--registerfiles",
      "--iodepth_batch_submit=8", "--iodepth_batch_complete_min=8"], 1.25),
]
# Target null: no I/O at all (iolab -i null, fio --ioengine=null): what is left is each tool's
# own cost per I/O, with a latency recorded for every I/O by both (lat_samples = ios).  The
# goal is 10x fio's IOPS on the same core.
NULL_ROWS = [
    ("null QD1", ["-i", "null", "--qd", "1"], ["--ioengine=null", "--iodepth=1"], 10.0),
    ("null QD32", ["-i", "null", "--qd", "32"], ["--ioengine=null", "--iodepth=32"], 10.0),
]
USER_TARGET = 1 / 3
# Per target: extra iolab and fio options.  zram: O_DIRECT (iolab's default).  pagecache:
# buffered, and fio must not drop the file's cached pages before it starts (its default
# invalidate=1 would make its first reads go to the disk).
TARGET_OPTS = {
    "zram": ([], ["--direct=1"]),
    "pagecache": (["--buffered"], ["--direct=0", "--invalidate=0"]),
    # No file: the address space is --size for both (iolab -i null takes no target).
    "null": (["--size", "1g"], ["--size=1g"]),
}
# Rows a target cannot run, and why.
NOT_ON = {
    ("pagecache", "libaio QD32"): "libaio is asynchronous only with O_DIRECT (buffered, io_submit does the read "
                                  "itself); iolab refuses it",
}


# The name errors begin with; benches/peers.py, which imports this file, sets its own.
PROG = "vs_fio"


def die(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(2)


def read_sys(name):
    with open(f"/sys/block/{ZRAM}/{name}") as f:
        return f.read().strip()


def write_sys(name, value):
    with open(f"/sys/block/{ZRAM}/{name}", "w") as f:
        f.write(str(value))


class Zram:
    """Set up /dev/zram0 filled with random data; undo what was changed on close()."""

    def __init__(self, size, reuse):
        self.dev = f"/dev/{ZRAM}"
        self.created = False
        if not os.path.isdir(f"/sys/block/{ZRAM}"):
            die(f"no /sys/block/{ZRAM} (load the zram module: modprobe zram)")
        self.orig_disksize = int(read_sys("disksize"))
        for table in ("/proc/swaps", "/proc/mounts"):
            with open(table) as f:
                if any(line.split()[0] == self.dev for line in f if line.strip()):
                    die(f"{self.dev} is in use ({table}); refusing to touch it")
        if self.orig_disksize == 0:
            write_sys("disksize", size)
            self.created = True
        elif not reuse:
            die(f"{self.dev} is already initialised (disksize {self.orig_disksize}); "
                "pass --reuse-zram to overwrite its contents with random data")
        self.size = int(read_sys("disksize"))
        mib = self.size // (1 << 20)
        subprocess.run(["dd", "if=/dev/urandom", f"of={self.dev}", "bs=1M", f"count={mib}",
                        "oflag=direct", "status=none"], check=True)
        self.mm_stat = read_sys("mm_stat").split()

    def close(self):
        if self.created:
            # Back to the state found: uninitialised, disksize 0, memory freed.  The reset fails
            # with EBUSY while anything still has the device open (a process just exiting, a udev
            # probe after the writes), so retry for a while.
            for _ in range(100):
                try:
                    write_sys("reset", 1)
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        raise
                    time.sleep(0.1)
            else:
                print(f"vs_fio: could not reset /dev/{ZRAM} (busy); do it with: echo 1 > /sys/block/{ZRAM}/reset",
                      file=sys.stderr)
            self.created = False


class PageCacheFile:
    """A file held whole in the page cache; created (random data) and removed unless given.

    The file is mapped and mlock()ed for the benchmark's duration: page-cache pages are
    otherwise reclaimable, and this VM even reclaims cold memory proactively (a DAMON `pageout`
    scheme, /sys/kernel/mm/damon), which between runs would leave pages that a read then has
    to fetch from the disk (through io-wq, for io_uring). Locked pages stay; reads are the
    ordinary buffered path (the tools do not use the mapping)."""

    def __init__(self, path, size):
        self.created = path is None
        self.path = path or os.path.join("/var/tmp", f"vs_fio.{os.getpid()}.dat")
        if not self.created and not os.path.isfile(path):
            die(f"--file {path}: not a regular file")
        self.fs = fs_type(self.path if not self.created else os.path.dirname(self.path))
        if self.fs in ("tmpfs", "ramfs"):
            # Measured on 6.18: io_uring punts every read of a tmpfs file to io-wq, as on zram.
            die(f"{self.path} is on {self.fs}, whose reads io_uring hands to io-wq; use a file on a disk filesystem (ext4, xfs)")
        if self.created:
            subprocess.run(["dd", "if=/dev/urandom", f"of={self.path}", "bs=1M", f"count={size >> 20}",
                            "status=none"], check=True)
        self.size = os.path.getsize(self.path)
        self.libc = libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        for f in (libc.munmap, libc.mlock):
            f.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            self.addr = libc.mmap(None, self.size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        finally:
            os.close(fd)
        if self.addr in (None, ctypes.c_void_p(-1).value):
            die(f"mmap of {self.path} failed: {os.strerror(ctypes.get_errno())}")
        # mlock reads every page in and pins it.
        if libc.mlock(self.addr, self.size) != 0:
            die(f"mlock of {self.path} failed: {os.strerror(ctypes.get_errno())}")
        if self.resident() < 1.0:
            die(f"{self.path} is not all in the page cache after mlock")

    def resident(self):
        """Fraction of the file's pages in the page cache (mincore)."""
        pages = (self.size + 4095) // 4096
        vec = ctypes.create_string_buffer(pages)
        if self.libc.mincore(self.addr, self.size, vec) != 0:
            die(f"mincore on {self.path} failed: {os.strerror(ctypes.get_errno())}")
        return sum(b & 1 for b in vec.raw) / pages

    def close(self):
        self.libc.munmap(self.addr, self.size)  # unlocks too
        if self.created:
            os.unlink(self.path)
            self.created = False


def fs_type(path):
    """The filesystem type of the mount that holds path (longest matching mount point)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt, typ = line.split()[:3]
            mnt = mnt.replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, kind = mnt, typ
    return kind


def proc_stat():
    """{cpu name: (busy jiffies, total jiffies)} for 'cpu' and each 'cpuN'."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            p = line.split()
            v = [int(x) for x in p[1:]] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq + steal
            out[p[0]] = (busy, busy + idle + iowait, irq + softirq)
    return out


PF_KTHREAD = 0x00200000


def kthread_ticks():
    """{pid: utime + stime} of every kernel thread (kworkers, ksoftirqd, ...), in clock ticks."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if int(fields[6]) & PF_KTHREAD:
            out[pid] = int(fields[11]) + int(fields[12])
    return out


def wait_quiet(cpu, hz, limit, max_wait):
    """Wait until the CPUs other than `cpu` were busy for less than `limit` cores over 1 s
    (someone else's build or test would otherwise be charged to the tool). Returns seconds waited."""
    t0 = time.monotonic()
    while True:
        s0 = proc_stat()
        time.sleep(1.0)
        s1 = proc_stat()
        other = sum(s1[k][0] - s0[k][0] for k in s1 if k not in ("cpu", f"cpu{cpu}")) / hz
        mine = (s1[f"cpu{cpu}"][0] - s0[f"cpu{cpu}"][0]) / hz
        waited = time.monotonic() - t0
        if (other < limit and mine < limit) or waited > max_wait:
            return waited


def count_io_wq(pid, stop, seen):
    """Until stop is set, twice a second: the most io_uring io-wq workers (threads named
    iou-wrk-*) the process had at once.  They exist only while reads are handed to io-wq, so 0
    over a run means io_uring completed every read inline (or this is not an io_uring run)."""
    while not stop.wait(0.5):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        n = 0
        for t in tasks:
            try:
                with open(f"/proc/{pid}/task/{t}/comm") as f:
                    n += f.read().startswith("iou-wrk")
            except OSError:
                pass
        seen[0] = max(seen[0], n)


def run_measured(cmd, out_path, err_path):
    """Run cmd; return (exit status, rusage of the child, wall seconds, /proc/stat before, after,
    kernel-thread ticks, most io-wq workers seen)."""
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        k0 = kthread_ticks()
        s0 = proc_stat()
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        stop, io_wq = threading.Event(), [0]
        sampler = threading.Thread(target=count_io_wq, args=(p.pid, stop, io_wq), daemon=True)
        sampler.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except BaseException:
            p.kill()
            p.wait()
            raise
        finally:
            stop.set()
        t1 = time.monotonic()
        s1 = proc_stat()
        k1 = kthread_ticks()
        sampler.join()
        p.returncode = os.waitstatus_to_exitcode(status)
    kthreads = sum(v - k0.get(pid, 0) for pid, v in k1.items())
    return p.returncode, ru, t1 - t0, s0, s1, kthreads, io_wq[0]


def parse_output(tool, text):
    """(I/Os, IOPS, latencies recorded, p50 latency ns, iolab's io-wq CPU seconds) from a run's
    stdout: fio's or iolab's JSON."""
    if tool == "fio":
        # fio may print warnings before the JSON document.
        d = json.loads(text[text.index("{"):])
        job = d["jobs"][0]
        if job.get("error"):
            die(f"fio job error {job['error']}")
        read = job["read"]
        return read["total_ios"], read["iops"], read["lat_ns"]["N"], read["lat_ns"].get("percentile", {}).get("50.000000"), None
    d = json.loads(text)
    if d["status"] != "ok":
        die(f"iolab status {d['status']}: {d.get('error')}")
    total = d["results"]["total"]
    # iolab's own meters: CPU time of its io-wq workers over the window.
    wq = [c for c in d["cost"]["classes"] if c["class"] == "io_wq"]
    return total["ios"], total["iops"], total["ios"], total["lat_ns"]["p50"], wq[0]["cpu_s"] if wq else None


def measure(tool, cmd, workdir, cpu, hz, parse=parse_output):
    """One run of cmd, pinned by the caller; parse(tool, stdout) reads its figures (see
    parse_output)."""
    out_path = os.path.join(workdir, f"{tool}.json")
    err_path = os.path.join(workdir, f"{tool}.err")
    rc, ru, wall, s0, s1, kthreads, io_wq = run_measured(cmd, out_path, err_path)
    with open(out_path) as f:
        text = f.read()
    if rc != 0:
        with open(err_path) as f:
            die(f"{tool} failed ({rc}): {' '.join(cmd)}\n{f.read()}{text[:2000]}")
    ios, iops, lat_n, lat_p50, io_wq_cpu_s = parse(tool, text)
    busy = (s1["cpu"][0] - s0["cpu"][0]) / hz
    pinned = f"cpu{cpu}"
    other = sum(s1[k][0] - s0[k][0] for k in s1 if k not in ("cpu", pinned)) / hz
    busy_cores = busy / wall
    pinned_busy = (s1[pinned][0] - s0[pinned][0]) / hz
    # What this run is responsible for: the tool (all its threads) + every kernel thread +
    # interrupts. Equal to `busy` on a quiet machine; on a shared one, `busy` minus this is the
    # other programs' time.
    attributed = ru.ru_utime + ru.ru_stime + kthreads / hz + (s1["cpu"][2] - s0["cpu"][2]) / hz
    return {
        "tool": tool, "cmd": cmd, "ios": ios, "iops": iops, "lat_samples": lat_n, "lat_p50_ns": lat_p50,
        "io_wq_workers": io_wq, "iolab_io_wq_cpu_s": io_wq_cpu_s,
        "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "wall_s": wall, "busy_s": busy,
        "busy_cores": busy_cores, "other_cpus_busy_cores": other / wall,
        "attributed_busy_cores": attributed / wall,
        "unattributed_busy_cores": (busy - attributed) / wall,
        "kthreads_busy_cores": kthreads / hz / wall,
        "pinned_cpu_busy_cores": pinned_busy / wall,
        # The tool's own CPU time (every thread of it, io_uring's io-wq workers included) as a
        # share of the pinned CPU's busy time: well under 1 means something else ran there.
        "tool_share_of_pinned_cpu": (ru.ru_utime + ru.ru_stime) / pinned_busy if pinned_busy else 0.0,
        "user_ns_per_io": ru.ru_utime / ios * 1e9,
        "sys_ns_per_io": ru.ru_stime / ios * 1e9,
        "ctx_switches_per_io": (ru.ru_nvcsw + ru.ru_nivcsw) / ios,
        "iops_per_busy_core": iops / busy_cores,
        "iops_per_attributed_busy_core": iops / (attributed / wall),
    }


def commands(row, args, iolab, kind, target):
    name, iolab_args, fio_args, _ = row
    iolab_target, fio_target = TARGET_OPTS[kind]
    pin = ["taskset", "-c", str(args.cpu)]
    ic = pin + [iolab, "run", "-q", "--cpus", str(args.cpu), "--rw", "randread", "--bs", "4k",
                "--runtime", f"{args.runtime}s", "--json", "-"] + iolab_target + iolab_args + ([target] if target else [])
    fc = pin + [args.fio] + ([f"--filename={target}"] if target else []) + [f"--runtime={args.runtime}",
                f"--cpus_allowed={args.cpu}"] + FIO_COMMON + fio_target + fio_args + args.fio_extra.split()
    return {"iolab": ic, "fio": fc}


def med(runs, key):
    return statistics.median(r[key] for r in runs)


def summarize(results):
    rows = []
    for name, target, runs in results:
        i = [r for r in runs if r["tool"] == "iolab"]
        f = [r for r in runs if r["tool"] == "fio"]
        s = {"row": name, "ipbc_target": target, "reps": len(i)}
        for tool, rs in (("iolab", i), ("fio", f)):
            for k in ("iops", "user_ns_per_io", "sys_ns_per_io", "ipbc", "busy_cores",
                      "attributed_busy_cores", "ctx_switches_per_io"):
                s[f"{tool}_{k}"] = med(rs, k)
            s[f"{tool}_attributed_runs"] = sum(r["busy_basis"] == "attributed" for r in rs)
            s[f"{tool}_io_wq_max"] = max(r["io_wq_workers"] for r in rs)
        s["iops_ratio"] = s["iolab_iops"] / s["fio_iops"]
        # Every I/O's latency recorded by both tools (fio's lat samples against its I/Os).
        s["every_io_recorded"] = all(r["lat_samples"] == r["ios"] for r in runs)
        s["user_ratio"] = s["fio_user_ns_per_io"] / s["iolab_user_ns_per_io"]  # fio / iolab, want >= 3
        s["ipbc_ratio"] = s["iolab_ipbc"] / s["fio_ipbc"]
        s["user_pass"] = s["iolab_user_ns_per_io"] <= USER_TARGET * s["fio_user_ns_per_io"]
        s["ipbc_pass"] = s["ipbc_ratio"] >= target
        rows.append(s)
    return rows


def pf(ok):
    return "PASS" if ok else "FAIL"


def table(rows, markdown):
    head = ["row", "iolab IOPS", "fio IOPS", "iolab/fio IOPS", "lat every I/O", "iolab user ns/IO", "fio user ns/IO", "fio/iolab user",
            "user ≤1/3", "iolab IOPS/busy core", "fio IOPS/busy core", "iolab/fio", "target", "IOPS/busy core", "shared runs",
            "io-wq workers iolab/fio"]
    body = []
    for s in rows:
        body.append([
            s["row"], f"{s['iolab_iops'] / 1e3:.1f} k", f"{s['fio_iops'] / 1e3:.1f} k", f"{s['iops_ratio']:.2f}x",
            "yes" if s["every_io_recorded"] else "NO",
            f"{s['iolab_user_ns_per_io']:.0f}", f"{s['fio_user_ns_per_io']:.0f}", f"{s['user_ratio']:.2f}x",
            pf(s["user_pass"]), f"{s['iolab_ipbc'] / 1e3:.1f} k",
            f"{s['fio_ipbc'] / 1e3:.1f} k", f"{s['ipbc_ratio']:.3f}x",
            f"≥{s['ipbc_target']:.2f}x", pf(s["ipbc_pass"]),
            f"{s['iolab_attributed_runs'] + s['fio_attributed_runs']}/{2 * s['reps']}",
            f"{s['iolab_io_wq_max']}/{s['fio_io_wq_max']}",
        ])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    w = [max(len(str(x[c])) for x in [head] + body) for c in range(len(head))]
    fmt = lambda r: "  ".join(str(x).ljust(w[c]) if c == 0 else str(x).rjust(w[c]) for c, x in enumerate(r))
    return "\n".join([fmt(head), fmt(["-" * n for n in w])] + [fmt(r) for r in body])


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"kernel": os.uname().release, "cpu_model": model, "cpus": os.cpu_count(),
            "clocksource": open("/sys/devices/system/clocksource/clocksource0/current_clocksource").read().strip()}


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iolab", default=os.path.join(root, "target/release/iolab"))
    ap.add_argument("--fio", default="/usr/bin/fio")
    ap.add_argument("--runtime", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--reps", type=int, default=3, help="runs per tool and row (default 3)")
    ap.add_argument("--cpu", type=int, default=1, help="CPU both tools are pinned to (default 1)")
    ap.add_argument("--target", choices=["both", "zram", "pagecache", "null"], default="both",
                    help="zram: /dev/zram0, O_DIRECT (io_uring reads go to io-wq); pagecache: a file held in the "
                         "page cache, buffered (io_uring completes inline); both (default): each, with its own table; "
                         "null: no I/O (iolab -i null, fio --ioengine=null), each tool's own cost, its own rows")
    ap.add_argument("--size", default="1G", help="zram disksize if it has to be set, and the page-cache file's size (default 1G)")
    ap.add_argument("--reuse-zram", action="store_true", help="use an already initialised zram0, overwriting it")
    ap.add_argument("--file", help="page-cache target: this existing file on a disk filesystem (read, never written) "
                                   "instead of a new one in /var/tmp")
    ap.add_argument("--rows", default="", help="comma-separated row numbers to run (1-4), default all")
    ap.add_argument("--pause", type=float, default=0.0, help="extra seconds of idle before each run (default 0)")
    ap.add_argument("--noise", type=float, default=0.05,
                    help="a run is quiet if busy time not attributable to it (other programs) stays under this many "
                         "cores and its tool had at least 95%% of --cpu's busy time (default 0.05)")
    ap.add_argument("--max-wait", type=float, default=120,
                    help="before each run, wait up to this many seconds for the machine to be idle (default 120)")
    ap.add_argument("--retries", type=int, default=3,
                    help="reruns of a run the machine was not quiet for; after them, attributed busy is used (default 3)")
    ap.add_argument("--fio-extra", default="", help="more fio options, appended (later ones win)")
    ap.add_argument("--json", help="write every run and the summary to this file")
    ap.add_argument("--markdown", help="write the table as Markdown to this file")
    args = ap.parse_args()

    if os.geteuid() != 0 and args.target != "null":
        die("needs root (zram set-up, O_DIRECT on a block device)")
    for tool in ("taskset", "dd", args.fio):
        if shutil.which(tool) is None:
            die(f"{tool} not found")
    if not os.access(args.iolab, os.X_OK):
        die(f"{args.iolab} not found: cargo build --release")
    all_rows = NULL_ROWS if args.target == "null" else ROWS
    rows = all_rows
    if args.rows:
        rows = [all_rows[int(x) - 1] for x in args.rows.split(",")]
    hz = os.sysconf("SC_CLK_TCK")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    size = int(args.size[:-1]) * mult[args.size[-1].lower()] if args.size[-1].isalpha() else int(args.size)

    workdir = tempfile.mkdtemp(prefix="vs_fio.")
    # Benchmark a snapshot of the binary, so a rebuild during the run cannot change it.
    iolab = os.path.join(workdir, "iolab")
    shutil.copy2(args.iolab, iolab)
    with open(iolab, "rb") as f:
        iolab_sha = hashlib.sha256(f.read()).hexdigest()
    fio_version = subprocess.run([args.fio, "--version"], capture_output=True, text=True).stdout.strip()
    git = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = ["zram", "pagecache"] if args.target == "both" else [args.target]
    zram = pagefile = None
    rows_of = {k: [r for r in rows if (k, r[0]) not in NOT_ON] for k in kinds}
    all_runs = {(k, r[0]): [] for k in kinds for r in rows_of[k]}
    try:
        info = machine()
        print(f"# {info['kernel']}, {info['cpu_model']} x{info['cpus']}, clocksource {info['clocksource']}; "
              f"{fio_version}; iolab binary sha256 {iolab_sha[:12]} (repository now at {git})")
        paths = {"null": None}
        if "zram" in kinds:
            zram = Zram(size, args.reuse_zram)
            paths["zram"] = zram.dev
            print(f"# target zram: /dev/{ZRAM} {zram.size >> 20} MiB filled with random data "
                  f"(mm_stat {' '.join(zram.mm_stat[:3])}), O_DIRECT")
        if "pagecache" in kinds:
            pagefile = PageCacheFile(args.file, size)
            paths["pagecache"] = pagefile.path
            print(f"# target pagecache: {pagefile.path} ({pagefile.fs}) {pagefile.size >> 20} MiB, all pages cached, "
                  "buffered reads")
        print(f"# {args.runtime} s x {args.reps} reps per tool, target and row, pinned to CPU {args.cpu}", flush=True)
        for rep in range(args.reps):
            for kind in kinds:
                for row in rows_of[kind]:
                    cmds = commands(row, args, iolab, kind, paths[kind])
                    order = ["iolab", "fio"] if rep % 2 == 0 else ["fio", "iolab"]
                    for tool in order:
                        all_runs[(kind, row[0])].append(run_until_quiet(tool, cmds[tool], kind, row[0], rep, args,
                                                                        workdir, hz, pagefile))
    finally:
        clean_up(zram, pagefile, workdir)

    summaries = {}
    for kind in kinds:
        summaries[kind] = summarize([(r[0], r[3], all_runs[(kind, r[0])]) for r in rows_of[kind]])
        print(f"\n## target {kind}: {TARGET_TITLE[kind]}\n")
        print(table(summaries[kind], markdown=False))
        for r in rows:
            if (kind, r[0]) in NOT_ON:
                print(f"({r[0]}: not run on {kind}: {NOT_ON[(kind, r[0])]})")
        print(f"{kind}: {'all rows PASS' if all_pass(summaries[kind]) else 'some rows FAIL'}")
        punted = [s["row"] for s in summaries[kind] if not s["ipbc_pass"] and s.get("iolab_io_wq_max", 0) > 0
                  and s.get("fio_io_wq_max", 0) > 0]
        if punted:
            print(f"({', '.join(punted)}: both tools' reads went through an io-wq worker sharing CPU {args.cpu}; "
                  "the kernel's hand-off and the scheduler decide IOPS per busy core there, not the tool: "
                  "see docs/benchmarks.md, 'The io_uring rows on zram')")
    if args.markdown:
        with open(args.markdown, "w") as f:
            for kind in kinds:
                f.write(f"Target {kind}: {TARGET_TITLE[kind]}\n\n" + table(summaries[kind], markdown=True) + "\n\n")
                f.writelines(f"{r[0]}: not run on {kind}: {NOT_ON[(kind, r[0])]}\n\n" for r in rows if (kind, r[0]) in NOT_ON)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "fio_version": fio_version, "iolab_git": git,
                       "iolab_sha256": iolab_sha, "args": vars(args), "summary": summaries,
                       "runs": {f"{k} / {r}": v for (k, r), v in all_runs.items()}}, f, indent=1)
    ok = all(all_pass(s) for s in summaries.values())
    print(f"\n{'all rows PASS on every target' if ok else 'some rows FAIL'}")
    return 0 if ok else 1


TARGET_TITLE = {
    "zram": "/dev/zram0, O_DIRECT (io_uring reads punted to io-wq)",
    "pagecache": "file in the page cache, buffered (io_uring reads complete inline)",
    "null": "no I/O (iolab -i null, fio --ioengine=null): each tool's own cost per I/O",
}


def clean_up(zram, pagefile, workdir):
    """A benchmark's end, whatever happened: its targets put back (zram reset where it was set up,
    the page-cache file removed where made) and its work directory removed."""
    if zram:
        zram.close()
    if pagefile:
        pagefile.close()
    shutil.rmtree(workdir, ignore_errors=True)


def all_pass(summary):
    return all(s["user_pass"] and s["ipbc_pass"] for s in summary)


def run_until_quiet(tool, cmd, kind, row_name, rep, args, workdir, hz, pagefile, parse=parse_output):
    """One measured run, repeated while the machine was not quiet (up to --retries)."""
    for attempt in range(args.retries + 1):
        time.sleep(args.pause)
        waited = wait_quiet(args.cpu, hz, args.noise, args.max_wait)
        if waited > 1.5:
            print(f"  (waited {waited:.0f} s for the machine to go quiet)", flush=True)
        r = measure(tool, cmd, workdir, args.cpu, hz, parse)
        r["rep"], r["attempt"], r["target"] = rep, attempt, kind
        # Pages missing from the cache would be read from the disk: the file must stay whole.
        r["resident_after"] = pagefile.resident() if kind == "pagecache" else None
        if kind == "pagecache" and r["resident_after"] < 1.0:
            die(f"{pagefile.path} lost pages from the page cache during the run ({r['resident_after']:.4f} resident)")
        r["quiet"] = (r["unattributed_busy_cores"] <= args.noise
                      and r["tool_share_of_pinned_cpu"] >= 0.95)
        last = r["quiet"] or attempt == args.retries
        # A run on a machine other programs kept busy is charged only what it is
        # responsible for (see measure()), and marked.
        r["busy_basis"] = "system" if r["quiet"] else "attributed"
        r["ipbc"] = r["iops_per_busy_core"] if r["quiet"] else r["iops_per_attributed_busy_core"]
        print(f"  rep {rep + 1} {kind:<9} {row_name:<22} {tool:<5} {r['iops'] / 1e3:7.1f} k IOPS  "
              f"user {r['user_ns_per_io']:4.0f} ns/IO  sys {r['sys_ns_per_io']:5.0f} ns/IO  "
              f"{r['ctx_switches_per_io']:.2f} cs/IO  busy {r['busy_cores']:.3f} cores "
              f"(attributed {r['attributed_busy_cores']:.3f}, kthreads {r['kthreads_busy_cores']:.3f}; "
              f"tool {r['tool_share_of_pinned_cpu']:.2f} of CPU {args.cpu})  io-wq {r['io_wq_workers']}  "
              f"{r['ipbc'] / 1e3:6.1f} k IOPS/busy core"
              + ("" if r["quiet"] else "  SHARED, " + ("rerun" if not last else "attributed busy used")),
              flush=True)
        if last:
            return r


if __name__ == "__main__":
    sys.exit(main())
