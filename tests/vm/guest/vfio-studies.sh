#!/bin/sh
# The studies' user-space driver rows through the driver (tests/vm/rig.sh --iommu, after
# vfio.sh): S1's latency table (S1.1), S4.6 (kernel against the user-space driver) and S5's fast
# path (S5.2) on the file-backed emulated controller, into one database, the vfio-nvme rows run by
# iolab's own driver (the controller taken from the kernel and given back for each run) and the
# kernel rows on the same namespace through the kernel; then `iolab report` and its tables.
# S4.6 runs as the suite has it (`iolab suite run S4 --quick --part S4.6`, 12 runs). S1.1's
# and S5.2's quick matrices (56 and 252 runs here: minutes under TCG) run as sweeps of the part's
# name restricted to the driver and one kernel row it is set against on the same namespace
# (io_uring by interrupt for S1.1, S5.2's libaio baseline at 4 KiB), with the part's set-up and
# replicates (S1.1's runs shortened to 1 s): 8 and 24 runs. The report files a sweep under its
# part by name; the suite's own dry runs check first that each part's quick plan on this
# namespace carries the driver's runs.
# Checked: every run of the three parts succeeded, the driver's polled; S1's Table 2 has the
# user-space row as its baseline and every kernel row's "% slower than the user-space driver";
# S4.6's reduction table (Figs 17-18) has the user-space driver against io_uring by interrupt;
# S5's Table III has the user-space row measured, with its reduction against libaio, and Figs
# 4-5 draw it; the controller is bound to nvme again at the end.
# Booted with `--append iolab_studies_capture` it also prints S4.6's records (gzip, base64)
# between CAPTURE lines: tests/fixtures/s4/user-space-records.json.gz is made from them.
. /vm/lib.sh
up() { cut -d' ' -f1 /proc/uptime; }

grep -q intel_iommu=on /proc/cmdline \
  || { result studies_vfio SKIP "no emulated IOMMU in this boot (tests/vm/rig.sh --iommu)"; exit 0; }
BDF=""
for c in /sys/class/nvme/nvme*; do
  [ "$(tr -d ' ' < "$c/serial" 2>/dev/null)" = vmrig-file ] && BDF=$(basename "$(readlink -f "$c/device")")
done
[ -n "$BDF" ] || { result studies_vfio SKIP "no file-backed NVMe controller (--backend file|both)"; exit 0; }
modprobe vfio-pci && modprobe vfio_iommu_type1 || { result studies_vfio_modules FAIL "modprobe vfio-pci vfio_iommu_type1 failed"; exit 0; }
wait_ns || { result studies_vfio_namespace FAIL "no namespace on $BDF"; exit 0; }
DB=/tmp/studies.db
SIZE=8m
echo "studies: controller $BDF, namespace $DEV, database $DB"

section "the parts' quick plans carry the user-space driver"
# plan_has STUDY PART WANT: the suite's dry run of the part on this namespace lists WANT runs of
# vfio-nvme.
plan_has() {
  "$IOLAB" suite run "$1" --quick --part "$2" "$DEV" --size $SIZE --destructive "$DEV" --dry-run --db $DB > "/tmp/dry-$2.out" 2>&1
  _n=$(grep -c '^  run .*interface=vfio-nvme,' "/tmp/dry-$2.out")
  _all=$(grep -c '^  run ' "/tmp/dry-$2.out")
  if [ "$_n" = "$3" ]; then result "studies_plan_${2%%-*}" PASS "$_n of its $_all quick runs are vfio-nvme"
  else result "studies_plan_${2%%-*}" FAIL "$_n of $_all quick runs are vfio-nvme, want $3: $(grep -m2 -E 'plan|error' "/tmp/dry-$2.out" | tr '\n' ' ')"; fi
}
plan_has S1 S1.1 4
plan_has S4 S4.6 4
plan_has S5 S5.2 36

# sweep_part NAME: run /tmp/NAME.toml as a sweep into the database, the namespace back after it.
sweep_part() {
  "$IOLAB" sweep "/tmp/$1.toml" --db $DB -q > "/tmp/$1.out" 2>&1
  echo "$1: exit $? after the sweep: $(tail -n 1 "/tmp/$1.out")"
}

