#!/bin/sh
# iolab's own user-space NVMe driver (-i vfio-nvme) on the file-backed emulated controller, in
# either of VFIO's two ways to reach memory:
# - through VFIO type-1 under QEMU's intel-iommu (tests/vm/rig.sh --iommu): everything below;
# - in VFIO's unsafe no-IOMMU mode with physical addresses (tests/vm/rig.sh --noiommu, vfio.ko
#   rebuilt with CONFIG_VFIO_NOIOMMU and loaded with enable_unsafe_noiommu_mode=1): the runs whose
#   DMA addressing differs (refused without --vfio-noiommu; written by the driver and read back by
#   the kernel, and the reverse; --verify; three threads at 512 B, 12 KiB batched, 1 MiB with PRP
#   lists; zero interrupts; given back after each run), not the mode-blind ones (signals, kill -9,
#   mounted, swap, probe).
# Checked: data written by the driver reads back through the kernel's block device after the
# controller is given back, and the reverse; --verify; several threads, 512 B to 1 MiB; zero
# interrupts on the controller's vectors; the controller bound to nvme again after a normal run,
# after SIGINT, and after kill -9 followed by `iolab restore`; refusals while the namespace is
# mounted, swap or open.
. /vm/lib.sh

if grep -q intel_iommu=on /proc/cmdline; then
  MODE=type1; NOIOMMU=""; BUFFERS=heap
elif grep -q vmrig.noiommu=1 /proc/cmdline; then
  MODE=no-iommu; NOIOMMU=--vfio-noiommu; BUFFERS=hugepages
else
  result vfio_iommu SKIP "neither an emulated IOMMU nor the no-IOMMU vfio.ko in this boot (tests/vm/rig.sh --iommu or --noiommu)"; exit 0
fi
[ -n "$VM_FILE_CTRL" ] || { result vfio_device SKIP "no file-backed NVMe controller (--backend file|both)"; exit 0; }
if [ $MODE = no-iommu ]; then
  # Before vfio-pci pulls vfio in without the parameter.
  modprobe vfio enable_unsafe_noiommu_mode=1 || { result vfio_noiommu_module FAIL "modprobe vfio enable_unsafe_noiommu_mode=1 failed"; exit 0; }
  if [ "$(cat /sys/module/vfio/parameters/enable_unsafe_noiommu_mode 2>/dev/null)" = Y ]; then
    result vfio_noiommu_module PASS "vfio loaded with enable_unsafe_noiommu_mode=Y, kernel tainted $(cat /proc/sys/kernel/tainted) ($(dmesg | grep -m1 'vfio: module' | sed 's/^\[ *[0-9.]*\] //' | cut -c1-90))"
  else
    result vfio_noiommu_module FAIL "enable_unsafe_noiommu_mode is '$(cat /sys/module/vfio/parameters/enable_unsafe_noiommu_mode 2>&1)'"; exit 0
  fi
fi
modprobe vfio-pci || { result vfio_modules FAIL "modprobe vfio-pci failed"; exit 0; }
[ $MODE = type1 ] && modprobe vfio_iommu_type1
BDF=$(basename "$(readlink -f "/sys/class/nvme/$VM_FILE_CTRL/device")")
wait_ns || { result vfio_namespace FAIL "no namespace on $BDF"; exit 0; }
echo "vfio: controller $BDF ($VM_FILE_CTRL), namespace $DEV, IOMMU group $(basename "$(readlink "/sys/bus/pci/devices/$BDF/iommu_group")")"

section "the interface and its refusals"
hugepages() { cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages; }
if [ $MODE = no-iommu ]; then
  H0=$(hugepages)
  refused vfio_noiommu_needs_flag "pass --vfio-noiommu to allow that" -i vfio-nvme --complete poll --rw read --ios 10 "$DEV"
  if [ "$(driver)" = nvme ] && [ "$(hugepages)" = "$H0" ]; then result vfio_noiommu_refusal_changed_nothing PASS "bound to nvme, $H0 hugepages"
  else result vfio_noiommu_refusal_changed_nothing FAIL "bound to '$(driver)', hugepages $H0 -> $(hugepages)"; fi
fi
if "$IOLAB" interfaces | grep -q '^vfio-nvme .*SPDK class.* yes '; then
  result vfio_interfaces_available PASS "$("$IOLAB" interfaces | grep '^vfio-nvme' | cut -c1-80)"
else
  result vfio_interfaces_available FAIL "$("$IOLAB" interfaces | grep '^vfio-nvme')"
fi
# Without an IOMMU probe runs the driver only when allowed to (without, it says what run says).
"$IOLAB" probe $NOIOMMU "$DEV" > /tmp/vfio_probe.out 2>&1
if grep -q 'vfio-nvme.*poll.*yes.*polled' /tmp/vfio_probe.out; then
  result vfio_probe PASS "$(grep vfio-nvme /tmp/vfio_probe.out | head -1 | cut -c1-160)"
