#!/bin/sh
# --profile layers on NVMe (docs/profiling.md): io_uring at QD1 completed by interrupt shows the
# device driver layer with the nvme module's functions and no polling; io_uring IOPOLL shows the
# polling (nvme_poll and the block layer's and io_uring's polling loops) and no nvme interrupt.
# Booted with `--append iolab_fixtures_capture` it also records the fixtures of
# `meters::profile::tests` and `meters::stages::tests` (IOLAB_PROFILE_DUMP, IOLAB_STAGES_DUMP)
# and prints them (tar, gzip, base64) between CAPTURE lines: tests/vm/capture.sh unpacks them.
. /vm/lib.sh
IOS=${VM_IOS:-600}
DEV=${VM_NULL_DEV:-}
CTRL=${VM_NULL_CTRL:-}

# A list of the last run's values at PATH.N.FIELD (e.g. cost.profile.run.functions, function).
list() { grep -E "^$1\.[0-9]+\.$2=" "/tmp/$RUN_NAME.flat" | cut -d= -f2- | tr '\n' ','; }
# The run's own CPU by module, as module/layer (a module's fields come in that order).
modules() {
  awk -F= '/^cost\.profile\.run\.modules\.[0-9]+\.module=/ { m = $2 }
    /^cost\.profile\.run\.modules\.[0-9]+\.layer=/ { printf "%s/%s,", m, $2 }' "/tmp/$RUN_NAME.flat"
}

POLLING='nvme_poll|blk_mq_poll|bio_poll|iocb_bio_iopoll|io_do_iopoll|io_iopoll'

# layers_check interrupt|polled
layers_check() {
  local _f _m
  _f=$(list cost.profile.run.functions function); _m=$(modules)
  [ -n "$(j cost.profile.unavailable)" ] && problem "no profile: $(j cost.profile.unavailable)"
  case ",$_m" in *,nvme/"device driver",*|*,nvme_core/"device driver",*) ;; *) problem "no nvme module in the device driver layer: $_m";; esac
  # The nvme interrupt handler runs with interrupts off, where the cpu-clock timer cannot sample
  # (docs/profiling.md): an interrupt-driven run shows no nvme_irq, and no polling either.
  if echo ",$_f" | grep -qE ",($POLLING)"; then
    [ "$1" = interrupt ] && problem "a polling function in an interrupt-driven run: $_f"
  else
    [ "$1" = polled ] && problem "no polling function ($POLLING) among the run's own: $_f"
  fi
  case ",$_f" in *,nvme_irq*) [ "$1" = polled ] && problem "nvme_irq ran while polling: $_f";; esac
}

section "profile layers on NVMe $DEV (controller $CTRL), kernel $KREL"
if [ -z "$DEV" ]; then
  result layers_nvme_present FAIL "no NVMe namespace with the null backend (serial vmrig-null)"
  exit 0
fi

run_iolab layers_uring_irq "$CTRL" -i io_uring --profile layers --ios $IOS "$DEV"
check_ok interrupt
layers_check interrupt
report layers_uring_irq "samples=$(j cost.profile.samples) modules=$(modules) functions=$(list cost.profile.run.functions function)"

if [ "$(qattr $DEV io_poll)" = 1 ]; then
  run_iolab layers_uring_poll "$CTRL" -i io_uring --complete poll --profile layers --ios $IOS "$DEV"
  check_ok polled
  layers_check polled
  report layers_uring_poll "samples=$(j cost.profile.samples) modules=$(modules) functions=$(list cost.profile.run.functions function)"
else
  result layers_uring_poll SKIP "$DEV cannot poll (queue/io_poll=0): boot with --poll-queues 1"
fi

grep -q iolab_fixtures_capture /proc/cmdline || exit 0
# The fixtures: ~100 requests each, so every directory stays well under 1 MB.
FX=/tmp/fixtures
K=$(echo "$KREL" | cut -d. -f1-2)
NG=$(ng_of "$DEV")
rm -rf $FX
IOLAB_STAGES_DUMP=$FX/tracefs/$K-nvme-uring-irq "$IOLAB" run -q -i io_uring --qd 4 --profile stages --ios 100 "$DEV" > /dev/null
IOLAB_STAGES_DUMP=$FX/tracefs/$K-nvme-uring-poll "$IOLAB" run -q -i io_uring --qd 4 --complete poll --profile stages --ios 100 "$DEV" > /dev/null
IOLAB_STAGES_DUMP=$FX/tracefs/$K-nvme-passthru "$IOLAB" run -q -i nvme-passthru --qd 4 --profile stages --ios 100 "$NG" > /dev/null
IOLAB_PROFILE_DUMP=$FX/profile/$K-nvme-uring-irq "$IOLAB" run -q -i io_uring --profile layers --ios 300 "$DEV" > /dev/null
IOLAB_PROFILE_DUMP=$FX/profile/$K-nvme-uring-poll "$IOLAB" run -q -i io_uring --complete poll --profile layers --ios 300 "$DEV" > /dev/null
(cd $FX && tar cf - . | gzip -9 > /tmp/fixtures.tar.gz)
result fixtures_recorded PASS "$(du -s $FX/*/* | tr '\n\t' ', ')"
echo "CAPTURE-BEGIN fixtures.tar.gz.b64 sha256=$(sha256sum < /tmp/fixtures.tar.gz | cut -d' ' -f1)"
base64 < /tmp/fixtures.tar.gz
echo "CAPTURE-END fixtures.tar.gz.b64"
