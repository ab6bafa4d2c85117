#!/bin/sh
# nvme-passthru: io_uring URING_CMD on the NVMe generic character device (/dev/ngXnY), with the
# NVMe read and write commands built by iolab. Interrupt and polled completion (polled must take
# no queue interrupt), registered buffers on and off, QD 1 and 8, SQPOLL; data written through
# passthrough reads back identically through the block device and the reverse; the write safety
# rules of the namespace's block device; refusals. Needs a boot with poll queues.
. /vm/lib.sh
IOS=${VM_IOS:-500}
SIZE=8m

section "nvme-passthru: generic character devices"
if ! kernel_at_least 5 19; then
  # No IORING_OP_URING_CMD nor 128-byte SQEs: iolab must say so, naming the version.
  refused passthru_old_kernel '5\.19' -i nvme-passthru --ios 10 "${VM_NULL_DEV:-/dev/nvme0n1}"
  exit 0
fi
ls -l /dev/ng* 2>&1
"$IOLAB" interfaces > /tmp/interfaces.out 2>&1
row=$(grep '^nvme-passthru ' /tmp/interfaces.out)
echo "$row"
case $row in
  *" yes "*) result passthru_available PASS "$(echo "$row" | tr -s ' ' | cut -c1-80)";;
  *) result passthru_available FAIL "iolab interfaces: '$row'";;
esac

NG=""; NGF=""
[ -n "${VM_NULL_DEV:-}" ] && NG=$(ng_of "$VM_NULL_DEV")
[ -n "${VM_FILE_DEV:-}" ] && NGF=$(ng_of "$VM_FILE_DEV")
echo "null backend: $VM_NULL_DEV -> ${NG:-none}; file backend: ${VM_FILE_DEV:-} -> ${NGF:-none}"
if [ -z "$NG" ]; then
  result passthru_ng_present FAIL "no generic character device for $VM_NULL_DEV"
  exit 0