section "S1.1: latency table, io_uring by interrupt against the user-space driver (uptime $(up))"
cat > /tmp/S1.1-latency.toml <<EOF
# S1.1-latency's quick plan (2 replicates, scheduler none) restricted to io_uring by interrupt
# and the driver.
name = "S1.1-latency"
replicates = 2
ramp = "0.5s"
runtime = "1s"
seed = 1
size = "$SIZE"
destructive = ["$DEV"]
targets = ["$DEV"]
[matrix]
interface = ["io_uring", "vfio-nvme"]
complete = ["irq", "poll"]
rw = ["randread", "randwrite"]
bs = ["4k"]
qd = [1]
[[rule]]
when = { interface = "io_uring", complete = "poll" }
action = "drop"
reason = "the rig's S1.1 sets one kernel row against the driver"
[options]
setup = ["scheduler=none", "governor=performance"]
EOF
sweep_part S1.1-latency
wait_ns

section "S4.6: kernel against the user-space driver (the suite's quick part) (uptime $(up))"
"$IOLAB" suite run S4 --quick --part S4.6 "$DEV" --size $SIZE --destructive "$DEV" --db $DB -q > /tmp/S4.6.out 2>&1
echo "S4.6: exit $?: $(tail -n 1 /tmp/S4.6.out)"
wait_ns

section "S5.2: the fast path, the libaio baseline against the user-space driver (uptime $(up))"
cat > /tmp/S5.2-fastpath.toml <<EOF
# S5.2-fastpath's quick plan (1 MB per run, 3 iterations) restricted to libaio and the driver,
# at Table III's 4 KiB.
name = "S5.2-fastpath"
replicates = 3
ramp = "0s"
bytes = "1m"
seed = 1
size = "$SIZE"
destructive = ["$DEV"]
targets = ["$DEV"]
[matrix]
interface = ["libaio", "vfio-nvme"]
complete = ["irq", "poll"]
rw = ["read", "randread", "write", "randwrite"]
bs = ["4k"]
qd = [1]
EOF
sweep_part S5.2-fastpath
wait_ns

section "every run stored, the driver's polled (uptime $(up))"
"$IOLAB" results --db $DB --sweeps > /tmp/sweeps.out 2>&1
cat /tmp/sweeps.out
# runs_ok PART VFIO_RUNS ALL_RUNS [SKIPPED]: the part's newest sweep did every run, the driver's
# polled (SKIPPED: what the part declares it cannot run, stored as skipped with the reason).
runs_ok() {
  _id=$(awk -v n="$1" '$2 == n { i = $1 } END { print i }' /tmp/sweeps.out)
  _done=$(awk -v n="$1" '$2 == n { d = $4 " done, " $5 " skipped, " $6 " failed" } END { print d }' /tmp/sweeps.out)
  if [ -z "$_id" ]; then result "studies_runs_${1%%-*}" FAIL "no sweep $1 in $DB: $(head -c 300 "/tmp/${1}.out" 2>/dev/null | tr '\n' ' ')"; return; fi
  "$IOLAB" results --db $DB --sweep "$_id" --interface vfio-nvme --status ok > "/tmp/vfio-$1.out" 2>&1
  _ok=$(grep -c ' ok .*vfio-nvme' "/tmp/vfio-$1.out")
  _polled=$(grep ' ok .*vfio-nvme' "/tmp/vfio-$1.out" | grep -c 'polled *$')
  if [ "$_ok" = "$2" ] && [ "$_polled" = "$2" ] && [ "$_done" = "$3 done, ${4:-0} skipped, 0 failed" ]; then
    result "studies_runs_${1%%-*}" PASS "sweep $_id: $_done; $_ok vfio-nvme runs ok, $_polled observed polled"
  else
    result "studies_runs_${1%%-*}" FAIL "sweep $_id: $_done (want $3 done, ${4:-0} skipped); $_ok vfio-nvme runs ok (want $2), $_polled observed polled"
    "$IOLAB" results --db $DB --sweep "$_id" --status failed 2>&1 | head -n 4 | cut -c1-400 | sed 's/^/    | /'
    "$IOLAB" results --db $DB --sweep "$_id" --status skipped 2>&1 | head -n 4 | cut -c1-400 | sed 's/^/    | /'
  fi
}
runs_ok S1.1-latency 4 8
runs_ok S4.6-user-space 4 12 1   # and "loads and stores per I/O", which iolab cannot measure
runs_ok S5.2-fastpath 12 24

