#!/bin/sh
# S5 (FPL'18 FastPath) as a suite on an NVMe namespace: `iolab suite run S5 --part S5.2 --quick` given the
# namespace's block device runs the block path (libaio, psync, io_uring) on it and the
# passthrough path (nvme-passthru irq, poll, SQPOLL+poll) on its generic device, found by iolab;
# polled passthrough takes no queue interrupt; the report's Table III has every row measured.
# Booted with `--append iolab_s5_capture` it also prints the passthrough records (gzip, base64)
# between CAPTURE lines: tests/fixtures/s5/passthru-records.json.gz is made from them. Needs poll
# queues.
. /vm/lib.sh
DEV=${VM_NULL_DEV:-}
DB=/tmp/s5.db

section "S5: block path against passthrough on ${DEV:-no NVMe}"
if [ -z "$DEV" ]; then
  result s5_suite SKIP "no NVMe namespace with the null backend"
  exit 0
fi
if ! kernel_at_least 5 19; then
  result s5_suite SKIP "kernel $KREL has no io_uring URING_CMD (5.19): the passthrough rows cannot run"
  exit 0
fi
NG=$(ng_of "$DEV")
i0=$(irqs "$VM_NULL_CTRL")
"$IOLAB" suite run S5 --part S5.2 --quick "$DEV" --destructive "$DEV" --db $DB -q > /tmp/s5.out 2>&1
rc=$?
tail -n 5 /tmp/s5.out
[ $rc = 0 ] && result s5_suite PASS "$(grep -c . /tmp/s5.out) lines, $(( $(irqs "$VM_NULL_CTRL") - i0 )) queue interrupts" \
  || { result s5_suite FAIL "exit $rc: $(tail -n 3 /tmp/s5.out | tr '\n' ' ')"; exit 0; }
grep -q "nvme-passthru runs on each namespace's generic device: $NG for $DEV" /tmp/s5.out \
  && result s5_generic_device PASS "said: $NG for $DEV" \
  || result s5_generic_device FAIL "the suite did not say it drove $NG for $DEV: $(grep passthru /tmp/s5.out | head -n 2)"

# Every passthrough run stored, on the generic device, polled where asked.
"$IOLAB" results --db $DB --interface nvme-passthru --json /tmp/pt.json > /dev/null 2>&1
# One compact record per line; keys are sorted, so the top-level status comes right before "store".
count() { grep -o "$1" /tmp/pt.json | wc -l | tr -d ' '; }
n=$(count '"status":"ok","store"')
paths=$(grep -o '"path":"/dev/[^"]*"' /tmp/pt.json | sort -u | sed 's/"path":"//; s/"$//' | tr '\n' ' ')
polled=$(count '"observed":"polled"')
asked=$(count '"requested":"poll"')
[ "$n" = 108 ] && [ "$paths" = "$NG " ] && [ "$polled" = "$asked" ] && [ "$asked" = 72 ] \
  && result s5_passthru_runs PASS "$n runs on $paths, $polled of $asked polled runs observed polled" \
  || result s5_passthru_runs FAIL "$n ok runs (want 108) on '$paths' (want $NG), $polled of $asked polled runs observed polled (want 72)"

"$IOLAB" report --db $DB --suite s5 --out /tmp/s5rep -q > /dev/null 2>&1
t=$(ls /tmp/s5rep/tables/*table-iii*.csv 2>/dev/null | head -n 1)
if [ -n "$t" ]; then
  cat "$t"
  rows=$(grep -c '^"\{0,1\}nvme-passthru' "$t")
  unrun=$(grep -c 'not run' "$t")
  [ "$rows" = 3 ] && [ "$unrun" = 0 ] && result s5_table3 PASS "$(grep -c . "$t") lines, every row measured" \
    || result s5_table3 FAIL "$rows passthrough rows (want 3), $unrun cells not run"
else
  result s5_table3 FAIL "no Table III in the report: $(ls /tmp/s5rep/tables 2>&1 | head -n 3)"
fi

if grep -q iolab_s5_capture /proc/cmdline; then
  echo "CAPTURE-BEGIN s5/passthru-records.json.gz.b64"
  gzip -9 -c /tmp/pt.json | base64
  echo "CAPTURE-END s5/passthru-records.json.gz.b64"
fi