fi
[ "$(ng_block "${NG#/dev/}")" = "${VM_NULL_DEV#/dev/}" ] \
  && result passthru_ng_present PASS "$NG is the generic device of $VM_NULL_DEV" \
  || result passthru_ng_present FAIL "ng_block $NG gives '$(ng_block "${NG#/dev/}")', want ${VM_NULL_DEV#/dev/}"
POLL=""; [ "$(qattr $VM_NULL_DEV io_poll)" = 1 ] && POLL=polled
CTRL=$VM_NULL_CTRL

section "what the record says about $NG"
run_iolab passthru_record "$CTRL" -i nvme-passthru --qd 4 --ios 50 "$NG"
check_ok interrupt
b=/sys/block/${VM_NULL_DEV#/dev/}
for kv in "kind=nvme-generic" "path=$NG" "device=${VM_NULL_DEV#/dev/}" "logical_block_size=$(qattr $VM_NULL_DEV logical_block_size)" \
          "size_bytes=$(( $(cat $b/size) * 512 ))" "io_poll=$([ -n "$POLL" ] && echo true || echo false)" \
          "model=$(sed 's/ *$//' $b/device/model)"; do
  k=${kv%%=*}; v=${kv#*=}; got=$(j environment.targets.0.$k)
  [ "$got" = "$v" ] || problem "environment.targets.0.$k=$got, want $v"
done
[ "$(j cost.devices.0.controller)" = "$CTRL" ] || problem "cost.devices.0.controller=$(j cost.devices.0.controller), want $CTRL"
report passthru_record "kind=$(j environment.targets.0.kind) device=$(j environment.targets.0.device) lbs=$(j environment.targets.0.logical_block_size) controller=$(j cost.devices.0.controller)"

# pt NAME EXPECTED_PATH ARGS...: a read run through passthrough; a polled run must also be
# observed polled by iolab and take no queue interrupt at all.
pt() {
  local _n=$1 _w=$2
  shift 2
  run_iolab "$_n" "$CTRL" -i nvme-passthru "$@" --ios $IOS "$NG"
  check_ok "$_w"
  if [ "$_w" = polled ]; then
    [ -z "$IRQS" ] || [ "$IRQS" = 0 ] || problem "polled passthrough took $IRQS queue interrupts"
    [ "$(j completion_path.observed)" = polled ] || problem "completion_path.observed=$(j completion_path.observed) ($(j completion_path.evidence))"
  fi
  report "$_n" "register_buffers=$(j spec.register_buffers) qd=$(j spec.qd)"
}

section "reads through $NG (controller $CTRL)"
pt passthru_irq_qd1              interrupt --qd 1
pt passthru_irq_qd8              interrupt --qd 8
pt passthru_irq_qd8_unregistered interrupt --qd 8 --register-buffers false --register-files false
pt passthru_sqpoll_irq_qd8       interrupt --qd 8 --submit sqpoll
if [ -n "$POLL" ]; then
  pt passthru_poll_qd1              polled --qd 1 --complete poll
  pt passthru_poll_qd8              polled --qd 8 --complete poll
  pt passthru_poll_qd8_unregistered polled --qd 8 --complete poll --register-buffers false --register-files false
  pt passthru_poll_batch            polled --qd 16 --batch-submit 4 --batch-reap 4 --complete poll
  pt passthru_sqpoll_poll_qd8       polled --qd 8 --submit sqpoll --complete poll
  pt passthru_strict_poll           polled --qd 8 --complete poll --strict
else
  result passthru_poll SKIP "$VM_NULL_DEV cannot poll (queue/io_poll=0)"
fi
pt passthru_bs64k_qd8 interrupt --qd 8 --bs 64k --rw read

section "refusals"
refused passthru_block_target "generic character device, e.g. /dev/ng0n1" -i nvme-passthru --ios 10 "$VM_NULL_DEV"
refused passthru_ng_needs_passthru "only -i nvme-passthru" -i io_uring --ios 10 "$NG"
refused passthru_file_target "generic character device" -i nvme-passthru --ios 10 /vm/lib.sh
refused passthru_buffered "page cache" -i nvme-passthru --buffered --ios 10 "$NG"
refused passthru_hybrid "hybrid" -i nvme-passthru --complete hybrid --ios 10 "$NG"
maxkb=$(qattr $VM_NULL_DEV max_hw_sectors_kb)
if [ -n "$maxkb" ] && [ "$maxkb" -lt 1024 ]; then
  refused passthru_bs_beyond_mdts "one NVMe command can carry" -i nvme-passthru --bs 1m --ios 10 "$NG"
else
  result passthru_bs_beyond_mdts SKIP "max_hw_sectors_kb=$maxkb: no --bs up to 1m exceeds it"
fi

section "iolab probe $NG"
"$IOLAB" probe "$NG" > /tmp/probe.out 2>&1; rc=$?
cat /tmp/probe.out
prow=$(grep -E '^nvme-passthru +syscall +poll ' /tmp/probe.out)
if [ $rc = 0 ] && echo "$prow" | grep -q ' yes ' && { [ -z "$POLL" ] || echo "$prow" | grep -q 'completes by polled'; }; then
  result passthru_probe PASS "$(echo "$prow" | tr -s ' ')"
else
  result passthru_probe FAIL "probe exit $rc; nvme-passthru poll row: '$prow'"
fi

# ------------------------------------------------------------------------------- integrity
if [ -z "$NGF" ]; then
  result passthru_integrity SKIP "no NVMe namespace with the file backend (boot with --backend file or both)"
  exit 0
fi
FCTRL=$VM_FILE_CTRL
FPOLL=""; [ "$(qattr $VM_FILE_DEV io_poll)" = 1 ] && FPOLL=polled
section "integrity: $NGF (passthrough) against $VM_FILE_DEV (block device), controller $FCTRL"

# verified NAME DEV CTRL EXPECTED ARGS...: a --verify run that must check what it read (every
# read when it only reads) and read back what it wrote.
verified() {
  local _n=$1 _d=$2 _c=$3 _w=$4 _rc _wb _rd _wr
  shift 4
  run_iolab $_n "$_c" "$@" --verify "$_d"
  # The block device's stat does not count passthrough commands (Linux 6.1): add the run's own
  # and the read-back's (synchronous NVMe Reads, by interrupt) so check_ok allows for the latter.
  case $_d in /dev/ng*)
    _rd=$(j results.total.ios); case $_rd in ''|null) _rd=0;; esac
    _wb=$(j results.verify.written_blocks_read_back); case $_wb in ''|null) _wb=0;; esac
    DEVIOS=$(( ${DEVIOS:-0} + _rd + _wb ));;
  esac
  check_ok "$_w"
  _rc=$(j results.verify.reads_checked); _wb=$(j results.verify.written_blocks_read_back)
  _rd=$(j results.read.ios); _wr=$(j results.write.ios)
  case "$(j spec.rw)" in
    read|randread) [ "${_rc:-0}" = "$_rd" ] && [ "$_rd" -gt 0 ] || problem "--verify checked $_rc of $_rd reads";;
    randrw) [ "${_rc:-0}" -gt 0 ] || problem "--verify checked no read (reads_checked=$_rc, read ios=$_rd)";;
  esac
  case "$(j spec.rw)" in
    *write|randrw) [ "${_wb:-0}" -gt 0 ] || problem "--verify read back no written block (written_blocks_read_back=$_wb, write ios=$_wr)";;
  esac
  if [ "$_w" = polled ] && [ -n "$IRQS" ] && [ "$(j completion_path.observed)" != polled ]; then
    problem "completion_path.observed=$(j completion_path.observed) ($(j completion_path.evidence))"
  fi
  report $_n "reads=$_rd writes=$_wr reads_checked=$_rc written_read_back=$_wb"
}

# Regions of the image nothing else in this boot writes (verify.sh uses its first 8 MiB).
A=32m; B=48m; C=64m

refused passthru_write_needs_destructive "destructive $NGF" -i nvme-passthru --rw write --ios 10 --offset $A --size $SIZE "$NGF"
refused passthru_write_destructive_other_device "destructive" -i nvme-passthru --rw write --ios 10 --offset $A --size $SIZE --destructive "$VM_NULL_DEV" "$NGF"

