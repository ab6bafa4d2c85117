#!/bin/sh
# S4.7 (IISWC'19 §VI-C, Fig 23) end to end, as the suite runs it: `iolab suite run S4 --quick
# --part S4.7` on the file-backed emulated NVMe namespace serves it through `iolab serve -i
# io_uring` and then `-i vfio-nvme` (in the no-IOMMU boot: vfio loaded with
# enable_unsafe_noiommu_mode=1, so the server gets --vfio-noiommu), connects the kernel's NBD
# client over loopback, makes and mounts ext4 on /dev/nbdN and runs the file-set grid (read and
# write, seq and random, 200 files of 4-64 KiB) on it, into one database; then `iolab report`.
# Checked: the suite ends 0 with 8 runs stored; the S4.7 section's Fig 23 table has 4 rows per
# server back end, each with the server's CPU per request; the reduction table is there; nothing
# is left connected (/sys/block/nbd*/pid), mounted (/run/iolab/s4.7-client) or bound to vfio-pci,
# and `iolab restore` has nothing of it to undo.
# Then each server by hand on /dev/nbd0 (issue 30 item 5): the io_uring server's reads complete
# by interrupt on the controller's queue vectors; the vfio-nvme server offers FLUSH and TRIM as
# the controller's Identify says, a `dd conv=fsync` and a `blkdiscard` through /dev/nbd0 reach it
# as NVMe Flush and Dataset Management with success (its summary counts them, no error), the
# device's data afterwards as expected (the trimmed range zeroes only where DLFEAT promises it and
# the kernel's own discard on this device zeroes too; the rest as written), and no interrupt on
# the controller's vfio vectors while it serves; after kill -9 of the vfio-nvme server and the
# client, `iolab restore` gives the controller back and disconnects /dev/nbd0.
. /vm/lib.sh

[ -n "$VM_FILE_CTRL" ] || { result s47_device SKIP "no file-backed NVMe controller (--backend file|both)"; exit 0; }
BDF=$(basename "$(readlink -f "/sys/class/nvme/$VM_FILE_CTRL/device")")
wait_ns || { result s47_namespace FAIL "no namespace on $BDF"; exit 0; }
if ! modprobe nbd nbds_max=2 2>/tmp/s47_modprobe.err; then
  result s47_nbd SKIP "this kernel has no nbd module: $(head -c 200 /tmp/s47_modprobe.err)"; exit 0
fi
command -v mkfs.ext4 >/dev/null || { result s47_mkfs SKIP "the guest has no mkfs.ext4"; exit 0; }
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null
grep -q vmrig.noiommu=1 /proc/cmdline && modprobe vfio enable_unsafe_noiommu_mode=1 2>/dev/null
modprobe vfio-pci 2>/dev/null
DB=/tmp/s47.db
OUT=/tmp/s47-report

section "S4.7: the suite's quick part on $DEV ($BDF)"
"$IOLAB" suite run S4 --quick --part S4.7 "$DEV" --destructive "$DEV" --db $DB > /tmp/s47.out 2>&1
RC=$?
grep -v '^fill ' /tmp/s47.out | tail -25
stored=$(sed -n 's/^sweep #[0-9]*: \([0-9]*\) runs stored.*/\1/p' /tmp/s47.out | awk '{ n += $1 } END { print n + 0 }')
if [ $RC = 0 ] && [ "$stored" = 8 ]; then
  result s47_suite PASS "exit 0, $stored runs stored: $(grep 'server stopped' /tmp/s47.out | tr '\n' ';')"
else
  result s47_suite FAIL "exit $RC, $stored runs stored: $(grep -E 'iolab:|cannot|skipped|failed' /tmp/s47.out | head -5 | tr '\n' ';')"
fi

