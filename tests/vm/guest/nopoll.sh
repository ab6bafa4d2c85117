#!/bin/sh
# A queue without poll queues (boot with rig.sh --poll-queues 0): iolab refuses polled io_uring
# completion unless --allow-fallback, and with it the record says the kernel completes by
# interrupt, which the NVMe queue interrupts confirm.
. /vm/lib.sh
IOS=${VM_IOS:-500}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

# nopoll PREFIX DEV CTRL
nopoll() {
  local _p=$1 _d=$2 _c=$3 _s _n
  if [ "$(qattr $_d io_poll)" = 0 ]; then result ${_p}_io_poll_0 PASS "$_d queue/io_poll=0"
  else result ${_p}_io_poll_0 FAIL "$_d queue/io_poll=$(qattr $_d io_poll): this script wants a queue without poll queues"; return; fi
  refused ${_p}_uring_poll_refused "allow-fallback" -i io_uring --qd 8 --complete poll --ios $IOS "$_d"
  refused ${_p}_uring_sqpoll_poll_refused "allow-fallback" -i io_uring --qd 8 --submit sqpoll --complete poll --ios $IOS "$_d"
  for _s in syscall sqpoll; do
    _n=${_p}_uring_${_s}_poll_fallback
    run_iolab $_n "$_c" -i io_uring --qd 8 --submit $_s --complete poll --allow-fallback --ios $IOS "$_d"
    if [ "$RC" != 0 ] && grep -q 'rejects polled I/O' /tmp/$_n.err; then
      # Newer kernels fail polled I/O on such a queue with EOPNOTSUPP instead of falling back.
      result $_n PASS "the kernel rejects polled I/O here and iolab says so: $(head -1 /tmp/$_n.err)"
      continue
    fi
    check_ok interrupt
    [ "$(j completion_path.fell_back)" = true ] || [ -z "$_c" ] || problem "completion_path.fell_back=$(j completion_path.fell_back), want true"
    case "$(j completion_path.reason)" in *"poll queues"*) ;; *) problem "completion_path.reason does not name the missing poll queues: $(j completion_path.reason)";; esac
    report $_n "reason=\"$(j completion_path.reason)\""
  done
  if [ -n "$_c" ]; then
    strict_fails ${_p}_uring_poll_fallback_strict "$_c" -i io_uring --qd 8 --complete poll --allow-fallback --ios $IOS "$_d"
  fi
  # Synchronous "polling" is never refused: the kernel ignores RWF_HIPRI there anyway.
  t ${_p}_pvsync2_poll "$_c" interrupt -i pvsync2 --complete poll --ios $IOS "$_d"
  t ${_p}_uring_irq "$_c" interrupt -i io_uring --qd 8 --ios $IOS "$_d"
}

section "no poll queues: NVMe $DEV (controller $CTRL), nvme.poll_queues=$VM_POLL_QUEUES"
if [ -n "$DEV" ]; then
  # The queue refuses to be switched to polling when the driver has no poll queues.
  if echo 1 > /sys/block/${DEV#/dev/}/queue/io_poll 2>/dev/null && [ "$(qattr $DEV io_poll)" = 1 ]; then
    result nvme_io_poll_stays_0 FAIL "writing 1 to queue/io_poll turned polling on without poll queues"
  else
    result nvme_io_poll_stays_0 PASS "queue/io_poll stays $(qattr $DEV io_poll)"
  fi
  nopoll nvme "$DEV" "$CTRL"
  section "iolab probe $DEV without poll queues"
  "$IOLAB" probe "$DEV" > /tmp/probe.out 2>&1; rc=$?
  cat /tmp/probe.out
  row=$(grep -E '^io_uring +syscall +poll ' /tmp/probe.out)
  if [ $rc = 0 ] && [ -n "$row" ] && ! echo "$row" | grep -q 'completes by polled'; then
    result nvme_probe_nopoll PASS "$(echo "$row" | tr -s ' ')"
  else
    result nvme_probe_nopoll FAIL "probe exit $rc; io_uring poll row: '$row' (must not claim polled completion)"
  fi
  section "no poll queues: nvme-passthru on the generic device of $DEV"
  NG=$(ng_of "$DEV")
  if [ -n "$NG" ]; then
    refused nvme_passthru_poll_refused "allow-fallback" -i nvme-passthru --qd 8 --complete poll --ios $IOS "$NG"
    n=nvme_passthru_poll_fallback
    run_iolab $n "$CTRL" -i nvme-passthru --qd 8 --complete poll --allow-fallback --ios $IOS "$NG"
    if [ "$RC" != 0 ] && grep -q 'rejects polled I/O' /tmp/$n.err; then
      result $n PASS "the kernel rejects polled passthrough here and iolab says so: $(head -1 /tmp/$n.err)"
    else
      check_ok interrupt
      [ "$(j completion_path.fell_back)" = true ] || problem "completion_path.fell_back=$(j completion_path.fell_back), want true"
      report $n "reason=\"$(j completion_path.reason)\""
    fi
  else
    result nvme_passthru_present FAIL "no generic character device for $DEV"
  fi
else
  result nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null)"
fi

section "no poll queues: null_blk poll_queues=0"
if load_null_blk queue_mode=2 poll_queues=0 gb=1 nr_devices=1; then
  nopoll nullb /dev/nullb0 ""
  rmmod null_blk
else
  result nullb_load FAIL "modprobe null_blk poll_queues=0 failed"
fi
exit 0
