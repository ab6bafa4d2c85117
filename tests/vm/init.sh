#!/bin/sh
# /init of the iolab VM rig (busybox sh). Loads the block modules, finds the emulated NVMe
# namespaces by serial, runs every /vm/tests/*.sh in order, prints a summary, powers off.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t debugfs none /sys/kernel/debug 2>/dev/null
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^vmrig\.$1=//p" | tail -1; }
up() { cut -d' ' -f1 /proc/uptime; }
echo "VMRIG BOOT kernel=$(uname -r) cpus=$(nproc) mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\).*/\1/p' /proc/meminfo) uptime=$(up)"

PQ=$(arg poll_queues); PQ=${PQ:-1}
BACKEND=$(arg backend); BACKEND=${BACKEND:-both}
# Checksum helpers the NVMe stack asks the crypto API for (best effort: absent on some kernels).
for m in crct10dif_generic crct10dif-pclmul crc64_rocksoft_generic; do modprobe -q $m 2>/dev/null; done
modprobe nvme poll_queues=$PQ || echo "VMRIG WARN modprobe nvme failed"
modprobe kyber-iosched 2>/dev/null || echo "VMRIG WARN no kyber-iosched module"
modprobe bfq 2>/dev/null || echo "VMRIG WARN no bfq module"
case $BACKEND in both) want=2;; *) want=1;; esac

# NVMe namespaces, by the serial QEMU was given: VM_NULL_* (null backend), VM_FILE_* (file).
# VM_*_DEV is the block device, VM_*_CTRL the controller (nvmeN, for /proc/interrupts).
i=0
while [ $i -lt 100 ]; do
  n=$(ls -d /sys/block/nvme*n1 2>/dev/null | wc -l)
  [ "$n" -ge $want ] && break
  sleep 0.1; i=$((i + 1))
done
for b in /sys/block/nvme*n1; do
  [ -e "$b" ] || continue
  d=${b##*/}
  serial=$(cat "$b/device/serial" 2>/dev/null | tr -d ' ')
  ctrl=""
  for c in /sys/class/nvme/nvme*; do
    [ "$(cat "$c/serial" 2>/dev/null | tr -d ' ')" = "$serial" ] && ctrl=${c##*/}
  done
  case $serial in
    vmrig-null) export VM_NULL_DEV=/dev/$d VM_NULL_CTRL=$ctrl;;
    vmrig-file) export VM_FILE_DEV=/dev/$d VM_FILE_CTRL=$ctrl;;
  esac
done
export VM_POLL_QUEUES=$PQ VM_BACKEND=$BACKEND IOLAB=/bin/iolab
echo "VMRIG DEVICES null=${VM_NULL_DEV:-none}(${VM_NULL_CTRL:-}) file=${VM_FILE_DEV:-none}(${VM_FILE_CTRL:-}) poll_queues=$PQ uptime=$(up)"
dmesg | grep -E 'nvme.*(poll|queues)' | sed 's/^/VMRIG dmesg: /'

for t in /vm/tests/*; do
  echo "VMRIG SCRIPT $t uptime=$(up)"
  (cd /tmp && sh "$t") 2>&1
  rc=$?
  [ $rc = 0 ] || echo "RESULT script:${t##*/} FAIL the script exited with $rc"
done
echo "VMRIG DONE uptime=$(up)"
sync
poweroff -f