section "the report (uptime $(up))"
"$IOLAB" report --db $DB --out /tmp/studies-report -q > /tmp/report.out 2>&1 \
  || result studies_report FAIL "iolab report: $(head -c 400 /tmp/report.out | tr '\n' ' ')"
T=/tmp/studies-report/tables
table() { ls $T/*"$1"*.csv 2>/dev/null | head -n 1; }
USER='iolab user-space driver (SPDK class)'
# S1's Table 2: the user-space row is the baseline, every kernel row has its % slower.
t=$(table hotstorage-23-table-2)
if [ -n "$t" ]; then
  cat "$t"
  u=$(grep -c "^\"\{0,1\}$USER" "$t")
  base=$(grep "^\"\{0,1\}$USER" "$t" | grep -c ',baseline,')
  kernel=$(grep -v "^\"\{0,1\}$USER" "$t" | grep -c '^io_uring')
  slower=$(grep '^io_uring' "$t" | grep -c ',-\{0,1\}[0-9.]* %,')
  [ "$u" = 1 ] && [ "$base" = 1 ] && [ "$kernel" -ge 1 ] && [ "$slower" = "$kernel" ] \
    && result studies_s1_table2 PASS "the user-space row is the baseline; $slower kernel rows with their % slower than it" \
    || result studies_s1_table2 FAIL "$u user-space rows ($base the baseline), $slower of $kernel kernel rows with a % slower"
else
  result studies_s1_table2 FAIL "no S1 Table 2 in the report: $(ls $T 2>&1 | head -n 3 | tr '\n' ' ')"
fi
# S4.6's reduction table (Figs 17-18): the driver against io_uring by interrupt, each pattern and size.
cat $T/s4-6-*latency-and-cpu-per-i-o*.csv 2>/dev/null
t=$(ls $T/s4-6-*mean-latency-saved*.csv 2>/dev/null | head -n 1)
if [ -n "$t" ]; then
  cat "$t"
  n=$(grep "$USER" "$t" | grep -c ',io_uring irq,.* %$')
  [ "$n" = 4 ] && result studies_s4_6_reduction PASS "$n user-space rows against io_uring irq" \
    || result studies_s4_6_reduction FAIL "$n user-space rows with a reduction against io_uring irq (want 4: randread and randwrite at 4 KiB and 128 KiB)"
else
  result studies_s4_6_reduction FAIL "no S4.6 reduction table in the report: $(ls $T 2>&1 | grep s4-6 | head -n 3 | tr '\n' ' ')"
fi
# S5's Table III and Figs 4-5: the user-space row measured, with its reduction against libaio.
t=$(table table-iii)
if [ -n "$t" ]; then
  cat "$t"
  row=$(grep "^\"\{0,1\}$USER" "$t")
  figs=$(grep -l "iolab user-space driver" /tmp/studies-report/figures/*fig-[45]-*.svg 2>/dev/null | wc -l)
  if [ -n "$row" ] && ! echo "$row" | grep -q 'not run' && echo "$row" | grep -q 'user-space driver (block layer and NVMe driver bypassed)' \
      && echo "$row" | grep -q '[0-9] %,' && [ "$figs" = 8 ]; then
    result studies_s5_fastpath PASS "Table III's user-space row measured with its reduction against libaio; drawn in $figs of Figs 4-5's panels"
  else
    result studies_s5_fastpath FAIL "user-space row '$(echo "$row" | cut -c1-200)'; drawn in $figs of the 8 Figs 4-5 panels"
  fi
else
  result studies_s5_fastpath FAIL "no Table III in the report: $(ls $T 2>&1 | head -n 3 | tr '\n' ' ')"
fi

bound_back studies_vfio_given_back
echo "studies: done at uptime $(up)"

if grep -q iolab_studies_capture /proc/cmdline; then
  id=$(awk '$2 == "S4.6-user-space" { i = $1 } END { print i }' /tmp/sweeps.out)
  "$IOLAB" results --db $DB --sweep "$id" --json /tmp/s4-6.json > /dev/null 2>&1
  echo "CAPTURE-BEGIN s4/user-space-records.json.gz.b64"
  gzip -9 -c /tmp/s4-6.json | base64
  echo "CAPTURE-END s4/user-space-records.json.gz.b64"
fi
