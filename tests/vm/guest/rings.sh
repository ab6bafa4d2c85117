#!/bin/sh
# io_uring ring setup on this kernel: the record's `ring` (setup flags asked for, used, dropped)
# for each mode against what the kernel version has, what `iolab interfaces` says the ring setup
# refuses, and refusals that name what the kernel lacks. The setup flags exist from the versions
# below on Debian's kernels (SINGLE_ISSUER 6.0, DEFER_TASKRUN 6.1, COOP_TASKRUN 5.19, hybrid
# polling 6.13; its 5.10 carries 5.15's io_uring, which has none of them).
. /vm/lib.sh
IOS=${VM_IOS:-200}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

section "io_uring ring setup on kernel $KREL ($DEV)"
if [ -z "$DEV" ]; then
  result rings_nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null)"
  exit 0
fi
# What a syscall-submitted ring gets: flag names in iolab's order.
if kernel_at_least 6 1; then USED="CLAMP SINGLE_ISSUER DEFER_TASKRUN"; DROPPED=""
elif kernel_at_least 6 0; then USED="CLAMP COOP_TASKRUN SINGLE_ISSUER"; DROPPED="DEFER_TASKRUN"
elif kernel_at_least 5 19; then USED="CLAMP COOP_TASKRUN"; DROPPED="SINGLE_ISSUER DEFER_TASKRUN"
else USED="CLAMP"; DROPPED="SINGLE_ISSUER DEFER_TASKRUN"; fi
# Every ring asks for NO_SQARRAY (6.6), listed after the other set-up flags but HYBRID_IOPOLL: SQA
# is what a SQPOLL ring uses of it, SQD what it drops.
if kernel_at_least 6 6; then SQA=" NO_SQARRAY"; SQD=""; USED="$USED NO_SQARRAY"
else SQA=""; SQD="NO_SQARRAY"; DROPPED="${DROPPED:+$DROPPED }NO_SQARRAY"; fi
# And its fd registered with the thread that drives it (IORING_REGISTER_RING_FDS, 5.18).
if kernel_at_least 5 18; then USED="$USED REGISTER_RING_FDS"; else DROPPED="$DROPPED REGISTER_RING_FDS"; fi

# ring_list FIELD: ring.FIELD of the last run, space-separated.
ring_list() { awk -v k="ring.$1." 'index($0, k) == 1 { sub(/^[^=]*=/, ""); printf "%s%s", s, $0; s = " " }' "/tmp/$RUN_NAME.flat"; }

# ring NAME EXPECTED_PATH USED DROPPED ARGS...: a run whose record must say these ring flags.
ring() {
  local _n=$1 _w=$2 _u=$3 _d=$4
  shift 4
  run_iolab "$_n" "$CTRL" -i io_uring "$@" --ios $IOS "$DEV"
  check_ok "$_w"
  [ "$(ring_list used)" = "$_u" ] || problem "ring.used='$(ring_list used)', want '$_u' on $KREL"
  [ "$(ring_list dropped)" = "$_d" ] || problem "ring.dropped='$(ring_list dropped)', want '$_d' on $KREL"
  report "$_n" "ring_used='$(ring_list used)' dropped='$(ring_list dropped)'"
}

ring rings_syscall_irq interrupt "$USED" "$DROPPED" --qd 8
if [ "$(qattr $DEV io_poll)" = 1 ]; then
  ring rings_syscall_poll polled "IOPOLL $USED" "$DROPPED" --qd 8 --complete poll
else
  result rings_syscall_poll SKIP "$DEV cannot poll (queue/io_poll=0)"
