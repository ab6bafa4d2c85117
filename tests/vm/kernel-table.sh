#!/usr/bin/env bash
# Turn VM rig consoles into the Markdown table of docs/kernels.md: one column per kernel booted,
# one row per thing iolab measured (or refused), each cell from the guest checks' RESULT lines.
#
#   tests/vm/kernel-table.sh CONSOLE... > table.md
#
# CONSOLE: what rig.sh printed (its stdout, or the file IOLAB_VM_LOG / target/vm-rig-*.log keeps).
# Several consoles of one kernel (e.g. boots with and without poll queues) are merged; a FAIL in
# any of them stays a FAIL. A row a kernel's boots did not run shows "not run".
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 CONSOLE..." >&2; exit 2; }
for f in "$@"; do [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 2; }; done

# Kernels in version order (the console's `VMRIG BOOT kernel=V` line, escape codes or not).
kernels=$(grep -ho 'VMRIG BOOT kernel=[^ ]*' "$@" | sed 's/.*kernel=//' | sort -uV | tr '\n' ' ')
[ -n "$kernels" ] || { echo "$0: no 'VMRIG BOOT kernel=' line in the consoles given" >&2; exit 1; }

awk -v kernels="$kernels" '
  FNR == 1 { k = "" }
  match($0, /VMRIG BOOT kernel=[^ ]+/) { k = substr($0, RSTART + 18, RLENGTH - 18); boots[k]++; next }
  k != "" && match($0, /VMRIG SCRIPT [^ ]+/) {
    s = substr($0, RSTART + 13, RLENGTH - 13); sub(/.*\/[0-9][0-9]-/, "", s)
    if (index(" " scripts[k] " ", " " s " ") == 0) scripts[k] = scripts[k] (scripts[k] == "" ? "" : " ") s
    next
  }
  k != "" && /^RESULT [^ ]+ (PASS|FAIL|SKIP)/ {
    n = $2; st = $3; d = $0; sub(/^RESULT [^ ]+ [A-Z]+ ?/, "", d)
    count[k, st]++
    if (status[k, n] != "FAIL") { status[k, n] = st; detail[k, n] = d }
  }
  # The first "needs Linux X" (or "Linux X") a message names.
  function needs(d) {
    if (match(d, /needs Linux [0-9]+\.[0-9]+/)) return substr(d, RSTART, RLENGTH)
    if (match(d, /[Ll]inux [0-9]+\.[0-9]+/)) return "needs " substr(d, RSTART, RLENGTH)
    if (match(d, /needs [0-9]+\.[0-9]+/)) return "needs Linux " substr(d, RSTART + 6, RLENGTH - 6)
    return ""
  }
  function field(d, key,   r) {
    if (!match(d, key "=[^ ]+")) return ""
    r = substr(d, RSTART + length(key) + 1, RLENGTH - length(key) - 1); return r
  }
  function quoted(d, key,   r) {
    if (!match(d, key "=\047[^\047]*\047")) return ""
    return substr(d, RSTART + length(key) + 2, RLENGTH - length(key) - 3)
  }
  function short(d, n) { gsub(/\|/, "/", d); return length(d) > n ? substr(d, 1, n - 3) "..." : d }
  # One cell: the first of the RESULT names (space-separated) this kernel has.
  function cell(kk, names, how,   a, i, n, st, d, p, o, q, r) {
    n = split(names, a, " ")
    for (i = 1; i <= n; i++) if ((kk, a[i]) in status) break
    if (i > n) return "not run"
    st = status[kk, a[i]]; d = detail[kk, a[i]]
    if (how == "ring") { r = quoted(d, "ring_used"); return st == "PASS" ? (r == "" ? "(none)" : r) : st ": " short(d, 80) }
    if (how == "dropped") { r = quoted(d, "dropped"); return st == "PASS" ? (r == "" ? "none" : r) : st ": " short(d, 80) }
    if (st == "FAIL") return "**FAIL**: " short(d, 100)
    if (d ~ /^(exit 2: )?refused/ || (st == "SKIP" && d ~ /needs|or later/)) {
      q = needs(d); return "refused" (q == "" ? "" : ", " q)
    }
    if (st == "SKIP") return "skipped: " short(d, 90)
    if (d ~ /^exit 1: --strict/) {
      return "the run fails (--strict): observed " (match(d, /observed was [a-z]+/) ? substr(d, RSTART + 13, RLENGTH - 13) : "otherwise")
    }
    p = field(d, "path"); o = field(d, "observed"); q = field(d, "irqs")
    if (how == "detail" || p == "") return d == "" ? "yes" : "yes: " short(d, 70)
    r = (o != "" && o != p) ? p " (observed " o ")" : p
    if (q != "") r = r ", " q " IRQs"
    if (how == "ios" && field(d, "ios") != "") r = field(d, "ios") " I/Os " r
    if (how == "sleeps" && field(d, "sleeps/IO") != "") r = r ", " field(d, "sleeps/IO") " sleeps/IO"
    if (field(d, "sqpoll_sleeps/IO") != "") r = r ", SQ thread " field(d, "sqpoll_sleeps/IO") " sleeps/IO, mean " field(d, "lat_mean_us") " µs"
    return r
  }
  function row(label, names, how,   i) {
    line = "| " label
    for (i = 1; i <= nk; i++) line = line " | " cell(K[i], names, how)
    print line " |"
  }
  END {
    nk = split(kernels, K, " ")
    line = "| | "; sep = "|---|"
    for (i = 1; i <= nk; i++) { line = line (i > 1 ? " | " : "") "**" K[i] "**"; sep = sep "---|" }
    print line " |"; print sep
    line = "| checks passed / failed / skipped"
    for (i = 1; i <= nk; i++) line = line " | " count[K[i], "PASS"] + 0 " / " count[K[i], "FAIL"] + 0 " / " count[K[i], "SKIP"] + 0
    print line " |"
    line = "| boots: guest scripts"
    for (i = 1; i <= nk; i++) line = line " | " boots[K[i]] ": " scripts[K[i]]
    print line " |"
    row("io_uring ring setup flags used (syscall submission)", "rings_syscall_irq", "ring")
    row("io_uring setup flags the kernel refused (dropped)", "rings_syscall_irq", "dropped")
    row("io_uring, interrupt completion", "nvme_uring_syscall_irq rings_syscall_irq")
    row("io_uring polled (IOPOLL)", "nvme_uring_syscall_poll rings_syscall_poll")
    row("io_uring SQPOLL + IOPOLL", "nvme_uring_sqpoll_poll")
    row("io_uring `--complete hybrid`, QD8 (interfaces.sh)", "nvme_uring_syscall_hybrid rings_syscall_hybrid rings_hybrid_refusal")
    row("io_uring SQPOLL with unregistered files", "rings_sqpoll_unregistered")
    row("pvsync2 `--complete poll` (RWF_HIPRI)", "nvme_pvsync2_poll")
    row("pvsync2 `--complete poll --strict`", "nvme_pvsync2_strict_poll")
    row("pvsync2 `--complete poll` (polling.sh: io_poll_delay -1)", "polling_pvsync2_poll", "sleeps")
    row("pvsync2 `--complete poll` with io_poll_delay=0 left behind (iolab sets -1, restores)", "polling_pvsync2_poll_classic", "sleeps")
    row("pvsync2 `--complete hybrid` (block layer, io_poll_delay=0 adaptive)", "polling_pvsync2_hybrid", "sleeps")
    row("pvsync2 `--complete hybrid --poll-delay 8`", "polling_pvsync2_hybrid_8", "sleeps")
    row("io_uring `--complete hybrid` (HYBRID_IOPOLL, or the block layer before 5.16)", "polling_uring_hybrid", "sleeps")
    row("io_uring SQPOLL `--complete hybrid` (before 5.16 the SQ thread sleeps in the block layer)", "polling_uring_sqpoll_hybrid nvme_uring_sqpoll_hybrid")
    row("posixaio `--complete poll`", "nvme_posixaio_poll")
    row("libaio", "nvme_libaio_irq")
    row("nvme-passthru (URING_CMD on /dev/ngXnY), interrupt", "passthru_irq_qd8 passthru_old_kernel")
    row("nvme-passthru, polled", "passthru_poll_qd8 passthru_old_kernel")
    row("null_blk poll queues (`poll_queues=`)", "nullb_io_poll")
    row("null_blk io_uring polled", "nullb_uring_syscall_poll")
    row("`--verify` writes read back (NVMe, file backend)", "nvmefile_readback_all_checked", "detail")
    row("I/O schedulers: bfq, polled io_uring", "nvme_sched_bfq_poll")
    row("no poll queues: io_uring poll with `--allow-fallback`", "nvme_uring_poll_fallback nvme_uring_syscall_poll_fallback")
  }
' "$@"
