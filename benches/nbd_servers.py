#!/usr/bin/env python3
"""`iolab serve` against Debian's nbd-server: the server's own CPU per request, same file, same client.
Not a test: a measurement to run by hand (as root) on an otherwise idle machine.

Both servers serve one file held in the page cache (buffered reads: nbd-server has no O_DIRECT),
on loopback. One client, this script, opens --connections connections (fixed newstyle, NBD_OPT_GO)
and keeps --depth reads of --bs bytes in flight on each (random offsets, simple replies) for
--runtime seconds. The figure is the server's CPU time per request: user + system time of the
server's process tree (nbd-server forks a child per connection; iolab serves from threads), read
from /proc/<pid>/task/*/stat while the connections are open, divided by the requests answered.
Both servers are measured alternately, --reps times each, on the same CPU (--server-cpu) with the
client pinned elsewhere (--client-cpu): the client's speed bounds the request rate, not the ratio.

iolab's server is run through each back end asked for (--iolab-interfaces, default io_uring and
psync; vfio-nvme needs an NVMe controller and is left out here). The table gives each server's
median CPU per request, min and max, the requests per second the client reached, and iolab's
CPU per request as a ratio of nbd-server's (below 1: iolab's server costs less).

Usage (from the repository root, after `cargo build --release`):
  sudo python3 benches/nbd_servers.py                      # 256 MiB file in /var/tmp, 5 s, 3 reps
  sudo python3 benches/nbd_servers.py --runtime 10 --reps 5 --connections 2 --depth 8
Needs Debian's nbd-server (apt-get install nbd-server); says so in one line where it is missing.
"""
import argparse
import os
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPT_REPLY_MAGIC = 0x3E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
OPT_GO = 7
REP_ACK = 1
REP_INFO = 3
CMD_READ = 0
CMD_DISC = 2
FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2


