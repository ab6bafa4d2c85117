#!/bin/sh
. /vm/lib.sh
D=${VM_NULL_DEV#/dev/}
/bin/iolab run -i io_uring --submit sqpoll --qd 8 --runtime 3s $VM_NULL_DEV -q >/dev/null 2>&1 &
sleep 1.5
P=$(pidof iolab)
dump() { echo "CAPTURE-BEGIN $1"; cat "$2"; echo "CAPTURE-END $1"; }
dump proc_interrupts /proc/interrupts
dump proc_stat /proc/stat
dump sys_block_stat /sys/block/$D/stat
for t in /proc/$P/task/*; do tid=${t##*/}; dump task-sqpoll/$tid.stat $t/stat; dump task-sqpoll/$tid.status $t/status; done
wait
result capture PASS "dev=$D pid=$P"
