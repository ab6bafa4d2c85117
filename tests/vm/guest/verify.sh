#!/bin/sh
# Writes that reach a real device: iolab --verify through every interface and mode on the NVMe
# namespace backed by an image file, and on a memory-backed null_blk; read back with --verify.
. /vm/lib.sh
IOS=${VM_IOS:-400}
SIZE=8m

# verified NAME DEV CTRL EXPECTED ARGS...: a --verify run that must check what it read and
# read back what it wrote.
verified() {
  local _n=$1 _d=$2 _c=$3 _w=$4 _rc _wb _rd _wr
  shift 4
  run_iolab $_n "$_c" "$@" --verify --size $SIZE "$_d"
  check_ok "$_w"
  _rc=$(j results.verify.reads_checked); _wb=$(j results.verify.written_blocks_read_back)
  _rd=$(j results.read.ios); _wr=$(j results.write.ios)
  case "$(j spec.rw)" in
    *read|randrw) [ "${_rc:-0}" -gt 0 ] || problem "--verify checked no read (reads_checked=$_rc, read ios=$_rd)";;
  esac
  case "$(j spec.rw)" in
    *write|randrw) [ "${_wb:-0}" -gt 0 ] || problem "--verify read back no written block (written_blocks_read_back=$_wb, write ios=$_wr)";;
  esac
  report $_n "reads=$_rd writes=$_wr reads_checked=$_rc written_read_back=$_wb"
}

# suite PREFIX DEV CTRL POLLED_PATH
suite() {
  local _p=$1 _d=$2 _c=$3 _pp=$4 _sp=interrupt
  kernel_at_least 5 18 || _sp=${_pp:-interrupt}   # RWF_HIPRI polls synchronous I/O before 5.18
  refused ${_p}_write_needs_destructive "destructive" -i psync --rw write --ios 10 "$_d"
  # Fill the range in verify format, then read it back: every read checked.
  verified ${_p}_fill_seq_write "$_d" "$_c" interrupt -i io_uring --qd 8 --rw write --bs 64k --bytes $SIZE --destructive "$_d"
  verified ${_p}_readback_psync "$_d" "$_c" interrupt -i psync --rw randread --ios $IOS
  [ "$(j results.verify.reads_checked)" = "$IOS" ] \
    && result ${_p}_readback_all_checked PASS "reads_checked=$IOS" \
    || result ${_p}_readback_all_checked FAIL "reads_checked=$(j results.verify.reads_checked), want $IOS"
  # Mixed reads and writes through every interface and mode.
  verified ${_p}_rw_psync        "$_d" "$_c" interrupt -i psync --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_pvsync2      "$_d" "$_c" interrupt -i pvsync2 --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_pvsync2_poll "$_d" "$_c" "$_sp" -i pvsync2 --complete poll --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_posixaio     "$_d" "$_c" interrupt -i posixaio --qd 4 --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_posixaio_poll "$_d" "$_c" interrupt -i posixaio --qd 4 --complete poll --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_libaio       "$_d" "$_c" interrupt -i libaio --qd 8 --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_uring        "$_d" "$_c" interrupt -i io_uring --qd 8 --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  verified ${_p}_rw_uring_sqpoll "$_d" "$_c" interrupt -i io_uring --qd 8 --submit sqpoll --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  if [ -n "$_pp" ]; then
    verified ${_p}_rw_uring_poll        "$_d" "$_c" "$_pp" -i io_uring --qd 8 --complete poll --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
    verified ${_p}_rw_uring_sqpoll_poll "$_d" "$_c" "$_pp" -i io_uring --qd 8 --submit sqpoll --complete poll --rw randrw --write-mix 50 --ios $IOS --destructive "$_d"
  else
    result ${_p}_rw_uring_poll SKIP "$_d cannot poll (queue/io_poll=0)"
  fi
  verified ${_p}_write_uring_unregistered "$_d" "$_c" interrupt -i io_uring --qd 8 --register-buffers false --register-files false --rw randwrite --ios $IOS --destructive "$_d"
  # And everything written above still reads back.
  verified ${_p}_readback_final "$_d" "$_c" interrupt -i libaio --qd 8 --rw read --bs 128k --bytes $SIZE
}

section "verified writes on $VM_FILE_DEV (NVMe backed by an image file, controller $VM_FILE_CTRL)"
if [ -n "${VM_FILE_DEV:-}" ]; then
  PP=""; [ "$(qattr $VM_FILE_DEV io_poll)" = 1 ] && PP=polled
  suite nvmefile "$VM_FILE_DEV" "$VM_FILE_CTRL" "$PP"
else
  result nvmefile SKIP "no NVMe namespace with the file backend (boot with --backend file or both)"
fi

section "verified writes on null_blk (memory_backed=1, poll_queues=1)"
if load_null_blk queue_mode=2 poll_queues=1 gb=1 memory_backed=1 nr_devices=1 && [ ! -e /sys/module/null_blk/parameters/memory_backed ]; then
  # An unknown module parameter is ignored: nullb0 would drop writes and read zeros.
  result nullbmem_load SKIP "kernel $KREL's null_blk has no memory_backed parameter: writes could not be read back"
  rmmod null_blk
elif [ -b /dev/nullb0 ]; then
  PP=""; [ "$(qattr /dev/nullb0 io_poll)" = 1 ] && PP=polled
  suite nullbmem /dev/nullb0 "" "$PP"
  rmmod null_blk
else
  result nullbmem_load FAIL "modprobe null_blk memory_backed=1 failed: $(dmesg | tail -2 | tr '\n' ' ')"
fi
known_bugs
exit 0