fi
ring rings_sqpoll_irq interrupt "SQPOLL SQ_AFF CLAMP$SQA" "$SQD" --qd 8 --submit sqpoll --sq-cpu 1
# The SQPOLL thread's CPU lands in the record's sqpoll class: a thread of iolab's process from 5.12
# (IORING_FEAT_NATIVE_WORKERS), a kernel thread named io_uring-sq before, found by its name.
sq=$(awk -F= '/^cost\.classes\.[0-9]+\.class=sqpoll$/ { split($1, p, "."); i = p[3] }
              /^cost\.classes\.[0-9]+\.threads=/ { split($1, p, "."); n[p[3]] = $2 }
              /^cost\.classes\.[0-9]+\.cpu_s=/ { split($1, p, "."); c[p[3]] = $2 }
              END { if (i != "") print n[i], c[i] }' /tmp/rings_sqpoll_irq.flat)
native=$(grep -c '^ring\.features\..*=NATIVE_WORKERS' /tmp/rings_sqpoll_irq.flat)
# A kernel thread found by name must have worked in the window; a thread of iolab's own may show
# 0.0 s, since a 200-I/O run can end inside one clock tick (seen on 7.3 under single-threaded TCG).
if [ "${sq%% *}" -ge 1 ] 2>/dev/null && { [ "$native" = 1 ] || fcmp "${sq#* }" gt 0; }; then
  result rings_sqpoll_thread_counted PASS "sqpoll class: ${sq%% *} thread(s), ${sq#* } s of CPU (NATIVE_WORKERS: $native)"
else
  result rings_sqpoll_thread_counted FAIL "sqpoll class '$sq' (threads, cpu_s): the SQPOLL thread's CPU was not found (NATIVE_WORKERS: $native)"
fi

run_iolab rings_psync "$CTRL" -i psync --ios 20 "$DEV"
check_ok interrupt
[ "$(j ring)" = null ] || problem "ring=$(j ring) for psync, want null"
report rings_psync

# Before 5.11 the SQPOLL thread only takes registered files; iolab goes by the kernel's feature
# bit (IORING_FEAT_SQPOLL_NONFIXED), not the version: Debian's 5.10 carries 5.15's io_uring
# (backported in 5.10.162) and has it. Either the run works or it is refused naming 5.11.
if kernel_at_least 5 11; then
  ring rings_sqpoll_unregistered interrupt "SQPOLL CLAMP$SQA" "$SQD" --qd 8 --submit sqpoll --register-files false
else
  run_iolab rings_sqpoll_unregistered "$CTRL" -i io_uring --qd 8 --submit sqpoll --register-files false --ios $IOS "$DEV"
  if [ "$RC" = 2 ] && grep -q 'registered files.*5\.11' "/tmp/$RUN_NAME.err"; then
    result rings_sqpoll_unregistered PASS "refused: $(head -1 "/tmp/$RUN_NAME.err")"
  else
    check_ok interrupt
    report rings_sqpoll_unregistered "(this kernel's io_uring has IORING_FEAT_SQPOLL_NONFIXED)"
  fi
fi

# Hybrid polling (IORING_SETUP_HYBRID_IOPOLL, 6.13): where the kernel has it, a ring with it
# completes polled, with no queue interrupt; before 5.16 IOPOLL sleeps by the block layer's
# io_poll_delay instead (polling.sh checks the sleeping); in between it is refused naming 6.13,
# and not blamed on IOPOLL.
if kernel_at_least 6 13; then
  if [ "$(qattr $DEV io_poll)" = 1 ]; then
    # REGISTER_RING_FDS is no setup flag: the record lists it after them.
    ring rings_syscall_hybrid polled "IOPOLL ${USED% REGISTER_RING_FDS} HYBRID_IOPOLL REGISTER_RING_FDS" "$DROPPED" --qd 8 --complete hybrid
    ring rings_sqpoll_hybrid polled "IOPOLL SQPOLL SQ_AFF CLAMP$SQA HYBRID_IOPOLL" "$SQD" --qd 8 --submit sqpoll --sq-cpu 1 --complete hybrid
  else
    result rings_hybrid SKIP "$DEV cannot poll (queue/io_poll=0)"
  fi
elif ! kernel_at_least 5 16; then
  # Before 5.16 IOPOLL takes the block layer's hybrid sleep: the ring has no HYBRID_IOPOLL.
  ring rings_syscall_hybrid polled "IOPOLL $USED" "$DROPPED" --qd 8 --complete hybrid
else
  run_iolab rings_hybrid_refusal "" -i io_uring --complete hybrid --ios 20 "$DEV"
  if [ "$RC" = 2 ] && grep -q '6\.13' "/tmp/$RUN_NAME.err" && ! grep -q 'refused.* IOPOLL' "/tmp/$RUN_NAME.err"; then
    result rings_hybrid_refusal PASS "$(head -1 "/tmp/$RUN_NAME.err")"
  else
    result rings_hybrid_refusal FAIL "want exit 2 naming 6.13, got exit $RC: $(head -c 300 "/tmp/$RUN_NAME.err" | tr '\n' ' ')"
  fi
fi

# io_uring's waits kept out of iowait (--iowait off: IORING_ENTER_NO_IOWAIT on every enter, 6.15):
# from 6.15 the record's ring lists it as used, after the set-up flags (both ways of submitting:
# the SQPOLL ring waits through its own enter); before, the run is refused before any I/O, exit 2,
# naming 6.15 and the feature bit the kernel lacks.
if kernel_at_least 6 15; then
  ring rings_no_iowait interrupt "$USED ENTER_NO_IOWAIT" "$DROPPED" --qd 8 --iowait off
  ring rings_sqpoll_no_iowait interrupt "SQPOLL SQ_AFF CLAMP$SQA ENTER_NO_IOWAIT" "$SQD" --qd 8 --submit sqpoll --sq-cpu 1 --iowait off
else
  run_iolab rings_no_iowait_refusal "" -i io_uring --iowait off --ios 20 "$DEV"
  if [ "$RC" = 2 ] && grep -q '6\.15.*IORING_FEAT_NO_IOWAIT' "/tmp/$RUN_NAME.err" && [ "$(wc -l < "/tmp/$RUN_NAME.err")" = 1 ]; then
    result rings_no_iowait_refusal PASS "$(head -1 "/tmp/$RUN_NAME.err")"
  else
    result rings_no_iowait_refusal FAIL "want exit 2 in one line naming 6.15 and IORING_FEAT_NO_IOWAIT, got exit $RC: $(head -c 300 "/tmp/$RUN_NAME.err" | tr '\n' ' ')"
  fi
fi

# `iolab interfaces`: io_uring is available, and says which ring flags this kernel refuses.
"$IOLAB" interfaces > /tmp/rings_interfaces.out 2>&1
row=$(grep '^io_uring ' /tmp/rings_interfaces.out)
echo "$row"
PROBLEMS=""
case $row in *" yes "*) ;; *) problem "io_uring is not available";; esac
# `iolab interfaces` names the set-up flags a kernel refuses; the registered ring fd (5.18) is no
# set-up flag: the record's ring.dropped and notes say it, not the row.
for f in ${DROPPED% REGISTER_RING_FDS}; do
  echo "$row" | grep -q "without.*$f" || problem "the row does not say the ring setup goes without $f"
done
[ -z "${DROPPED% REGISTER_RING_FDS}" ] && echo "$row" | grep -q "without" && problem "the row says the ring goes without something on $KREL"
if kernel_at_least 6 13; then echo "$row" | grep -q "no hybrid" && problem "the row says no hybrid polling on $KREL"
elif kernel_at_least 5 16; then echo "$row" | grep -q "no hybrid polling" || problem "the row does not say hybrid polling is missing on $KREL"
else echo "$row" | grep -q "hybrid polling by the block layer" || problem "the row does not say hybrid polling goes through the block layer on $KREL"; fi
if [ -z "$PROBLEMS" ]; then result rings_interfaces PASS "$(echo "$row" | cut -c60-260)"
else result rings_interfaces FAIL "$PROBLEMS: '$row'"; fi
exit 0
