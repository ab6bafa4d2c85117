#!/bin/sh
# `iolab serve` and the kernel's NBD client (docs/server-client.md): the file-backed emulated
# NVMe namespace served over loopback through io_uring, /dev/nbd0 connected by `iolab nbd
# connect` (netlink NBD_CMD_CONNECT). Checked: data written through /dev/nbd0 reads back on the
# server's device; ext4 made and mounted on /dev/nbd0 where the guest has mkfs.ext4; after kill -9
# of server and client, `iolab restore` disconnects /dev/nbd0; a clean stop (SIGTERM) of both
# disconnects by itself and the server's summary counts the requests and their CPU.
. /vm/lib.sh

[ -n "$VM_FILE_DEV" ] || { result nbd_device SKIP "no file-backed NVMe controller (--backend file|both)"; exit 0; }
wait_ns >/dev/null 2>&1
DEV=$VM_FILE_DEV
if ! modprobe nbd nbds_max=2 2>/tmp/nbd_modprobe.err; then
  result nbd_module SKIP "this kernel has no nbd module: $(head -c 200 /tmp/nbd_modprobe.err)"; exit 0
fi
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up 2>/dev/null
PORT=10809

# wait_line FILE WORD: up to 30 s for WORD in FILE.
wait_line() {
  local _i=0
  while [ $_i -lt 300 ]; do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; _i=$((_i + 1)); done
  return 1
}
connected() { [ -e /sys/block/nbd0/pid ]; }

section "serve $DEV through io_uring, connect /dev/nbd0"
"$IOLAB" serve "$DEV" -i io_uring --destructive --listen 127.0.0.1:$PORT > /tmp/nbd_serve.out 2> /tmp/nbd_serve.err &
SPID=$!
if wait_line /tmp/nbd_serve.out serving; then
  result nbd_serve_listens PASS "$(head -1 /tmp/nbd_serve.out)"
else
  result nbd_serve_listens FAIL "$(head -c 300 /tmp/nbd_serve.err)"; kill -9 $SPID 2>/dev/null; exit 0
fi
"$IOLAB" nbd connect 127.0.0.1:$PORT --index 0 > /tmp/nbd_client.out 2> /tmp/nbd_client.err &
CPID=$!
if wait_line /tmp/nbd_client.out connected && connected; then
  result nbd_connect PASS "$(head -1 /tmp/nbd_client.out); /dev/nbd0 $(cat /sys/block/nbd0/size) sectors"
else
  result nbd_connect FAIL "$(head -c 300 /tmp/nbd_client.err)"; kill -9 $SPID $CPID 2>/dev/null; "$IOLAB" restore >/dev/null 2>&1; exit 0
fi

dd if=/dev/urandom of=/tmp/nbd_pattern bs=4096 count=256 2>/dev/null
dd if=/tmp/nbd_pattern of=/dev/nbd0 bs=4096 seek=16 conv=fsync 2>/dev/null
echo 3 > /proc/sys/vm/drop_caches
dd if="$DEV" of=/tmp/nbd_back bs=4096 skip=16 count=256 2>/dev/null
if cmp -s /tmp/nbd_pattern /tmp/nbd_back; then
  result nbd_write_reads_back_on_server PASS "1 MiB written through /dev/nbd0 reads back on $DEV"
else
  result nbd_write_reads_back_on_server FAIL "$(cmp /tmp/nbd_pattern /tmp/nbd_back 2>&1 | head -1)"
fi

if command -v mkfs.ext4 >/dev/null; then
  mkdir -p /mnt/nbd
  if mkfs.ext4 -q -F /dev/nbd0 >/tmp/nbd_mkfs.out 2>&1 && mount -t ext4 /dev/nbd0 /mnt/nbd; then
    echo hello > /mnt/nbd/file && sync && umount /mnt/nbd
    result nbd_ext4 PASS "ext4 made, mounted, written and unmounted on /dev/nbd0"
  else
    result nbd_ext4 FAIL "$(head -c 300 /tmp/nbd_mkfs.out)"; umount /mnt/nbd 2>/dev/null
  fi
else
  result nbd_ext4 SKIP "the guest has no mkfs.ext4"
fi

section "kill -9 of server and client, then iolab restore"
kill -9 $CPID $SPID 2>/dev/null
wait $CPID $SPID 2>/dev/null
connected && echo "nbd0 still connected after kill -9 (as expected: the kernel holds the sockets)"
"$IOLAB" restore > /tmp/nbd_restore.out 2>&1
for _ in 1 2 3 4 5 6 7 8 9 10; do connected || break; sleep 0.5; done
if ! connected && grep -q "disconnected /dev/nbd0" /tmp/nbd_restore.out; then
  result nbd_restore_disconnects PASS "$(grep nbd0 /tmp/nbd_restore.out | head -1)"
else
  result nbd_restore_disconnects FAIL "pid file $(cat /sys/block/nbd0/pid 2>&1); restore said: $(head -c 300 /tmp/nbd_restore.out)"
fi

section "a clean stop: the client disconnects, the server sums up"
"$IOLAB" serve "$DEV" -i io_uring --listen 127.0.0.1:$PORT --json /tmp/nbd_summary.json > /tmp/nbd_serve2.out 2> /tmp/nbd_serve2.err &
SPID=$!
wait_line /tmp/nbd_serve2.out serving
"$IOLAB" nbd connect 127.0.0.1:$PORT --index 0 > /tmp/nbd_client2.out 2> /tmp/nbd_client2.err &
CPID=$!
if wait_line /tmp/nbd_client2.out connected; then
  dd if=/dev/nbd0 of=/dev/null bs=4096 count=256 iflag=direct 2>/dev/null || dd if=/dev/nbd0 of=/dev/null bs=4096 count=256 2>/dev/null
  kill -TERM $CPID; wait $CPID
  CRC=$?
  sleep 0.5
  if [ $CRC = 0 ] && ! connected; then result nbd_client_sigterm_disconnects PASS "$(tail -1 /tmp/nbd_client2.out)"
  else result nbd_client_sigterm_disconnects FAIL "exit $CRC; $(head -c 300 /tmp/nbd_client2.err)"; fi
else
  result nbd_client_sigterm_disconnects FAIL "$(head -c 300 /tmp/nbd_client2.err)"; kill -9 $CPID 2>/dev/null
fi
kill -TERM $SPID; wait $SPID
jflat /tmp/nbd_summary.json > /tmp/nbd_summary.flat 2>/dev/null
reads=$(awk -F= '$1 == "requests.read" { print $2 }' /tmp/nbd_summary.flat)
cpu=$(awk -F= '$1 == "cpu_us_per_request" { print $2 }' /tmp/nbd_summary.flat)
if [ -n "$reads" ] && [ "$reads" -gt 0 ] && [ -n "$cpu" ] && [ "$cpu" != null ]; then
  result nbd_server_summary PASS "$reads reads, $cpu µs of server CPU per request; $(grep 'per request' /tmp/nbd_serve2.out)"
else
  result nbd_server_summary FAIL "reads '$reads' cpu '$cpu': $(head -c 300 /tmp/nbd_serve2.err)"
fi
"$IOLAB" restore > /tmp/nbd_restore2.out 2>&1
if ! connected && ! grep -q nbd /tmp/nbd_restore2.out; then result nbd_nothing_left PASS "nothing connected, nothing to restore"
else result nbd_nothing_left FAIL "$(head -c 300 /tmp/nbd_restore2.out)"; fi