# Passthrough writes, read back through the block device.
verified passthru_fill_write_seq "$NGF" "$FCTRL" interrupt -i nvme-passthru --qd 8 --rw write --bs 64k --bytes $SIZE --offset $A --size $SIZE --destructive "$NGF"
verified passthru_then_block_read "$VM_FILE_DEV" "$FCTRL" interrupt -i io_uring --qd 8 --rw read --bs 64k --bytes $SIZE --offset $A --size $SIZE
[ "$(j results.verify.reads_checked)" = 128 ] \
  && result passthru_then_block_read_all PASS "the block device read back all 128 64-KiB blocks written by passthrough, every one verified" \
  || result passthru_then_block_read_all FAIL "reads_checked=$(j results.verify.reads_checked), want 128"
# Mixed random writes and reads through passthrough, each mode (--destructive naming the block
# device this time: either path is consent), then everything read back through the block device.
for m in "irq_qd1 interrupt --qd 1" "irq_qd8 interrupt --qd 8" "irq_qd8_unregistered interrupt --qd 8 --register-buffers false --register-files false" \
         "sqpoll_qd8 interrupt --qd 8 --submit sqpoll" "poll_qd1 polled --qd 1 --complete poll" "poll_qd8 polled --qd 8 --complete poll" \
         "poll_qd8_unregistered polled --qd 8 --complete poll --register-buffers false" "sqpoll_poll_qd8 polled --qd 8 --submit sqpoll --complete poll"; do
  set -- $m; n=$1; w=$2; shift 2
  if [ "$w" = polled ] && [ -z "$FPOLL" ]; then result passthru_rw_$n SKIP "$VM_FILE_DEV cannot poll"; continue; fi
  verified passthru_rw_$n "$NGF" "$FCTRL" "$w" -i nvme-passthru "$@" --rw randrw --write-mix 50 --ios 400 --offset $A --size $SIZE --destructive "$VM_FILE_DEV"
done
verified passthru_rw_then_block_read "$VM_FILE_DEV" "$FCTRL" interrupt -i libaio --qd 8 --rw read --bs 128k --bytes $SIZE --offset $A --size $SIZE

# The reverse: block-device writes into a region passthrough never touched, read back through
# passthrough (every read verified), by interrupt and polled.
verified block_fill_write_seq "$VM_FILE_DEV" "$FCTRL" interrupt -i io_uring --qd 8 --rw write --bs 64k --bytes $SIZE --offset $B --size $SIZE --destructive "$VM_FILE_DEV"
verified block_then_passthru_read "$NGF" "$FCTRL" interrupt -i nvme-passthru --qd 8 --rw read --bs 64k --bytes $SIZE --offset $B --size $SIZE
[ "$(j results.verify.reads_checked)" = 128 ] \
  && result block_then_passthru_read_all PASS "passthrough read back all 128 64-KiB blocks written through the block device, every one verified" \
  || result block_then_passthru_read_all FAIL "reads_checked=$(j results.verify.reads_checked), want 128"
if [ -n "$FPOLL" ]; then
  verified block_then_passthru_read_poll "$NGF" "$FCTRL" polled -i nvme-passthru --qd 8 --complete poll --rw randread --ios 400 --offset $B --size $SIZE
fi

# The block device's rules hold through the generic device: in use (swap) is refused whatever
# --destructive says; a signature (the swap area left behind) only with consent.
section "write safety through $NGF: the rules of $VM_FILE_DEV"
if mkswap "$VM_FILE_DEV" >/dev/null 2>&1 && swapon "$VM_FILE_DEV" 2>/dev/null; then
  refused passthru_write_swap_in_use "in use as swap" -i nvme-passthru --rw write --ios 10 --offset $A --size $SIZE --destructive "$NGF" "$NGF"
  swapoff "$VM_FILE_DEV"
  refused passthru_write_swap_signature "swap area" -i nvme-passthru --rw write --ios 10 --offset $A --size $SIZE "$NGF"
  t passthru_write_swap_consent "$FCTRL" interrupt -i nvme-passthru --rw write --ios 10 --offset $A --size $SIZE --destructive "$NGF" "$NGF"
  dd if=/dev/zero of="$VM_FILE_DEV" bs=4096 count=1 conv=notrunc 2>/dev/null
else
  result passthru_write_swap SKIP "mkswap/swapon on $VM_FILE_DEV failed"
fi

# And a region nobody wrote: a verified passthrough read must fail, so the checks above mean
# something.
run_iolab passthru_unwritten_fails "$FCTRL" -i nvme-passthru --rw randread --verify --ios 10 --offset $C --size $SIZE "$NGF"
if [ "$RC" = 1 ] && grep -q 'no iolab verify data' /tmp/passthru_unwritten_fails.err; then
  result passthru_unwritten_fails PASS "$(grep -m1 'no iolab verify data' /tmp/passthru_unwritten_fails.err)"
else
  result passthru_unwritten_fails FAIL "want exit 1 and 'no iolab verify data', got exit $RC: $(head -c 300 /tmp/passthru_unwritten_fails.err)"
fi
exit 0