else
  result vfio_probe FAIL "$(grep vfio-nvme /tmp/vfio_probe.out | head -c 300)"
fi
wait_ns
[ $MODE = type1 ] && {
refused vfio_write_needs_destructive "destructive" -i vfio-nvme --complete poll --rw write --ios 10 "$DEV"
refused vfio_needs_poll "complete poll" -i vfio-nvme --rw read --ios 10 "$DEV"
sleep 30 < "$DEV" &
HOLDER=$!
sleep 0.2
refused vfio_refused_while_open "pid $HOLDER (sleep) has $DEV open" -i vfio-nvme --complete poll --rw read --ios 10 "$DEV"
kill $HOLDER; wait $HOLDER 2>/dev/null
[ "$(driver)" = nvme ] || result vfio_refusal_changed_nothing FAIL "bound to $(driver) after a refusal"
}

section "written by the driver, read back by the kernel"
# verified NAME ARGS...: a vfio-nvme --verify run that completes by polling with no interrupt.
verified() {
  local _n=$1 _rc _wb
  shift
  run_iolab "$_n" "" -i vfio-nvme --complete poll $NOIOMMU --verify "$@"
  if [ "$RC" != 0 ]; then problem "exit $RC: $(head -c 400 "/tmp/$RUN_NAME.err" | tr '\n' ' ')"; fi
  [ "$(j status)" = ok ] || problem "status $(j status): $(j error)"
  [ "$(j results.total.errors)" = 0 ] || problem "errors=$(j results.total.errors)"
  [ "$(j completion_path.observed)" = polled ] || problem "completion path observed '$(j completion_path.observed)': $(j completion_path.evidence)"
  case "$(j completion_path.evidence)" in 0\ interrupts*) ;; *) problem "evidence: $(j completion_path.evidence)";; esac
  [ "$(j environment.user_space_driver.iommu)" = $MODE ] || problem "iommu '$(j environment.user_space_driver.iommu)'"
  # Physical addresses only of hugepages: an ordinary page may move while the controller has it.
  [ "$(j environment.user_space_driver.buffers)" = $BUFFERS ] || problem "slot buffers in '$(j environment.user_space_driver.buffers)', want $BUFFERS"
  _rc=$(j results.verify.reads_checked); _wb=$(j results.verify.written_blocks_read_back)
  case "$(j spec.rw)" in *write|randrw) [ "${_wb:-0}" -gt 0 ] || problem "no written block read back";; esac
  case "$(j spec.rw)" in *read|randrw) [ "${_rc:-0}" -gt 0 ] || problem "no read checked";; esac
  report "$_n" "$(j environment.user_space_driver.iommu) buffers=$(j environment.user_space_driver.buffers) reads_checked=$_rc written_read_back=$_wb hugepages=$(j environment.user_space_driver.hugepages) $(j environment.settings_changed.0)"
}
verified vfio_fill_write --rw write --bs 64k --bytes 8m --size 8m --destructive "$DEV" "$DEV"
# iolab waits for the namespace to be back before it exits (a sweep's next run may name it).
[ -n "$(ns_dev)" ] && [ -b "$(ns_dev)" ] && result vfio_namespace_back_at_exit PASS "$(ns_dev)" \
  || result vfio_namespace_back_at_exit FAIL "no block device of $BDF right after iolab exited"
bound_back vfio_bound_back_after_run
run_iolab vfio_kernel_reads_driver_data "$(ctrl)" -i psync --rw randread --ios 200 --size 8m --verify "$DEV"
check_ok interrupt
[ "$(j results.verify.reads_checked)" = 200 ] || problem "reads_checked=$(j results.verify.reads_checked), want 200"
report vfio_kernel_reads_driver_data

section "written by the kernel, read back by the driver"
run_iolab vfio_kernel_fill "$(ctrl)" -i io_uring --qd 8 --rw write --bs 64k --offset 16m --bytes 4m --size 4m --verify --destructive "$DEV" "$DEV"
check_ok interrupt
report vfio_kernel_fill
verified vfio_driver_reads_kernel_data --rw randread --qd 8 --ios 300 --offset 16m --size 4m "$BDF/1"
[ "$(j results.verify.reads_checked)" = 300 ] || result vfio_driver_read_all FAIL "reads_checked=$(j results.verify.reads_checked), want 300"
wait_ns

