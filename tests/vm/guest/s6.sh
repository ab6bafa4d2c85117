#!/bin/sh
# S6 (IISWC'26's energy study) as a suite on the emulated NVMe namespace: `iolab suite run S6
# --quick` runs size-depth and the completion methods (polled runs observed polled: the boot has
# poll queues), skips what this guest lacks with the reason (no cpufreq in the guest; QEMU's
# controller has no APST and refuses power-state changes), and the report draws every part or
# says why it cannot (no energy source in the guest); a sweep with an idle baseline per run stores
# each run's own. Needs poll queues.
. /vm/lib.sh
DEV=${VM_NULL_DEV:-}
DB=/tmp/s6.db

section "S6: IISWC'26 energy study on ${DEV:-no NVMe}"
if [ -z "$DEV" ]; then
  result s6_suite SKIP "no NVMe namespace with the null backend"
  exit 0
fi
"$IOLAB" suite run S6 --quick "$DEV" --db $DB > /tmp/s6.out 2>&1
rc=$?
tail -n 4 /tmp/s6.out
stored=$(sed -n 's/^sweep #[0-9]*: \([0-9]*\) runs stored.*/\1/p' /tmp/s6.out | awk '{ s += $1 } END { print s + 0 }')
skipped=$(grep -c '^skipped ' /tmp/s6.out)
[ $rc = 0 ] && [ "$stored" -ge 4 ] && result s6_suite PASS "exit 0: $stored runs stored, $skipped skipped" \
  || { result s6_suite FAIL "exit $rc, $stored runs stored: $(tail -n 3 /tmp/s6.out | tr '\n' ' ')"; exit 0; }

# S6.2: every polled run that ran completed by polling (never a fallen-back run standing as polled).
"$IOLAB" results --db $DB --json /tmp/s6.json > /dev/null 2>&1
count() { grep -o "$1" /tmp/s6.json | wc -l | tr -d ' '; }
asked=$(count '"requested":"poll"')
polled=$(count '"observed":"polled"')
fell=$(count '"fell_back":true')
[ "$asked" -ge 1 ] && [ "$polled" -ge "$asked" ] && [ "$fell" = 0 ] \
  && result s6_polled_runs PASS "$polled of $asked polled runs observed polled, none fell back" \
  || result s6_polled_runs FAIL "$polled observed polled of $asked asked, $fell fell back"

# What the guest lacks is a skip with its reason, in the suite's output and in the report.
grep '^skipped .*cpu_freq_khz' /tmp/s6.out | grep -q 'no CPU frequency scaling' \
  && result s6_dvfs_skipped PASS "$(grep -c '^skipped .*cpu_freq_khz' /tmp/s6.out) runs: no cpufreq in the guest" \
  || result s6_dvfs_skipped FAIL "$(grep 'cpu_freq_khz' /tmp/s6.out | head -n 2)"
ps_skipped=$(grep -c '^skipped .*nvme_power_state=' /tmp/s6.out)
ps_said=$(grep -c '^skipped .*nvme_power_state=[0-9]*,nvme_apst=off:' /tmp/s6.out)
ps_ran=$(grep -c 'nvme_power_state=.*#1$' /tmp/s6.out)
[ "$ps_said" -ge 1 ] && result s6_power_states PASS "$ps_skipped of $ps_ran runs skipped: $(grep -m1 '^skipped .*nvme_power_state' /tmp/s6.out | sed 's/.*nvme_apst=off: //' | cut -c1-160)" \
  || result s6_power_states FAIL "no power-state run skipped with a reason on QEMU's controller: $(grep -m2 'nvme_power_state' /tmp/s6.out | tr '\n' ' ')"

"$IOLAB" report --db $DB --suite S6 --out /tmp/s6rep -q > /dev/null 2>&1
html=/tmp/s6rep/report.html
parts=0
for p in S6.1-size-depth S6.2-polling S6.3-dvfs S6.4-power-states; do grep -q "$p" $html 2>/dev/null && parts=$((parts + 1)); done
[ "$parts" = 4 ] && grep -q 'could not run on this machine' $html \
  && result s6_report PASS "4 parts, skipped runs listed with their reasons" \
  || result s6_report FAIL "$parts of 4 parts in the report"

# The idle baseline per run (S6.4's, whose power states QEMU refuses): a sweep over two schedulers
# of the namespace, each run measuring its own idle power after its scheduler is set, with a meter
# that prints constant watts; each record carries its own baseline.
cat > /tmp/idle.toml <<'PLAN'
name = "idle-per-run"
runtime = "1s"
[matrix]
interface = ["io_uring"]
scheduler = ["none", "mq-deadline"]
[energy]
idle = "per-run"
idle_baseline = "1s"
PLAN
"$IOLAB" sweep /tmp/idle.toml "$DEV" --db /tmp/idle.db --energy generic --energy-scope ssd \
  --energy-command 'while :; do echo "$(date +%s.%N) 5"; sleep 0.1; done' > /tmp/idle.out 2>&1
rc=$?
"$IOLAB" results --db /tmp/idle.db --json /tmp/idle.json > /dev/null 2>&1
own=$(grep -o '"idle_baseline_taken":"per_run"' /tmp/idle.json 2>/dev/null | wc -l | tr -d ' ')
[ $rc = 0 ] && [ "$own" = 2 ] && result s6_idle_per_run PASS "2 runs, each with its own idle baseline after its scheduler" \
  || result s6_idle_per_run FAIL "exit $rc, $own runs with their own baseline: $(tail -n 2 /tmp/idle.out | tr '\n' ' ')"
