#!/usr/bin/env python3
"""iolab against the leanest peers: fio's t/io_uring, a bare pread loop, the recording floor.

Not a test: a measurement to run by hand (as root) on an otherwise idle machine. Where
benches/vs_fio.py sets iolab against a full tool (fio), this sets it against programs that do
almost nothing but the I/O, so the ratio says how close iolab comes to the least any program
can spend per I/O:

  t/io_uring    fio's own io_uring speed test (t/io_uring.c in fio's source, built here):
                QD32, submit and reap batches of 8, registered buffers, files and ring, one
                thread, no polling; once without latency tracking and once with it (-t1 -T<TSC
                rate>: one TSC read per submit batch and per group of completions, a histogram
                count per I/O). Against `iolab run -i io_uring --qd 32 --batch-submit 8
                --batch-reap 8 --register-buffers true --register-files true`, which times and
                records every I/O always (iolab has no registered ring: see docs/benchmarks.md).
  pread loop    benches/peers_loops.c `pread`: per I/O a random offset, a TSC read, pread(2), a
                TSC read, a histogram count: the least a tool that times each I/O can do.
                Against `iolab run -i psync --qd 1`.
  floor         benches/peers_loops.c `floor`: no I/O; per I/O a random offset, one TSC read, a
                histogram count, nothing else: the recording floor. Against `iolab run -i null
                --qd 1` (target null only).
  floors with iolab's clock reads
                benches/peers_loops.c `floor-qd1` (a TSC read at submission and one at completion
                per I/O) against `-i null --qd 1`, and `floor-batch ... 32 8` (QD32, batches of
                8: one read per I/O plus one per batch) against `-i null --qd 32 --batch-submit 8
                --batch-reap 8`: the floor with the clock reads iolab's accuracy rule allows. Each
                floor also measures a TSC read's cost back to back in the same run; the null table
                gives the clock's share of each floor's time per I/O (target null only).

Targets (--target, default all, each its own table): pagecache (a file held in the page cache,
buffered reads: the kernel path is short, the tools' own cost shows), zram (/dev/zram0 filled
with random data, O_DIRECT: io_uring hands every read to io-wq) and null (no I/O). Their set-up,
the pinning to one CPU, the idle waits before each run, the noise check after it and the
measures (IOPS per busy core, user and system time per I/O) are benches/vs_fio.py's, imported
from it; the two tools of a row run alternately, the order flipping every repetition.

Goals (issue 33), on IOPS per busy core, medians over the repetitions:
  io_uring  >= 1.00x t/io_uring with its latency tracking (both count every I/O's latency; the
            row without tracking is shown for reference, with no goal)
  psync     >= 0.97x the bare pread loop
  null      >= 0.85x the recording floor, or (where the last nanoseconds are the clock read
            itself) of the floor with the clock reads iolab is allowed at QD1: either row meets it

t/io_uring comes from a fio source tree: --fio-src DIR, else a clone of
https://github.com/axboe/fio at tag FIO_TAG (needs git and network), built once with
`./configure && make t/io_uring` in a copy under --cache (default ~/.cache/iolab-peers) and kept
there. The C loops are compiled with `cc -O2` at each start.

Usage (from the repository root, after `cargo build --release`):

    sudo python3 benches/peers.py                                # all targets, 10 s runs, 3 repetitions
    sudo python3 benches/peers.py --fio-src ~/src/fio --target pagecache --runtime 5 --reps 5 \\
        --markdown peers.md --json peers.json
    python3 benches/peers.py --target null                       # the recording floor alone, no root

Only the Python 3 standard library is used.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vs_fio as vf  # noqa: E402  (the harness: targets, pinning, idle waits, measures)

vf.PROG = "peers"
die = vf.die

FIO_TAG = "fio-3.42"
FIO_URL = "https://github.com/axboe/fio"

# The iolab side of each group, and its peers: (row name, peer tool, goal on IOPS per busy core
# or None for a reference row[, goal key: rows sharing a key are alternatives, one PASS meets
# the goal]).  One iolab run per repetition serves every row of its group.
URING = ["-i", "io_uring", "--qd", "32", "--batch-submit", "8", "--batch-reap", "8",
         "--register-buffers", "true", "--register-files", "true"]
GROUPS = {
    "io": [
        ("io_uring QD32 batch 8", URING, [
            ("io_uring vs t/io_uring, no lat tracking", "t-io_uring", None),
            ("io_uring vs t/io_uring -t1", "t-io_uring-t1", 1.00),
        ]),
        ("psync QD1", ["-i", "psync", "--qd", "1"], [
            ("psync QD1 vs bare pread loop", "pread", 0.97),
        ]),
    ],
    "null": [
        ("null QD1", ["-i", "null", "--qd", "1"], [
            ("null QD1 vs recording floor", "floor", 0.85, "null QD1"),
            ("null QD1 vs floor, 2 clock reads/IO", "floor-qd1", 0.85, "null QD1"),
        ]),
        ("null QD32 batch 8", ["-i", "null", "--qd", "32", "--batch-submit", "8", "--batch-reap", "8"], [
            ("null QD32 b8 vs floor, 1 read/IO + 1/batch", "floor-batch", None),
        ]),
    ],
}
TARGET_TITLE = {
    "pagecache": "file in the page cache, buffered (io_uring reads complete inline)",
    "zram": "/dev/zram0, O_DIRECT (io_uring reads punted to io-wq)",
    "null": "no I/O: iolab -i null against the recording floor",
}
IOLAB_TARGET = {"pagecache": ["--buffered"], "zram": [], "null": ["--size", "1g"]}
NULL_SIZE = 1 << 30


def run_quiet(cmd, what, cwd=None, log=None):
    """Run a build step; on failure one line naming it and its log."""
    with open(log, "ab") if log else open(os.devnull, "wb") as out:
        r = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        die(f"{what} failed (exit {r.returncode})" + (f"; see {log}" if log else ""))


def build_t_io_uring(args):
    """The path of a built t/io_uring (cached), and a description of its source."""
    cache = os.path.abspath(os.path.expanduser(args.cache))
    os.makedirs(cache, exist_ok=True)
    if args.fio_src:
        src = os.path.abspath(os.path.expanduser(args.fio_src))
        if not os.path.isfile(os.path.join(src, "t", "io_uring.c")) or not os.path.isfile(os.path.join(src, "configure")):
            die(f"--fio-src {args.fio_src}: no t/io_uring.c and configure there (not a fio source tree)")
        head = subprocess.run(["git", "-C", src, "describe", "--always", "--tags", "--dirty"], capture_output=True,
                              text=True).stdout.strip() if shutil.which("git") else ""
        with open(os.path.join(src, "t", "io_uring.c"), "rb") as f:
            key = (head + "-" if head else "") + hashlib.sha256(f.read()).hexdigest()[:12]
        origin = f"{src} ({head or 'not a git tree'})"
    else:
        src, key, origin = None, FIO_TAG, f"{FIO_URL} at {FIO_TAG}"
    binary = os.path.join(cache, f"t-io_uring-{key}")
    if os.access(binary, os.X_OK):
        return binary, origin
    for tool in ("make", "cc"):
        if shutil.which(tool) is None:
            die(f"{tool} not found: building t/io_uring needs make and a C compiler")
    build = os.path.join(cache, f"build-{key}")
    shutil.rmtree(build, ignore_errors=True)
    if src:
        # A copy: the user's tree is left as it is (no configure output, no objects).
        shutil.copytree(src, build, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    else:
        if shutil.which("git") is None:
            die(f"t/io_uring needs fio's source: pass --fio-src DIR (a fio source tree), or install git and have "
                f"network access to clone {FIO_URL}; --target null needs neither")
        r = subprocess.run(["git", "clone", "--quiet", "--depth", "1", "--branch", FIO_TAG, FIO_URL, build],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
        if r.returncode != 0:
            shutil.rmtree(build, ignore_errors=True)
            last = (r.stderr.strip().splitlines() or ["?"])[-1]
            die(f"t/io_uring needs fio's source: pass --fio-src DIR (a fio source tree), or network access to clone "
                f"{FIO_URL} (git said: {last}); --target null needs neither")
    log = os.path.join(cache, f"build-{key}.log")
    print(f"# building t/io_uring from {origin} in {build} (log {log})", flush=True)
    run_quiet(["./configure"], "fio's ./configure", cwd=build, log=log)
    run_quiet(["make", f"-j{os.cpu_count() or 1}", "t/io_uring"], "make t/io_uring", cwd=build, log=log)
    shutil.copy2(os.path.join(build, "t", "io_uring"), binary)
    return binary, origin


def build_loops(workdir):
    if shutil.which("cc") is None:
        die("cc not found: the pread loop and the recording floor are compiled with cc -O2")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers_loops.c")
    out = os.path.join(workdir, "peers_loops")
    r = subprocess.run(["cc", "-O2", "-o", out, src], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"cc -O2 {src} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return out


IOPS_LINE = re.compile(r"^IOPS=([0-9.]+)([MK]?),", re.M)
P50 = re.compile(r"\b50\.0+th=\[\s*(\d+)\]")
UNIT_NS = {"tsc ticks": None, "usec": 1e3, "nsec": 1.0}


def parse(tool, text, runtime=None, tsc_hz=None):
    """(I/Os, IOPS, latencies recorded, p50 ns, io-wq CPU s) of one run (vs_fio.parse_output's shape)."""
    if tool == "iolab":
        return vf.parse_output(tool, text)
    if tool.startswith("t-io_uring"):
        # t/io_uring prints its IOPS once a second (the last, partial second not at all) and
        # no total: the mean of those lines is its rate, and the I/Os over the run's time are
        # estimated from it.
        if "IO errors" in text or "unexpected ret" in text:
            die(f"t/io_uring reported errors:\n{text[-2000:]}")
        per_s = [float(v) * {"M": 1e6, "K": 1e3, "": 1}[u] for v, u in IOPS_LINE.findall(text)]
        if not per_s:
            die(f"t/io_uring printed no IOPS line:\n{text[-2000:]}")
        iops = statistics.mean(per_s)
        p50 = None
        m = P50.search(text)
        if m:
            unit = next((u for u in UNIT_NS if f"percentiles ({u})" in text), None)
            scale = UNIT_NS.get(unit) if unit != "tsc ticks" else (1e9 / tsc_hz if tsc_hz else None)
            p50 = int(m.group(1)) * scale if scale else None
        return round(iops * runtime), iops, None, p50, None
    d = json.loads(text)
    return d["ios"], d["iops"], d["lat_samples"], d["lat_p50_ns"], None


def peer_command(peer, pin, args, kind, target, size, tio, loops, tsc_hz):
    if peer.startswith("t-io_uring"):
        lat = ["-t1", f"-T{tsc_hz}"] if peer.endswith("-t1") else ["-t0"]
        return pin + [tio, "-d32", "-s8", "-c8", "-b4096", "-p0", "-B1", "-F1", "-X1", "-n1", "-R1",
                      f"-O{0 if kind == 'pagecache' else 1}"] + lat + [f"-r{args.runtime}", target]
    if peer == "pread":
        return pin + [loops, "pread", target, str(size), str(args.runtime), "0" if kind == "pagecache" else "1"]
    if peer == "floor-batch":
        return pin + [loops, "floor-batch", str(NULL_SIZE), str(args.runtime), "32", "8"]
    return pin + [loops, peer, str(NULL_SIZE), str(args.runtime)]


def clock_figures(tool, workdir):
    """The clock's figures of the run just measured, from its output (vf.measure keeps it in
    WORKDIR/TOOL.json): a floor's back-to-back TSC read cost and reads per I/O, iolab's own
    measured read cost (its record's environment.clock.read_cost_ns)."""
    try:
        with open(os.path.join(workdir, f"{tool}.json")) as f:
            d = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    if tool == "iolab":
        cost = ((d.get("environment") or {}).get("clock") or {}).get("read_cost_ns")
        return {} if cost is None else {"clock_read_ns": cost}
    if "clock_read_ns" in d:
        return {"clock_read_ns": d["clock_read_ns"], "clock_reads_per_io": d["clock_reads_per_io"]}
    return {}


def spread(runs, key):
    v = [r[key] for r in runs]
    return statistics.median(v), min(v), max(v)


def summarize(rows):
    out = []
    for name, goal, key, iolab_runs, peer_runs in rows:
        s = {"row": name, "goal": goal, "goal_key": key, "reps": len(peer_runs)}
        for tool, rs in (("iolab", iolab_runs), ("peer", peer_runs)):
            s[f"{tool}_ipbc"], s[f"{tool}_ipbc_min"], s[f"{tool}_ipbc_max"] = spread(rs, "ipbc")
            for k in ("iops", "user_ns_per_io", "sys_ns_per_io", "busy_cores", "ctx_switches_per_io"):
                s[f"{tool}_{k}"] = statistics.median(r[k] for r in rs)
            p50 = [r["lat_p50_ns"] for r in rs if r["lat_p50_ns"] is not None]
            s[f"{tool}_lat_p50_ns"] = statistics.median(p50) if p50 else None
            s[f"{tool}_shared_runs"] = sum(r["busy_basis"] == "attributed" for r in rs)
            s[f"{tool}_io_wq_max"] = max(r["io_wq_workers"] for r in rs)
        s["iolab_every_io_recorded"] = all(r["lat_samples"] == r["ios"] for r in iolab_runs)
        s["iops_ratio"] = s["iolab_iops"] / s["peer_iops"]
        s["ipbc_ratio"] = s["iolab_ipbc"] / s["peer_ipbc"]
        s["pass"] = None if goal is None else s["ipbc_ratio"] >= goal
        if all("clock_reads_per_io" in r for r in peer_runs):
            # The clock's share of the floor's time per I/O (on a busy core), and what iolab
            # spends per I/O beyond the floor.
            s["peer_clock_read_ns"] = statistics.median(r["clock_read_ns"] for r in peer_runs)
            s["peer_clock_reads_per_io"] = peer_runs[0]["clock_reads_per_io"]
            s["peer_ns_per_io"] = 1e9 / s["peer_ipbc"]
            s["iolab_ns_per_io"] = 1e9 / s["iolab_ipbc"]
            s["peer_clock_ns_per_io"] = s["peer_clock_read_ns"] * s["peer_clock_reads_per_io"]
            s["peer_clock_share"] = s["peer_clock_ns_per_io"] / s["peer_ns_per_io"]
            costs = [r["clock_read_ns"] for r in iolab_runs if "clock_read_ns" in r]
            s["iolab_clock_read_ns"] = statistics.median(costs) if costs else None
        out.append(s)
    return out


def table(rows, markdown):
    head = ["row", "iolab IOPS", "peer IOPS", "iolab/peer IOPS", "iolab user+sys ns/IO", "peer user+sys ns/IO",
            "iolab IOPS/busy core (min-max)", "peer IOPS/busy core (min-max)", "iolab/peer per busy core", "goal",
            "result", "shared runs", "io-wq iolab/peer"]
    body = []
    k = lambda v: f"{v / 1e3:.1f} k"
    for s in rows:
        body.append([
            s["row"], k(s["iolab_iops"]), k(s["peer_iops"]), f"{s['iops_ratio']:.3f}x",
            f"{s['iolab_user_ns_per_io']:.0f}+{s['iolab_sys_ns_per_io']:.0f}",
            f"{s['peer_user_ns_per_io']:.0f}+{s['peer_sys_ns_per_io']:.0f}",
            f"{k(s['iolab_ipbc'])} ({s['iolab_ipbc_min'] / 1e3:.1f}-{s['iolab_ipbc_max'] / 1e3:.1f})",
            f"{k(s['peer_ipbc'])} ({s['peer_ipbc_min'] / 1e3:.1f}-{s['peer_ipbc_max'] / 1e3:.1f})",
            f"{s['ipbc_ratio']:.3f}x", "—" if s["goal"] is None else f"≥{s['goal']:.2f}x",
            "reference" if s["pass"] is None else ("PASS" if s["pass"] else "FAIL"),
            f"{s['iolab_shared_runs'] + s['peer_shared_runs']}/{2 * s['reps']}",
            f"{s['iolab_io_wq_max']}/{s['peer_io_wq_max']}",
        ])
    if all("peer_clock_share" in s for s in rows):
        head += ["iolab/peer ns/IO", "peer clock reads/IO x ns", "clock share of peer", "iolab clock read ns"]
        for s, b in zip(rows, body):
            b += [f"{s['iolab_ns_per_io']:.1f}/{s['peer_ns_per_io']:.1f}",
                  f"{s['peer_clock_reads_per_io']:.3g} x {s['peer_clock_read_ns']:.1f}",
                  f"{100 * s['peer_clock_share']:.0f} %",
                  "—" if s["iolab_clock_read_ns"] is None else f"{s['iolab_clock_read_ns']:.1f}"]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])
    w = [max(len(str(x[c])) for x in [head] + body) for c in range(len(head))]
    fmt = lambda r: "  ".join(str(x).ljust(w[c]) if c == 0 else str(x).rjust(w[c]) for c, x in enumerate(r))
    return "\n".join([fmt(head), fmt(["-" * n for n in w])] + [fmt(r) for r in body])


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iolab", default=os.path.join(root, "target/release/iolab"))
    ap.add_argument("--fio-src", help="a fio source tree to build t/io_uring from (default: clone "
                                      f"{FIO_URL} at {FIO_TAG})")
    ap.add_argument("--cache", default="~/.cache/iolab-peers", help="where t/io_uring is built and kept "
                                                                    "(default ~/.cache/iolab-peers)")
    ap.add_argument("--target", choices=["all", "pagecache", "zram", "null"], default="all",
                    help="pagecache: a file held in the page cache, buffered; zram: /dev/zram0, O_DIRECT; null: "
                         "no I/O (iolab -i null against the recording floor); all (default): each, its own table")
    ap.add_argument("--runtime", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--reps", type=int, default=3, help="runs per tool and row (default 3)")
    ap.add_argument("--cpu", type=int, default=1, help="CPU every run is pinned to (default 1)")
    ap.add_argument("--size", default="1G", help="zram disksize if it has to be set, and the page-cache file's size "
                                                 "(default 1G)")
    ap.add_argument("--reuse-zram", action="store_true", help="use an already initialised zram0, overwriting it")
    ap.add_argument("--file", help="page-cache target: this existing file on a disk filesystem (read, never written) "
                                   "instead of a new one in /var/tmp")
    ap.add_argument("--pause", type=float, default=0.0, help="extra seconds of idle before each run (default 0)")
    ap.add_argument("--noise", type=float, default=0.05, help="as in vs_fio.py (default 0.05 cores)")
    ap.add_argument("--max-wait", type=float, default=120,
                    help="before each run, wait up to this many seconds for the machine to be idle (default 120)")
    ap.add_argument("--retries", type=int, default=3, help="reruns of a run the machine was not quiet for (default 3)")
    ap.add_argument("--json", help="write every run and the summary to this file")
    ap.add_argument("--markdown", help="write the tables as Markdown to this file")
    args = ap.parse_args()

    kinds = ["pagecache", "zram", "null"] if args.target == "all" else [args.target]
    if args.runtime < 2:
        die("--runtime must be at least 2 s (t/io_uring prints its rate once a second, after the first)")
    if args.reps < 1:
        die("--reps must be at least 1")
    if os.geteuid() != 0 and kinds != ["null"]:
        die("needs root (zram set-up, O_DIRECT on a block device); --target null does not")
    for tool in ("taskset", "dd"):
        if shutil.which(tool) is None:
            die(f"{tool} not found")
    if not os.access(args.iolab, os.X_OK):
        die(f"{args.iolab} not found: cargo build --release")
    for name in ("json", "markdown"):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    hz = os.sysconf("SC_CLK_TCK")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    try:
        size = int(args.size[:-1]) * mult[args.size[-1].lower()] if args.size[-1].isalpha() else int(args.size)
    except (KeyError, ValueError, IndexError):
        die(f"--size {args.size}: not a size (e.g. 1G, 512M)")
    tio, tio_origin = build_t_io_uring(args) if kinds != ["null"] else (None, None)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = tempfile.mkdtemp(prefix="peers.")
    zram = pagefile = None
    runs = {}  # (kind, row or iolab group) -> runs
    try:
        # Benchmark a snapshot of the binary, so a rebuild during the benchmark changes nothing.
        iolab = os.path.join(workdir, "iolab")
        shutil.copy2(args.iolab, iolab)
        with open(iolab, "rb") as f:
            iolab_sha = hashlib.sha256(f.read()).hexdigest()
        loops = build_loops(workdir)
        tsc_hz = int(subprocess.run([loops, "tsc-hz"], capture_output=True, text=True, check=True).stdout)
        git = subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                             text=True).stdout.strip()
        tio_sha = None
        if tio:
            with open(tio, "rb") as f:
                tio_sha = hashlib.sha256(f.read()).hexdigest()
        # t/io_uring -T writes its rate to ./tsc-rate: keep that in the work directory.
        os.chdir(workdir)
        info = vf.machine()
        print(f"# {info['kernel']}, {info['cpu_model']} x{info['cpus']}, clocksource {info['clocksource']}, "
              f"TSC {tsc_hz / 1e6:.3f} MHz; iolab binary sha256 {iolab_sha[:12]} (repository now at {git})"
              + (f"; t/io_uring from {tio_origin}" if tio else ""))
        paths, sizes = {"null": None}, {"null": NULL_SIZE}
        if "zram" in kinds:
            zram = vf.Zram(size, args.reuse_zram)
            paths["zram"], sizes["zram"] = zram.dev, zram.size
            print(f"# target zram: /dev/{vf.ZRAM} {zram.size >> 20} MiB filled with random data, O_DIRECT")
        if "pagecache" in kinds:
            pagefile = vf.PageCacheFile(args.file, size)
            paths["pagecache"], sizes["pagecache"] = pagefile.path, pagefile.size
            print(f"# target pagecache: {pagefile.path} ({pagefile.fs}) {pagefile.size >> 20} MiB, all pages cached, "
                  "buffered reads")
        print(f"# {args.runtime} s x {args.reps} reps per tool, target and row, pinned to CPU {args.cpu}", flush=True)
        pin = ["taskset", "-c", str(args.cpu)]
        parser = lambda tool, text: parse(tool, text, args.runtime, tsc_hz)
        for rep in range(args.reps):
            for kind in kinds:
                for gname, iolab_args, peers in GROUPS["null" if kind == "null" else "io"]:
                    target = paths[kind]
                    ic = pin + [iolab, "run", "-q", "--cpus", str(args.cpu), "--rw", "randread", "--bs", "4k",
                                "--runtime", f"{args.runtime}s", "--json", "-"] + IOLAB_TARGET[kind] + iolab_args \
                        + ([target] if target else [])
                    cmds = [("iolab", gname, ic)] + [
                        (p[1], p[0], peer_command(p[1], pin, args, kind, target, sizes[kind], tio, loops, tsc_hz))
                        for p in peers]
                    # Alternate: iolab first on even repetitions, last on odd ones.
                    for tool, key, cmd in (cmds if rep % 2 == 0 else cmds[::-1]):
                        r = vf.run_until_quiet(tool, cmd, kind, key, rep, args, workdir, hz, pagefile, parser)
                        r.update(clock_figures(tool, workdir))
                        runs.setdefault((kind, key), []).append(r)
    finally:
        os.chdir(root)
        vf.clean_up(zram, pagefile, workdir)

    summaries = {}
    for kind in kinds:
        rows = [(p[0], p[2], p[3] if len(p) > 3 else p[0], runs[(kind, gname)], runs[(kind, p[0])])
                for gname, _, peers in GROUPS["null" if kind == "null" else "io"] for p in peers]
        summaries[kind] = summarize(rows)
        print(f"\n## target {kind}: {TARGET_TITLE[kind]}\n")
        print(table(summaries[kind], markdown=False))
        if not all(s["iolab_every_io_recorded"] for s in summaries[kind]):
            print("(iolab recorded fewer latencies than I/Os in some run)")
    # A goal is met when any row of its key passes (alternatives: the null floors at QD1).
    goals = {}
    for kind, ss in summaries.items():
        for s in ss:
            if s["pass"] is not None:
                goals.setdefault((kind, s["goal_key"]), []).append(s["pass"])
    ok = all(any(v) for v in goals.values())
    if args.markdown:
        with open(args.markdown, "w") as f:
            for kind in kinds:
                f.write(f"Target {kind}: {TARGET_TITLE[kind]}\n\n" + table(summaries[kind], markdown=True) + "\n\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": vf.machine(), "tsc_hz": tsc_hz, "iolab_git": git, "iolab_sha256": iolab_sha,
                       "t_io_uring": {"source": tio_origin, "sha256": tio_sha}, "args": vars(args),
                       "summary": summaries, "runs": {f"{k} / {r}": v for (k, r), v in runs.items()}}, f, indent=1)
    print(f"\n{'every goal PASS' if ok else 'some goals FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