section "threads and block sizes"
verified vfio_threads_512 --rw randrw --write-mix 50 --threads 3 --qd 8 --bs 512 --ios 600 --size 8m --destructive "$DEV" "$DEV"
[ "$(j environment.user_space_driver.io_queues)" -ge 3 ] 2>/dev/null || result vfio_queue_pairs FAIL "io_queues=$(j environment.user_space_driver.io_queues)"
wait_ns
verified vfio_1m --rw randrw --write-mix 50 --qd 4 --bs 1m --ios 24 --size 8m --destructive "$DEV" "$DEV"
wait_ns
verified vfio_12k_batched --rw randread --qd 16 --batch-submit 4 --bs 12k --ios 400 --size 8m "$DEV"
wait_ns

[ $MODE = type1 ] || exit 0

section "the polling thread is busy"
# cores CLASS: the CPU cores the thread class used over the last run's window.
cores() {
  awk -F= -v c="$1" '$0 ~ "^cost\\.classes\\.[0-9]+\\.class=" c "$" { split($1, p, "."); i = p[3] }
           /^cost\.classes\.[0-9]+\.cores=/ { split($1, p, "."); v[p[3]] = $2 }
           END { if (i != "") print v[i] }' "/tmp/$RUN_NAME.flat"
}
verified vfio_polling_core_busy --rw randread --qd 4 --runtime 2s --size 8m "$DEV"
W=$(cores workload)
if fcmp "${W:-0}" ge 0.7; then result vfio_polling_core_busy_cpu PASS "workload threads $W cores (one thread polling)"
else result vfio_polling_core_busy_cpu FAIL "workload threads used ${W:-no} cores, want a polling core near 1"; fi
wait_ns

section "profiled: the driver's requests are one user-space stage"
# The unprofiled comparison run gives the controller back and the profiled run takes it again,
# in one process; the profiled run's tracefs change comes while it holds the controller.
verified vfio_profiled --rw randread --qd 4 --ios 400 --size 8m --profile stages "$DEV"
if [ "$(j cost.stages.stages.0.from)" = "submission (user space)" ] && [ "$(j cost.stages.requests_matched)" -gt 0 ] 2>/dev/null; then
  result vfio_profiled_one_stage PASS "requests_matched=$(j cost.stages.requests_matched) p50_ns=$(j cost.stages.stages.0.p50_ns) unprofiled_iops=$(j cost.stages.unprofiled.iops)"
else
  result vfio_profiled_one_stage FAIL "$(grep '^cost\.stages' "/tmp/$RUN_NAME.flat" | head -6 | tr '\n' ' ')"
fi
wait_ns

section "given back after SIGINT and after kill -9"
"$IOLAB" run -q -i vfio-nvme --complete poll --rw randread --runtime 60s --size 8m "$DEV" > /tmp/vfio_int.out 2> /tmp/vfio_int.err &
P=$!
i=0; while [ $i -lt 100 ] && [ "$(driver)" != vfio-pci ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -INT $P; wait $P; RC=$?
[ $RC = 130 ] && result vfio_sigint_exit PASS "exit 130" || result vfio_sigint_exit FAIL "exit $RC: $(head -c 300 /tmp/vfio_int.err)"
bound_back vfio_bound_back_after_sigint
"$IOLAB" run -q -i vfio-nvme --complete poll --rw randread --runtime 60s --size 8m "$DEV" > /dev/null 2>&1 &
P=$!
i=0; while [ $i -lt 100 ] && [ "$(driver)" != vfio-pci ]; do sleep 0.1; i=$((i + 1)); done
sleep 1
kill -9 $P; wait $P 2>/dev/null
if [ "$(driver)" = vfio-pci ]; then
  "$IOLAB" restore > /tmp/vfio_restore.out 2>&1
  result vfio_restore_after_kill PASS "$(tr '\n' ' ' < /tmp/vfio_restore.out | head -c 200)"
else
  result vfio_restore_after_kill FAIL "after kill -9 the controller is bound to '$(driver)', expected vfio-pci until iolab restore"
fi
bound_back vfio_bound_back_after_kill_and_restore

section "refused while mounted or swap"
if mke2fs -q "$DEV" 2>/dev/null && mkdir -p /mnt/vfio && mount -t ext4 "$DEV" /mnt/vfio 2>/dev/null; then
  refused vfio_refused_while_mounted "mounted on /mnt/vfio" -i vfio-nvme --complete poll --rw read --ios 10 "$DEV"
  umount /mnt/vfio
else
  result vfio_refused_while_mounted SKIP "cannot make and mount a file system on $DEV here"
fi
if mkswap "$DEV" > /dev/null 2>&1 && swapon "$DEV" 2>/dev/null; then
  refused vfio_refused_while_swap "swap" -i vfio-nvme --complete poll --rw read --ios 10 "$DEV"
  swapoff "$DEV"
else
  result vfio_refused_while_swap SKIP "cannot use $DEV as swap here"
fi
[ "$(driver)" = nvme ] && result vfio_refusals_changed_nothing PASS "still bound to nvme" \
  || result vfio_refusals_changed_nothing FAIL "bound to $(driver)"