section "the report's S4.7 section"
"$IOLAB" report -q --db $DB --suite S4 --out $OUT > /tmp/s47_report.out 2>&1 || result s47_report FAIL "$(head -c 300 /tmp/s47_report.out)"
T=$(grep -l '^\*\*Fig 23: per-file latency' $OUT/tables/*.md 2>/dev/null | head -1)
R=$(grep -l '^\*\*Fig 23: per-file mean latency' $OUT/tables/*.md 2>/dev/null | head -1)
[ -n "$T" ] && cat "$T"
[ -n "$R" ] && cat "$R"
k=$(grep -c '| io_uring |' "$T" 2>/dev/null)
u=$(grep -c '| vfio-nvme |' "$T" 2>/dev/null)
unmeasured=$(grep -E '\| (io_uring|vfio-nvme) \|' "$T" 2>/dev/null | grep -c 'not measured')
if [ "$k" = 4 ] && [ "$u" = 4 ] && [ "$unmeasured" = 0 ] && [ -n "$R" ]; then
  result s47_fig23 PASS "4 rows per server back end, each with the server's CPU per request; reductions: $(grep -E '^\| (read|write) ' "$R" | awk -F'|' '{ printf "%s %s %s;", $2, $3, $6 }')"
else
  result s47_fig23 FAIL "io_uring rows '$k', vfio-nvme rows '$u', cells not measured '$unmeasured', reduction table '$R'"
fi

# wait_line FILE WORD: up to 60 s for WORD in FILE.
wait_line() {
  local _i=0
  while [ $_i -lt 600 ]; do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; _i=$((_i + 1)); done
  return 1
}
connected() { [ -e /sys/block/nbd0/pid ]; }
# The port a server's first line names (`... on 127.0.0.1:PORT through ...`).
port_of() { sed -n 's/.* on 127\.0\.0\.1:\([0-9]*\) through .*/\1/p' "$1" | head -1; }
# Interrupts on the controller's vfio vectors (vfio-msix[N](BDF), vfio-intx(BDF)), summed over CPUs.
vfio_irqs() {
  awk -v b="$BDF" 'index($0, b) && /vfio/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i } END { print s + 0 }' /proc/interrupts
}
# serve NAME ARGS...: `iolab serve $DEV ARGS --destructive --listen 127.0.0.1:0` in the background
# (SPID), /dev/nbd0 connected to it (CPID). Fails (1) with a FAIL line when either does not come up.
serve() {
  local _n=$1
  shift
  wait_ns
  "$IOLAB" serve "$DEV" "$@" --destructive --listen 127.0.0.1:0 > "/tmp/$_n.serve.out" 2> "/tmp/$_n.serve.err" &
  SPID=$!
  if ! wait_line "/tmp/$_n.serve.out" serving; then
    result "$_n" FAIL "the server did not start: $(head -c 300 "/tmp/$_n.serve.err")"; kill -9 $SPID 2>/dev/null; wait $SPID 2>/dev/null; return 1
  fi
  "$IOLAB" nbd connect "127.0.0.1:$(port_of "/tmp/$_n.serve.out")" --index 0 > "/tmp/$_n.client.out" 2> "/tmp/$_n.client.err" &
  CPID=$!
  if ! wait_line "/tmp/$_n.client.out" connected || ! connected; then
    result "$_n" FAIL "/dev/nbd0 did not connect: $(head -c 300 "/tmp/$_n.client.err")"
    kill -TERM $CPID $SPID 2>/dev/null; wait $CPID $SPID 2>/dev/null; return 1
  fi
}
# stop: the client, then the server, each by SIGTERM (a clean stop).
stop() { kill -TERM $CPID 2>/dev/null; wait $CPID 2>/dev/null; kill -TERM $SPID 2>/dev/null; wait $SPID 2>/dev/null; }
# pattern FILE SEED: 1 MiB of data of its own.
pattern() { awk -v s="$2" 'BEGIN { for (i = 0; i < 16384; i++) printf "%063d\n", (i * 7919 + s * 104729) % 1000003 }' > "$1"; }
zeroes() { [ "$(od -An -v -tx1 "$1" | tr -d ' \n' | tr -d 0 | wc -c)" = 0 ]; }
MIB=1048576

section "the io_uring server: its reads complete by interrupt on the controller's queues"
if serve s47_kernel_server -i io_uring; then
  I0=$(irqs "$(ctrl)")
  dd if=/dev/nbd0 of=/dev/null bs=4096 count=1024 iflag=direct 2>/dev/null
  I1=$(irqs "$(ctrl)")
  stop
  if [ $((I1 - I0)) -gt 0 ]; then result s47_kernel_server_interrupts PASS "$((I1 - I0)) interrupts on $(ctrl)'s I/O queues while it served 4 MiB of reads"
  else result s47_kernel_server_interrupts FAIL "no interrupt on $(ctrl)'s I/O queues ($I0 -> $I1) while the io_uring server served 4 MiB of reads"; fi
fi

section "the vfio-nvme server: FLUSH and TRIM as NVMe Flush and Dataset Management, no interrupt"
pattern /tmp/s47_p1 1; pattern /tmp/s47_p2 2
# The kernel's own discard on this device first: does a discarded range read as zeroes here?
wait_ns
dd if=/tmp/s47_p1 of="$DEV" bs=$MIB seek=40 oflag=direct 2>/dev/null
blkdiscard -o $((40 * MIB)) -l $MIB "$DEV" 2>/tmp/s47_kdiscard.err
dd if="$DEV" of=/tmp/s47_k bs=$MIB skip=40 count=1 iflag=direct 2>/dev/null
if zeroes /tmp/s47_k; then KZERO=yes; else KZERO=no; fi
echo "the kernel's own discard of $DEV reads back as zeroes: $KZERO $(head -c 100 /tmp/s47_kdiscard.err)"
if serve s47_vfio_server -i vfio-nvme $(grep -q vmrig.noiommu=1 /proc/cmdline && echo --vfio-noiommu) --json /tmp/s47_vfio.json; then
  NOTE=$(grep -m1 'FLUSH' /tmp/s47_vfio_server.serve.err)
  case "$NOTE" in
    *"FLUSH offered"*"TRIM offered"*) result s47_vfio_offers_flush_trim PASS "${NOTE#iolab: }";;
    *) result s47_vfio_offers_flush_trim FAIL "the emulated controller has a volatile write cache and Dataset Management; the server said '$NOTE'";;
  esac
  V0=$(vfio_irqs)
  # 2 MiB written through /dev/nbd0 and flushed (fsync of the block device: an NBD FLUSH), the
  # first MiB then trimmed (an NBD TRIM).
  cat /tmp/s47_p1 /tmp/s47_p2 > /tmp/s47_p12
  dd if=/tmp/s47_p12 of=/dev/nbd0 bs=$MIB seek=40 oflag=direct conv=fsync 2>/tmp/s47_dd.err; DDRC=$?
  blkdiscard -o $((40 * MIB)) -l $MIB /dev/nbd0 2>/tmp/s47_discard.err; BDRC=$?
  sync
  dd if=/dev/nbd0 of=/tmp/s47_t1 bs=$MIB skip=40 count=1 iflag=direct 2>/dev/null
  dd if=/dev/nbd0 of=/tmp/s47_t2 bs=$MIB skip=41 count=1 iflag=direct 2>/dev/null
  V1=$(vfio_irqs)
  VL=$(grep -c "vfio.*$BDF" /proc/interrupts)
  stop
  jflat /tmp/s47_vfio.json > /tmp/s47_vfio.flat 2>/dev/null
  sj() { awk -F= -v k="$1" '$1 == k { print $2 }' /tmp/s47_vfio.flat; }
  FL=$(sj requests.flush); TR=$(sj requests.trim); ER=$(sj requests.errors)
  if [ $DDRC = 0 ] && [ $BDRC = 0 ] && [ "${FL:-0}" -gt 0 ] && [ "${TR:-0}" -gt 0 ] && [ "$ER" = 0 ]; then
    result s47_vfio_flush_trim PASS "dd conv=fsync and blkdiscard on /dev/nbd0 succeeded; the server answered $FL flushes and $TR trims, 0 errors ($(sj requests.write) writes, $(sj requests.read) reads)"
  else
    result s47_vfio_flush_trim FAIL "dd exit $DDRC ($(head -c 100 /tmp/s47_dd.err)), blkdiscard exit $BDRC ($(head -c 100 /tmp/s47_discard.err)); flushes '$FL' trims '$TR' errors '$ER': $(head -c 200 /tmp/s47_vfio_server.serve.err)"
  fi
  # The device's data, through the kernel's driver once the controller is given back.
  wait_ns
  dd if="$DEV" of=/tmp/s47_d1 bs=$MIB skip=40 count=1 iflag=direct 2>/dev/null
  dd if="$DEV" of=/tmp/s47_d2 bs=$MIB skip=41 count=1 iflag=direct 2>/dev/null
  case "$NOTE" in *"read as zeroes"*) PROMISED=yes;; *) PROMISED=no;; esac
  if ! cmp -s /tmp/s47_p2 /tmp/s47_t2 || ! cmp -s /tmp/s47_p2 /tmp/s47_d2; then
    result s47_vfio_trim_data FAIL "the MiB written after the trimmed one does not read back as written (through /dev/nbd0: $(cmp /tmp/s47_p2 /tmp/s47_t2 2>&1 | head -c 80); on $DEV: $(cmp /tmp/s47_p2 /tmp/s47_d2 2>&1 | head -c 80))"
  elif [ $PROMISED = yes ] && [ $KZERO = yes ]; then
    if zeroes /tmp/s47_t1 && zeroes /tmp/s47_d1; then result s47_vfio_trim_data PASS "the trimmed MiB reads as zeroes through /dev/nbd0 and on $DEV (DLFEAT: zeroes; the kernel's discard zeroes too), the next MiB as written"
    else result s47_vfio_trim_data FAIL "DLFEAT promises zeroes and the kernel's discard gives them, but the trimmed MiB does not read as zeroes"; fi
  elif zeroes /tmp/s47_t1 || cmp -s /tmp/s47_p1 /tmp/s47_t1; then
    result s47_vfio_trim_data PASS "the next MiB as written; the trimmed MiB reads as $(zeroes /tmp/s47_t1 && echo zeroes || echo before) (zeroes promised by DLFEAT: $PROMISED; the kernel's own discard zeroes: $KZERO)"
  else
    result s47_vfio_trim_data FAIL "the trimmed MiB reads as neither zeroes nor what was written"
  fi
  if [ "$V1" = "$V0" ]; then result s47_vfio_server_no_interrupts PASS "$BDF's vfio vectors ($VL lines in /proc/interrupts) took no interrupt while the vfio-nvme server served"
  else result s47_vfio_server_no_interrupts FAIL "$BDF's vfio vectors took $((V1 - V0)) interrupts while the vfio-nvme server served"; fi
