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

section "nothing left behind"
left=""
for n in /sys/block/nbd*; do [ -e "$n/pid" ] && left="$left ${n##*/} connected"; done
grep -q ' /run/iolab/s4.7-client ' /proc/mounts && left="$left /run/iolab/s4.7-client mounted"
[ "$(driver)" = nvme ] || left="$left $BDF bound to '$(driver)'"
"$IOLAB" restore > /tmp/s47_restore.out 2>&1
grep -qE 'nbd|unmounted|vfio' /tmp/s47_restore.out && left="$left restore: $(head -c 200 /tmp/s47_restore.out)"
if [ -z "$left" ]; then result s47_nothing_left PASS "no NBD device connected, nothing mounted, $BDF bound to nvme, nothing to restore"
else result s47_nothing_left FAIL "$left"; fi
