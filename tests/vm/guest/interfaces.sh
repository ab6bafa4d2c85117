#!/bin/sh
# Every interface and mode of iolab on a real NVMe driver (QEMU's emulated controller, null
# backend) and on null_blk, with the completion path checked against the NVMe queue interrupts;
# hybrid polling; the I/O schedulers. Needs a boot with poll queues (rig.sh --poll-queues 1+).
. /vm/lib.sh
IOS=${VM_IOS:-500}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

section "interfaces on $DEV (NVMe, null backend, controller $CTRL)"
if [ -z "$DEV" ]; then
  result nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null): boot with --backend null or both"
  exit 0
fi
echo "kernel $KREL; io_poll=$(qattr $DEV io_poll) io_poll_delay=$(qattr $DEV io_poll_delay) scheduler=$(sched_of $DEV) poll_queues=$(cat /sys/module/nvme/parameters/poll_queues)"
grep -E "CPU|${CTRL}q" /proc/interrupts
if [ "$(qattr $DEV io_poll)" = 1 ]; then
  result nvme_io_poll PASS "$DEV queue/io_poll=1 with nvme.poll_queues=$VM_POLL_QUEUES"
  POLL=polled
else
  result nvme_io_poll FAIL "$DEV queue/io_poll=$(qattr $DEV io_poll) with nvme.poll_queues=$VM_POLL_QUEUES: this script wants poll queues"
  POLL=""
fi

# matrix PREFIX DEV CTRL POLLED_PATH: every interface x submission x completion, read-only.
# POLLED_PATH is what io_uring polling should report (polled); sync polling and POSIX AIO
# "polling" complete by interrupt whatever the queue can do.
matrix() {
  local _p=$1 _d=$2 _c=$3 _pp=$4 _s _n _sp=interrupt
  # Linux ignores RWF_HIPRI on synchronous I/O since 5.18; before, it polls where the queue can.
  kernel_at_least 5 18 || _sp=${_pp:-interrupt}
  t ${_p}_psync_irq            "$_c" interrupt -i psync                               --ios $IOS "$_d"
  t ${_p}_pvsync2_irq          "$_c" interrupt -i pvsync2                             --ios $IOS "$_d"
  t ${_p}_pvsync2_poll         "$_c" "$_sp" -i pvsync2 --complete poll                --ios $IOS "$_d"
  t ${_p}_posixaio_irq         "$_c" interrupt -i posixaio --qd 4                     --ios $IOS "$_d"
  t ${_p}_posixaio_poll        "$_c" interrupt -i posixaio --qd 4 --complete poll     --ios $IOS "$_d"
  t ${_p}_libaio_irq           "$_c" interrupt -i libaio --qd 8                       --ios $IOS "$_d"
  t ${_p}_uring_syscall_irq    "$_c" interrupt -i io_uring --qd 8                     --ios $IOS "$_d"
  t ${_p}_uring_sqpoll_irq     "$_c" interrupt -i io_uring --qd 8 --submit sqpoll     --ios $IOS "$_d"
  if [ -n "$_pp" ]; then
    t ${_p}_uring_syscall_poll "$_c" "$_pp" -i io_uring --qd 8 --complete poll                 --ios $IOS "$_d"
    t ${_p}_uring_sqpoll_poll  "$_c" "$_pp" -i io_uring --qd 8 --submit sqpoll --complete poll --ios $IOS "$_d"
    t ${_p}_uring_qd1_poll     "$_c" "$_pp" -i io_uring --qd 1 --complete poll                 --ios $IOS "$_d"
    t ${_p}_uring_batch_poll   "$_c" "$_pp" -i io_uring --qd 16 --batch-submit 4 --batch-reap 4 --complete poll --ios $IOS "$_d"
  else
    result ${_p}_uring_poll SKIP "$_d cannot poll (queue/io_poll=0)"
  fi
  # --strict refuses to call a run polled when the kernel completed it by interrupt; only a
  # device with interrupt lines can show that.
  if [ -n "$_c" ]; then
    [ -n "$_pp" ] && t ${_p}_uring_strict_poll "$_c" "$_pp" -i io_uring --qd 8 --complete poll --strict --ios $IOS "$_d"
    if [ "$_sp" = interrupt ]; then strict_fails ${_p}_pvsync2_strict_poll "$_c" -i pvsync2 --complete poll --ios $IOS "$_d"
    else t ${_p}_pvsync2_strict_poll "$_c" "$_sp" -i pvsync2 --complete poll --strict --ios $IOS "$_d"; fi
  else
    # Without interrupt lines nothing shows the path: --strict cannot confirm polling.
    [ -n "$_pp" ] && strict_fails ${_p}_uring_strict_poll_unobservable "" -i io_uring --qd 8 --complete poll --ios $IOS "$_d"
  fi
  # Hybrid polling (IORING_SETUP_HYBRID_IOPOLL) exists from Linux 6.13, and before 5.16 through
  # the block layer's io_poll_delay; in between iolab must refuse it naming 6.13.
  for _s in syscall sqpoll; do
    _n=${_p}_uring_${_s}_hybrid
    if [ -z "$_pp" ]; then
      result $_n SKIP "$_d cannot poll (queue/io_poll=0)"; continue
    fi
    if [ $_s = sqpoll ] && ! kernel_at_least 5 16; then
      # The SQ thread sleeps in the block layer before each request it polls, one request
      # after another: 9.3 s mean latency for 500 I/Os at QD8 here (polling.sh runs a short one).
      result $_n SKIP "SQPOLL with the block layer's hybrid polling: see polling_uring_sqpoll_hybrid"; continue
    fi
    run_iolab $_n "$_c" -i io_uring --qd 8 --submit $_s --complete hybrid --ios $IOS "$_d"
    if kernel_at_least 6 13 || ! kernel_at_least 5 16; then
      check_ok "$_pp"; report $_n
    elif [ "$RC" = 2 ] && grep -q '6\.13' /tmp/$_n.err; then
      result $_n SKIP "$(head -1 /tmp/$_n.err)"
    else
      result $_n FAIL "kernel $KREL has no hybrid polling: want exit 2 naming Linux 6.13, got exit $RC: $(head -c 300 /tmp/$_n.err | tr '\n' ' ')"
    fi
  done
}