fi

section "kill -9 of the vfio-nvme server and the client, then iolab restore"
if serve s47_vfio_kill -i vfio-nvme $(grep -q vmrig.noiommu=1 /proc/cmdline && echo --vfio-noiommu); then
  dd if=/dev/nbd0 of=/dev/null bs=4096 count=256 iflag=direct 2>/dev/null
  kill -9 $CPID $SPID 2>/dev/null
  wait $CPID $SPID 2>/dev/null
  before="$(driver), nbd0 $(connected && echo connected || echo disconnected)"
  "$IOLAB" restore > /tmp/s47_kill_restore.out 2>&1
  for _ in 1 2 3 4 5 6 7 8 9 10; do connected || break; sleep 0.5; done
  if [ "$(driver)" = nvme ] && ! connected && grep -q "disconnected /dev/nbd0" /tmp/s47_kill_restore.out; then
    result s47_vfio_kill9_restore PASS "after kill -9: $before; iolab restore: $(tr '\n' ' ' < /tmp/s47_kill_restore.out | head -c 240)"
  else
    result s47_vfio_kill9_restore FAIL "after kill -9: $before; after restore: $BDF bound to '$(driver)', nbd0 $(connected && echo connected); restore said: $(head -c 300 /tmp/s47_kill_restore.out)"
  fi
  bound_back s47_vfio_bound_back_after_kill9
fi

section "nothing left behind"
left=""
for n in /sys/block/nbd*; do [ -e "$n/pid" ] && left="$left ${n##*/} connected"; done
grep -q ' /run/iolab/s4.7-client ' /proc/mounts && left="$left /run/iolab/s4.7-client mounted"
[ "$(driver)" = nvme ] || left="$left $BDF bound to '$(driver)'"
"$IOLAB" restore > /tmp/s47_restore.out 2>&1
grep -qE 'nbd|unmounted|vfio' /tmp/s47_restore.out && left="$left restore: $(head -c 200 /tmp/s47_restore.out)"
if [ -z "$left" ]; then result s47_nothing_left PASS "no NBD device connected, nothing mounted, $BDF bound to nvme, nothing to restore"
else result s47_nothing_left FAIL "$left"; fi