def recv_exact(s, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the server closed the connection")
        got += k
    return bytes(buf)


def connect(port, export):
    """Fixed-newstyle handshake with NBD_OPT_GO; returns (socket, export size)."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    magic, opt, flags = struct.unpack(">QQH", recv_exact(s, 18))
    if magic != NBDMAGIC or opt != IHAVEOPT:
        raise ConnectionError("not a newstyle NBD server")
    cflags = FLAG_FIXED_NEWSTYLE | (FLAG_NO_ZEROES if flags & FLAG_NO_ZEROES else 0)
    s.sendall(struct.pack(">I", cflags))
    name = export.encode()
    data = struct.pack(">I", len(name)) + name + struct.pack(">H", 0)
    s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
    size = None
    while True:
        magic, opt, rtype, length = struct.unpack(">QIII", recv_exact(s, 20))
        body = recv_exact(s, length) if length else b""
        if magic != OPT_REPLY_MAGIC:
            raise ConnectionError("bad option reply")
        if rtype == REP_INFO and len(body) >= 12 and struct.unpack(">H", body[:2])[0] == 0:
            size = struct.unpack(">Q", body[2:10])[0]
        elif rtype == REP_ACK:
            break
        elif rtype & 0x80000000:
            raise ConnectionError(f"server refused NBD_OPT_GO: reply type {rtype:#x} {body[:200]!r}")
    if size is None:
        raise ConnectionError("the server named no export size")
    return s, size


def load(port, export, connections, depth, bs, runtime, seed, at_start, at_end):
    """Keep `depth` reads in flight on each connection for `runtime` s; returns (requests answered
    between `at_start()`, called once every connection is open, and `at_end()`, called while they
    still are, seconds)."""
    conns = [connect(port, export) for _ in range(connections)]
    rng = random.Random(seed)
    blocks = conns[0][1] // bs
    cookie = 0
    req = struct.Struct(">IHHQQI")
    rep = struct.Struct(">IIQ")

    def send(s):
        nonlocal cookie
        cookie += 1
        s.sendall(req.pack(REQUEST_MAGIC, 0, CMD_READ, cookie, rng.randrange(blocks) * bs, bs))

    for s, _ in conns:
        for _ in range(depth):
            send(s)
    done = 0
    at_start()
    start = time.perf_counter()
    end = start + runtime
    import selectors

    sel = selectors.DefaultSelector()
    for s, _ in conns:
        sel.register(s, selectors.EVENT_READ)
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            magic, err, _ = rep.unpack(recv_exact(s, rep.size))
            if magic != SIMPLE_REPLY_MAGIC or err:
                raise ConnectionError(f"bad reply: magic {magic:#x} error {err}")
            recv_exact(s, bs)
            done += 1
            send(s)
    elapsed = time.perf_counter() - start
    at_end()
    # Drain what is in flight, then disconnect.
    for s, _ in conns:
        for _ in range(depth):
            recv_exact(s, rep.size)
            recv_exact(s, bs)
        s.sendall(req.pack(REQUEST_MAGIC, 0, CMD_DISC, 0, 0, 0))
        s.close()
    return done, elapsed


def tree_cpu_s(root):
    """User + system seconds of `root` and its descendants, now (each process's own stat: its
    live threads and those that ended)."""
    tick = os.sysconf("SC_CLK_TCK")
    children = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    st = f.read()
                ppid = int(st.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(p))
            except (OSError, ValueError, IndexError):
                pass
    total = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / tick


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start ({proc.returncode}): {proc.stderr.read().decode()[-400:] if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on port {port}")


def start_nbd_server(path, port, cpu, tmp):
    conf = os.path.join(tmp, "nbd-server.conf")
    with open(conf, "w") as f:
        f.write(f"[generic]\nlistenaddr = 127.0.0.1\nport = {port}\n\n[bench]\nexportname = {path}\nreadonly = true\n")
    pidfile = os.path.join(tmp, f"nbd-server.{port}.pid")
    # nbd-server daemonises (its -d serves one client and exits): the daemon is found by its PID
    # file, and stands in for the Popen the caller terminates.
    rc = subprocess.run(["taskset", "-c", str(cpu), "nbd-server", "-C", conf, "-p", pidfile], capture_output=True, text=True)
    if rc.returncode != 0:
        sys.exit(f"nbd-server failed to start ({rc.returncode}): {rc.stderr.strip()[-300:]}")
    for _ in range(100):
        if os.path.exists(pidfile) and open(pidfile).read().strip():
            break
        time.sleep(0.05)
    p = Daemon(int(open(pidfile).read().strip()))
    wait_port(port, p, "nbd-server")
    return p, "bench"


class Daemon:
    """A started daemon by its pid, with the part of Popen's interface used here."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None
        self.stderr = None

    def poll(self):
        return None if os.path.exists(f"/proc/{self.pid}") else 0

    def terminate(self):
        try:
            os.kill(self.pid, 15)
        except ProcessLookupError:
            pass

    def wait(self, timeout=None):
        end = time.time() + (timeout or 1e9)
        while self.poll() is None:
            if time.time() > end:
                raise subprocess.TimeoutExpired("nbd-server", timeout)
            time.sleep(0.05)

    def kill(self):
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


def start_iolab(iolab, interface, path, port, cpu, connections):
    p = subprocess.Popen(
        ["taskset", "-c", str(cpu), iolab, "serve", path, "-i", interface, "--buffered", "--listen", f"127.0.0.1:{port}", "--connections", str(connections)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    # One connection more than the load opens: the readiness probe holds one until the server
    # sees it close.
    wait_port(port, p, f"iolab serve -i {interface}")
    return p, "iolab"


def measure(start, a, seed):
    port = free_port()
    proc, export = start(port)
    try:
        # The CPU clock starts once every connection is open (the handshake is not a request) and
        # stops before they close: the requests answered in between are what it is divided by.
        cpu = {}

        def at_start():
            cpu["start"] = tree_cpu_s(proc.pid)

        def at_end():
            cpu["end"] = tree_cpu_s(proc.pid)

        done, elapsed = load(port, export, a.connections, a.depth, a.bs, a.runtime, seed, at_start, at_end)
        used = cpu["end"] - cpu["start"]
        return {"requests": done, "seconds": elapsed, "cpu_s": used, "cpu_us_per_request": used / done * 1e6, "rate": done / elapsed}
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iolab", default="target/release/iolab")
    ap.add_argument("--iolab-interfaces", default="io_uring,psync")
    ap.add_argument("--file", help="an existing file to serve (default: a new 256 MiB file in /var/tmp, removed after)")
    ap.add_argument("--runtime", type=float, default=5.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--connections", type=int, default=1)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--bs", type=int, default=4096)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    a = ap.parse_args()
    for name, v in [("--runtime", a.runtime), ("--reps", a.reps), ("--connections", a.connections), ("--depth", a.depth), ("--bs", a.bs)]:
        if not (v > 0 and v == v and v != float("inf")):
            sys.exit(f"{name} must be a positive number, not {v}")
    if a.bs % 512 or a.bs > 1 << 20:
        sys.exit(f"--bs {a.bs}: a multiple of 512 up to 1 MiB")
    if not shutil.which("nbd-server"):
        sys.exit("nbd-server is not installed (Debian: apt-get install nbd-server)")
    if not os.access(a.iolab, os.X_OK):
        sys.exit(f"{a.iolab} is not an executable iolab (cargo build --release)")
    os.sched_setaffinity(0, {a.client_cpu})
    tmp = tempfile.mkdtemp(prefix="iolab-nbd-bench.")
    path = a.file
    try:
        if path is None:
            path = os.path.join("/var/tmp", f"iolab-nbd-bench.{os.getpid()}")
            with open(path, "wb") as f:
                for _ in range(256):
                    f.write(os.urandom(1 << 20))
        with open(path, "rb") as f:  # into the page cache
            while f.read(1 << 20):
                pass
        servers = [("nbd-server", lambda port: start_nbd_server(path, port, a.server_cpu, tmp))]
        for i in a.iolab_interfaces.split(","):
            servers.append((f"iolab serve -i {i}", lambda port, i=i: start_iolab(a.iolab, i, path, port, a.server_cpu, a.connections + 1)))
        results = {name: [] for name, _ in servers}
        for rep in range(a.reps):
            for name, start in servers:
                r = measure(start, a, seed=rep)
                results[name].append(r)
                print(f"rep {rep + 1} {name:22} {r['requests']:8d} requests {r['rate']:9.0f}/s  server CPU {r['cpu_us_per_request']:7.2f} us/request", flush=True)
        base = statistics.median(r["cpu_us_per_request"] for r in results["nbd-server"])
        print(f"\n{a.bs} B random reads, {a.connections} connection(s) x {a.depth} in flight, {a.runtime:g} s x {a.reps}, server on CPU {a.server_cpu}")
        print(f"{'server':22} {'CPU us/request (median, min-max)':34} {'requests/s':>10} {'vs nbd-server':>14}")
        for name, _ in servers:
            xs = [r["cpu_us_per_request"] for r in results[name]]
            med = statistics.median(xs)
            rate = statistics.median(r["rate"] for r in results[name])
            print(f"{name:22} {med:8.2f} ({min(xs):.2f}-{max(xs):.2f}){'':14} {rate:10.0f} {med / base:13.2f}x")
    finally:
        if a.file is None and path and os.path.exists(path):
            os.unlink(path)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
