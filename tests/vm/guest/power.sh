#!/bin/sh
# The NVMe power knobs on QEMU's emulated controller: Identify Controller's power states read
# into the record, nvme_power_state set with Set Features, read back and restored, a state the
# controller does not have refused in one line (QEMU reports one state, NPSS 0), nvme_apst
# refused where APSTA is 0 (QEMU has no APST) or set and restored where the controller has it,
# and kill -9 of a run holding the power state undone by `iolab restore`.
. /vm/lib.sh
IOS=${VM_IOS:-200}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

section "NVMe power knobs: $DEV (controller $CTRL)"
if [ -z "$DEV" ]; then
  result power_states SKIP "no null-backed NVMe controller in this boot"
  exit 0
fi

# The power states, read back into the record.
run_iolab power_states "" --ios $IOS "$DEV"
mw=$(j environment.device_settings.0.nvme_power.power_states.0.max_power_w)
ps=$(j environment.device_settings.0.nvme_power.power_state)
ctrl=$(j environment.device_settings.0.nvme_power.controller)
if [ "$RC" = 0 ] && [ -n "$mw" ] && [ -n "$ps" ] && [ "$ctrl" = "$CTRL" ]; then
  result power_states PASS "$ctrl state 0: ${mw} W max, in state $ps, apst_supported=$(j environment.device_settings.0.nvme_power.apst_supported)"
else
  result power_states FAIL "exit $RC, controller '$ctrl', state 0 max power '$mw', power state '$ps': $(head -c 400 /tmp/power_states.err)"
fi
states=$(grep -c '^environment.device_settings.0.nvme_power.power_states.[0-9]*.state=' /tmp/power_states.flat)

# Set (to the deepest state it has; QEMU's only one is 0), read back, restored.
deep=$((states - 1))
[ "$deep" -ge 0 ] || deep=0
export IOLAB_JOURNAL=/tmp/power-journal.json
run_iolab power_state_set "" --ios $IOS --set nvme_power_state=$deep "$DEV"
changed=$(grep '^environment.settings_changed.[0-9]*=' /tmp/power_state_set.flat | grep nvme_power_state | head -1)
FIXED=""
if [ "$RC" = 2 ] && grep -q 'supported capabilities: not changeable' /tmp/power_state_set.err; then
  # QEMU's controller (as of 8.x) reports Power Management not changeable: refused up front.
  FIXED=1
  result power_state_set PASS "refused before anything changed: $(head -1 /tmp/power_state_set.err)"
elif [ "$RC" = 0 ] && [ -n "$changed" ] && [ "$(j environment.device_settings.0.nvme_power.power_state)" = "$deep" ] && [ ! -e "$IOLAB_JOURNAL" ]; then
  result power_state_set PASS "${changed#*=}; in force: $deep; journal gone after the run"
else
  result power_state_set FAIL "exit $RC, settings_changed '$changed', in force '$(j environment.device_settings.0.nvme_power.power_state)': $(head -c 400 /tmp/power_state_set.err)"
fi
after=$("$IOLAB" run -q --ios 10 --json - "$DEV" 2>/dev/null | jflat | awk -F= '/^environment.device_settings.0.nvme_power.power_state=/ { print $2 }')
if [ "$after" = "$ps" ]; then result power_state_restored PASS "back in state $after"
else result power_state_restored FAIL "state $after after the run, $ps before"; fi

# A state the controller does not have: one line, exit 2, nothing changed.
refused power_state_refused "has no power state $states" --ios $IOS --set nvme_power_state=$states "$DEV"
n=$(wc -l < /tmp/power_state_refused.err)
[ "$n" = 1 ] || result power_state_refused_one_line FAIL "$n lines on stderr"
refused power_state_bad "nvme_power_state must be" --ios $IOS --set nvme_power_state=-1 "$DEV"

# APST: refused without APSTA, else set off and restored.
if grep -q '^environment.device_settings.0.nvme_power.apst_supported=true' /tmp/power_states.flat; then
  run_iolab apst_off "" --ios $IOS --set nvme_apst=off "$DEV"
  if [ "$RC" = 0 ] && [ "$(j environment.device_settings.0.nvme_power.apst)" = off ]; then result apst_off PASS "APST off for the run"
  else result apst_off FAIL "exit $RC: $(head -c 400 /tmp/apst_off.err)"; fi
else
  refused apst_refused "does not support autonomous power state transitions" --ios $IOS --set nvme_apst=off "$DEV"
fi

# kill -9 of a run holding the power state, then `iolab restore`.
rm -f "$IOLAB_JOURNAL"
if [ -n "$FIXED" ]; then
  result power_kill9_restore SKIP "the controller does not let its power state change, so no run holds it"
  unset IOLAB_JOURNAL
  exit 0
fi
"$IOLAB" run -q --runtime 60s --set nvme_power_state=$deep "$DEV" > /dev/null 2>/tmp/power_kill.err &
pid=$!
i=0
while [ $i -lt 300 ] && ! grep -q nvme_power_state "$IOLAB_JOURNAL" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
sleep 0.5
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
if ! grep -q nvme_power_state "$IOLAB_JOURNAL" 2>/dev/null; then
  result power_kill9_restore FAIL "the run never journaled the power state: $(head -c 400 /tmp/power_kill.err)"
else
  out=$("$IOLAB" restore 2>&1); rc=$?
  if [ $rc = 0 ] && echo "$out" | grep -q "$CTRL nvme_power_state: $deep -> $ps (restored)" && [ ! -e "$IOLAB_JOURNAL" ]; then
    result power_kill9_restore PASS "$(echo "$out" | tr '\n' ' ')"
  else
    result power_kill9_restore FAIL "restore exit $rc: $(echo "$out" | tr '\n' ' '); journal: $(cat "$IOLAB_JOURNAL" 2>/dev/null | tr '\n' ' ' | head -c 300)"
  fi
fi
unset IOLAB_JOURNAL
