#!/bin/sh
# --profile stages on NVMe (docs/profiling.md): the nvme driver's points (command set up,
# completion) are in every matched request's stages; completed by interrupt a request has an
# interrupt stage, polled (io_uring IOPOLL) none; passthrough has no bio stage; a read split by a
# low max_sectors_kb counts as split and ends with its last part.
. /vm/lib.sh
IOS=${VM_IOS:-500}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

# The points the run's stages pass, once each.
points() { grep -E '^cost\.stages\.stages\.[0-9]+\.(from|to)=' "/tmp/$RUN_NAME.flat" | cut -d= -f2 | sort -u | tr '\n' ','; }

# stages_check WANT_INTERRUPT(yes|no) [no-bio]
stages_check() {
  local _m _p
  _m=$(j cost.stages.requests_matched); _p=$(points)
  [ "$RC" = 0 ] || problem "exit $RC: $(head -1 /tmp/$RUN_NAME.err)"
  [ -n "$_m" ] && [ "$_m" -gt 0 ] || problem "no request matched: $(j cost.stages.unavailable)"
  case "$_p" in *"nvme command set up"*) ;; *) problem "no nvme stage: $_p";; esac
  case "$_p" in
    *"interrupt"*) [ "$1" = no ] && problem "an interrupt stage while polling: $_p";;
    *) [ "$1" = yes ] && problem "no interrupt stage: $_p";;
  esac
  if [ "$2" = no-bio ]; then case "$_p" in *"bio queued"*) problem "a bio stage on passthrough: $_p";; esac; fi
  mount | grep -q tracefs && [ "$TRACEFS0" = no ] && problem "tracefs left mounted"
}

section "stages on NVMe $DEV (controller $CTRL), kernel $KREL"
if [ -z "$DEV" ]; then
  result stages_nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null)"
  exit 0
fi
if mount | grep -q tracefs; then TRACEFS0=yes; else TRACEFS0=no; fi

run_iolab stages_uring_irq "$CTRL" -i io_uring --qd 4 --profile stages --ios $IOS "$DEV"
stages_check yes
report stages_uring_irq "matched=$(j cost.stages.requests_matched) unmatched=$(j cost.stages.requests_unmatched) points=$(points)"

# Split requests: with max_sectors_kb 8 each 64 KiB read is 8 requests, a command each; the
# request ends with its last part (its queue limit put back right after the runs).
MSK0=$(qattr $DEV max_sectors_kb)
if echo 8 > "/sys/block/${DEV#/dev/}/queue/max_sectors_kb" 2>/dev/null && [ "$(qattr $DEV max_sectors_kb)" = 8 ]; then
  # Not io_uring IOPOLL: on 6.1 a polled split read never completes (the guest hangs, profiled
  # or not); on 7.3 its parts complete by interrupt, the last 23.5 ms (p50, TCG) after the first
  # was issued (docs/profiling.md).
  for IF in psync io_uring; do
    run_iolab stages_split_$IF "$CTRL" -i $IF $([ $IF = io_uring ] && echo --qd 4) --bs 64k --profile stages --ios $IOS "$DEV"
    stages_check yes
    _m=$(j cost.stages.requests_matched); _s=$(j cost.stages.requests_split)
    [ "$_s" = "$_m" ] || problem "requests_split=$_s of $_m matched"
    report stages_split_$IF "matched=$_m unmatched=$(j cost.stages.requests_unmatched) split=$_s p50_ns=$(j cost.stages.end_to_end.p50_ns) iolab_p50_ns=$(j cost.stages.iolab_p50_ns) points=$(points)"
  done
else
  result stages_split SKIP "max_sectors_kb of $DEV cannot be set to 8"
fi
echo "$MSK0" > "/sys/block/${DEV#/dev/}/queue/max_sectors_kb"

if [ "$(qattr $DEV io_poll)" = 1 ]; then
  run_iolab stages_uring_poll "$CTRL" -i io_uring --qd 4 --complete poll --profile stages --ios $IOS "$DEV"
  stages_check no
  report stages_uring_poll "matched=$(j cost.stages.requests_matched) unmatched=$(j cost.stages.requests_unmatched) points=$(points)"
else
  result stages_uring_poll SKIP "$DEV cannot poll (queue/io_poll=0): boot with --poll-queues 1"
fi

NG=$(ng_of "$DEV")
if [ -n "$NG" ] && kernel_at_least 5 19; then
  run_iolab stages_passthru "$CTRL" -i nvme-passthru --qd 4 --profile stages --ios $IOS "$NG"
  stages_check yes no-bio
  report stages_passthru "matched=$(j cost.stages.requests_matched) points=$(points)"
else
  result stages_passthru SKIP "no generic NVMe device (ng) or kernel before 5.19"
fi
