#!/bin/sh
# The papers' completion paths where this kernel has them (block_poll.rs):
# - synchronous RWF_HIPRI polling (pvsync2 --complete poll) polls up to 5.17 and is ignored from
#   5.18 (iolab expects and observes interrupts);
# - the block layer's hybrid polling (queue/io_poll_delay) for pvsync2 before 5.18 and for
#   io_uring's IOPOLL before 5.16, run with the delay asked for and put back afterwards; a
#   hybrid run sleeps (voluntary context switches) where a classic one spins;
# - io_uring's own HYBRID_IOPOLL from 6.13;
# - elsewhere `--complete hybrid` is refused naming what the kernel lacks.
. /vm/lib.sh
IOS=${VM_IOS:-200}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

section "completion mechanisms on kernel $KREL ($DEV)"
if [ -z "$DEV" ]; then
  result polling_nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null)"
  exit 0
fi
if [ "$(qattr $DEV io_poll)" != 1 ]; then
  result polling SKIP "$DEV cannot poll (queue/io_poll=0): boot with --poll-queues 1"
  exit 0
fi
DELAY0=$(qattr $DEV io_poll_delay)

# sleeps [CLASS]: the voluntary context switches per I/O of the last run's threads of CLASS
# (default: the workload threads).
sleeps() {
  awk -F= -v class="${1:-workload}" '$1 ~ /^cost\.classes\.[0-9]+\.class$/ && $2 == class { split($1, p, "."); i = p[3] }
           /^cost\.classes\.[0-9]+\.voluntary_ctx_switches=/ { split($1, p, "."); v[p[3]] = $2 }
           /^results\.total\.ios=/ { n = $2 }
           END { if (i != "" && n > 0) printf "%.2f", v[i] / n }' "/tmp/$RUN_NAME.flat"
}

# mechanism NAME PATTERN: the record's completion_path.mechanism must match PATTERN, and the
# queue's io_poll_delay must be back to what it was.
mechanism() {
  j completion_path.mechanism | grep -q -- "$2" || problem "completion_path.mechanism='$(j completion_path.mechanism)', want /$2/"
  [ "$(qattr $DEV io_poll_delay)" = "$DELAY0" ] || problem "io_poll_delay is $(qattr $DEV io_poll_delay) after the run, was $DELAY0"
}

# Synchronous polling: RWF_HIPRI.
if kernel_at_least 5 18; then
  run_iolab polling_pvsync2_poll "$CTRL" -i pvsync2 --complete poll --ios $IOS "$DEV"
  check_ok interrupt; mechanism x "ignores"
  report polling_pvsync2_poll "mechanism='$(j completion_path.mechanism)'"
else
  run_iolab polling_pvsync2_poll "$CTRL" -i pvsync2 --complete poll --strict --ios $IOS "$DEV"
  check_ok polled; mechanism x "io_poll_delay=-1"
  report polling_pvsync2_poll "sleeps/IO=$(sleeps) mechanism='$(j completion_path.mechanism)'"
  # A delay left behind by someone else must not turn classic polling into hybrid polling.
  echo 0 > /sys/block/${DEV#/dev/}/queue/io_poll_delay; DELAY0=0
  run_iolab polling_pvsync2_poll_classic "$CTRL" -i pvsync2 --complete poll --strict --ios $IOS "$DEV"
  check_ok polled; mechanism x "io_poll_delay=-1"
  j environment.settings_changed.0 | grep -q io_poll_delay || problem "settings_changed does not name io_poll_delay: $(j environment.settings_changed.0)"
  report polling_pvsync2_poll_classic "with io_poll_delay=0 left behind: sleeps/IO=$(sleeps) changed='$(j environment.settings_changed.0)'"
  echo -1 > /sys/block/${DEV#/dev/}/queue/io_poll_delay; DELAY0=-1
fi

# The block layer's hybrid polling through pvsync2.
if kernel_at_least 5 18; then
  refused polling_pvsync2_hybrid "5\.18\|6\.4" -i pvsync2 --complete hybrid --ios 20 "$DEV"
else
  for d in "" 8; do
    n=polling_pvsync2_hybrid${d:+_$d}
    # Adaptive sleeping starts once the queue has latency statistics (a 100 ms window): the ramp
    # gives it them before the measured second.
    run_iolab $n "$CTRL" -i pvsync2 --complete hybrid ${d:+--poll-delay $d} --strict --ramp 0.3 --runtime 1 "$DEV"
    check_ok polled; mechanism x "hybrid polling (io_poll_delay=${d:-0}"
    # Classic polling sleeps about 0.01 times per I/O here; a hybrid run sleeps before most I/Os.
    fcmp "$(sleeps)" ge 0.2 || problem "hybrid polling slept $(sleeps) times per I/O (want most I/Os to sleep first)"
    report $n "sleeps/IO=$(sleeps) mechanism='$(j completion_path.mechanism)'"
  done
fi

# io_uring's hybrid polling: its own flag, or the block layer's sleep before 5.16.
if kernel_at_least 6 13; then
  run_iolab polling_uring_hybrid "$CTRL" -i io_uring --qd 8 --complete hybrid --strict --ios $IOS "$DEV"
  check_ok polled; mechanism x "HYBRID_IOPOLL"
  report polling_uring_hybrid "sleeps/IO=$(sleeps)"
elif kernel_at_least 5 16; then
  refused polling_uring_hybrid "6\.13" -i io_uring --complete hybrid --ios 20 "$DEV"
else
  run_iolab polling_uring_hybrid "$CTRL" -i io_uring --qd 1 --complete hybrid --strict --ramp 0.3 --runtime 1 "$DEV"
  check_ok polled; mechanism x "block layer's hybrid polling (io_poll_delay=0"
  grep -q '^ring\.used\..*=HYBRID' "/tmp/$RUN_NAME.flat" && problem "ring.used names HYBRID_IOPOLL on $KREL"
  fcmp "$(sleeps)" ge 0.2 || problem "hybrid polling slept $(sleeps) times per I/O"
  report polling_uring_hybrid "sleeps/IO=$(sleeps) mechanism='$(j completion_path.mechanism)'"
  # With SQPOLL the SQ thread does the sleeping, before each request in turn: measured 125 ms
  # mean latency at QD8 against 20 ms with classic polling (40 I/Os).
  run_iolab polling_uring_sqpoll_hybrid "$CTRL" -i io_uring --qd 8 --submit sqpoll --complete hybrid --strict --ios 40 "$DEV"
  check_ok polled; mechanism x "block layer's hybrid polling (io_poll_delay=0"
  sq=$(sleeps sqpoll)
  fcmp "${sq:-0}" ge 0.2 || problem "the SQPOLL thread slept ${sq:-no} times per I/O (want most I/Os)"
  report polling_uring_sqpoll_hybrid "sqpoll_sleeps/IO=$sq"
fi
exit 0