# What the record says about the target must be what sysfs says about the real device.
run_iolab nvme_record_target "$CTRL" -i psync --ios 50 "$DEV"
check_ok interrupt
b=/sys/block/${DEV#/dev/}
for kv in "kind=block" "device=${DEV#/dev/}" "io_poll=$([ "$(qattr $DEV io_poll)" = 1 ] && echo true || echo false)" \
          "logical_block_size=$(qattr $DEV logical_block_size)" "physical_block_size=$(qattr $DEV physical_block_size)" \
          "rotational=$([ "$(qattr $DEV rotational)" = 1 ] && echo true || echo false)" "scheduler=$(sched_of $DEV)" \
          "nr_requests=$(qattr $DEV nr_requests)" "model=$(sed 's/ *$//' $b/device/model)" \
          "firmware=$(sed 's/ *$//' $b/device/firmware_rev)" "size_bytes=$(( $(cat $b/size) * 512 ))"; do
  k=${kv%%=*}; v=${kv#*=}; got=$(j environment.targets.0.$k)
  [ "$got" = "$v" ] || problem "environment.targets.0.$k=$got, sysfs says $v"
done
report nvme_record_target "model=\"$(j environment.targets.0.model)\" firmware=$(j environment.targets.0.firmware)"

matrix nvme "$DEV" "$CTRL" "$POLL"

section "SQPOLL latency over a timed run on $DEV"
# fio reports SQPOLL completion latencies of tens of seconds in this guest; iolab stamps a request
# when it is placed in the ring and must stay far below that (and inside the run's own length).
for c in irq poll; do
  [ $c = poll ] && [ -z "$POLL" ] && continue
  want=interrupt; [ $c = poll ] && want=$POLL
  run_iolab nvme_sqpoll_timed_$c "$CTRL" -i io_uring --submit sqpoll --complete $c --qd 16 --runtime 1s "$DEV"
  check_ok $want
  w=$(j results.window_s)
  fcmp "$w" ge 0.9 && fcmp "$w" le 3 || problem "results.window_s=$w for --runtime 1s"
  fcmp "$(j results.total.lat_ns.mean)" lt 250000000 || problem "mean latency $(j results.total.lat_ns.mean) ns is not well under 1 s"
  fcmp "$(j results.total.lat_ns.max)" lt 1000000000 || problem "max latency $(j results.total.lat_ns.max) ns exceeds the 1 s run"
  report nvme_sqpoll_timed_$c "window_s=$(printf %.2f "$w") max_us=$(awk -v m="$(j results.total.lat_ns.max)" 'BEGIN {printf "%.0f", m / 1000}')"
done

section "iolab probe $DEV"
"$IOLAB" probe "$DEV" > /tmp/probe.out 2>&1; rc=$?
cat /tmp/probe.out
if [ $rc = 0 ]; then result nvme_probe PASS "iolab probe exits 0"; else result nvme_probe FAIL "iolab probe exit $rc"; fi

section "I/O schedulers on $DEV"
orig=$(sched_of $DEV)
echo "available: $(qattr $DEV scheduler); active: $orig"
for s in none mq-deadline kyber bfq; do
  if ! sched_set $DEV $s; then
    result nvme_sched_$s FAIL "cannot select scheduler $s (available: $(qattr $DEV scheduler))"
    continue
  fi
  for m in "irq -i io_uring --qd 8" "poll -i io_uring --qd 8 --complete poll" "psync -i psync"; do
    name=nvme_sched_${s}_${m%% *}; args=${m#* }
    want=interrupt; [ "${m%% *}" = poll ] && want=$POLL
    if [ "${m%% *}" = poll ] && [ -z "$POLL" ]; then result $name SKIP "no poll queues"; continue; fi
    run_iolab $name "$CTRL" $args --ios $IOS "$DEV"
    check_ok "$want"
    got=$(j environment.targets.0.scheduler)
    [ "$got" = "$s" ] || problem "the record says scheduler '$got', the queue has '$s'"
    report $name "scheduler=$got"
  done
done
sched_set $DEV "$orig"
if [ "$(sched_of $DEV)" = "$orig" ]; then result nvme_sched_restored PASS "back to $orig"
else result nvme_sched_restored FAIL "scheduler is $(sched_of $DEV), was $orig"; fi

section "I/O schedulers through iolab --scheduler on $DEV (restored after each run)"
orig=$(sched_of $DEV); ra=$(qattr $DEV read_ahead_kb); nm=$(qattr $DEV nomerges)
for s in mq-deadline kyber bfq none; do
  for c in irq poll; do
    [ $c = poll ] && [ -z "$POLL" ] && continue
    want=interrupt; [ $c = poll ] && want=$POLL
    name=nvme_iolab_sched_${s}_$c
    run_iolab $name "$CTRL" -i io_uring --qd 8 --complete $c --scheduler $s --set nomerges=2 --set read_ahead_kb=0 --ios $IOS "$DEV"
    check_ok "$want"
    got=$(j environment.targets.0.scheduler)
    [ "$got" = "$s" ] || problem "the record says scheduler '$got' for --scheduler $s"
    [ "$(sched_of $DEV)" = "$orig" ] || problem "scheduler left at $(sched_of $DEV), was $orig"
    [ "$(qattr $DEV nomerges)" = "$nm" ] || problem "nomerges left at $(qattr $DEV nomerges), was $nm"
    [ "$(qattr $DEV read_ahead_kb)" = "$ra" ] || problem "read_ahead_kb left at $(qattr $DEV read_ahead_kb), was $ra"
    report $name "scheduler=$got restored=$(sched_of $DEV)"
  done
done

section "null_blk (queue_mode=2 poll_queues=1)"
if load_null_blk queue_mode=2 poll_queues=1 submit_queues=2 gb=1 nr_devices=1; then
  echo "nullb0: io_poll=$(qattr /dev/nullb0 io_poll) scheduler=$(qattr /dev/nullb0 scheduler)"
  if [ "$(qattr /dev/nullb0 io_poll)" = 1 ]; then
    result nullb_io_poll PASS "nullb0 queue/io_poll=1"; NPOLL=polled
  elif [ ! -e /sys/module/null_blk/parameters/poll_queues ]; then
    result nullb_io_poll SKIP "kernel $KREL's null_blk has no poll_queues parameter: nullb0 cannot poll"; NPOLL=""
  else
    result nullb_io_poll FAIL "nullb0 queue/io_poll=$(qattr /dev/nullb0 io_poll) with poll_queues=1"; NPOLL=""
  fi
  # null_blk completes in softirq context: there is no interrupt line to count.
  matrix nullb /dev/nullb0 "" "$NPOLL"
  rmmod null_blk
else
  result nullb_load FAIL "modprobe null_blk queue_mode=2 poll_queues=1 failed: $(dmesg | tail -2 | tr '\n' ' ')"
fi

section "interrupts after the runs"
grep -E "CPU|nvme" /proc/interrupts
exit 0
