# Helpers for the guest scripts of the iolab VM rig (busybox sh). Source with `. /vm/lib.sh`.
#
# Every check prints exactly one line `RESULT <name> PASS|FAIL|SKIP <details>`; the host
# (tests/vm/rig.sh) counts them. Environment from /init: IOLAB, VM_NULL_DEV/VM_NULL_CTRL
# (NVMe with a null backend), VM_FILE_DEV/VM_FILE_CTRL (NVMe backed by an image file),
# VM_POLL_QUEUES.

IOLAB=${IOLAB:-/bin/iolab}
KREL=$(uname -r)

section() { echo; echo "=== $*"; }

# result NAME PASS|FAIL|SKIP DETAILS...
result() { local _rn=$1 _rs=$2; shift 2; echo "RESULT $_rn $_rs $*"; }

# Flatten iolab's pretty-printed JSON into `path=value` lines, e.g.
# results.total.lat_ns.mean=123.4, environment.targets.0.scheduler=none (strings unquoted).
jflat() {
  awk '
    function p(   s, i) { s = ""; for (i = 1; i <= d; i++) s = s (i > 1 ? "." : "") k[i]; return s }
    {
      l = $0; sub(/^[ \t]+/, "", l); sub(/,$/, "", l)
      if (l == "") next
      if (l ~ /^"[^"]*": /) { key = substr(l, 2, index(l, "\":") - 2); val = substr(l, index(l, "\": ") + 3) }
      else if (l == "}" || l == "]") { d--; next }
      else if (d > 0 && isarr[d]) { key = idx[d]++; val = l }
      else if (d == 0 && l == "{") { next }
      else { key = "?"; val = l }
      if (val == "{" || val == "[") { d++; k[d] = key; isarr[d] = (val == "["); idx[d] = 0; next }
      if (val ~ /^".*"$/) val = substr(val, 2, length(val) - 2)
      pre = p(); print (pre == "" ? "" : pre ".") key "=" val
    }' "$@"
}

# j PATH: a value from the last run's JSON (empty if absent).
j() { awk -v k="$1" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }' "/tmp/$RUN_NAME.flat"; }

# irqs CTRL: interrupts taken so far by the I/O queues of NVMe controller CTRL (nvmeNq1, q2...;
# the admin queue q0 is left out), summed over CPUs.
irqs() {
  awk -v c="$1" '$NF ~ ("^" c "q[1-9][0-9]*$") {
      for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i }
    END { print s + 0 }' /proc/interrupts
}

# devios DISK: reads + writes the block device DISK has completed (its /sys/block/DISK/stat).
devios() { awk '{ print $1 + $5 }' "/sys/block/$1/stat"; }

# ng_block ngXnY: the block device (nvmeXnY) of the same namespace as the NVMe generic character
# device, from sysfs (both hang under the same controller or subsystem; hidden per-path disks
# nvmeXcZnY never match).
ng_block() {
  local _p _d
  _p=$(readlink -f "/sys/class/nvme-generic/$1" 2>/dev/null) || return 1
  [ -n "$_p" ] || return 1
  for _d in "${_p%/*}"/nvme*n"${1##*n}"; do
    case ${_d##*/} in *c*) continue;; esac
    [ -d "$_d/queue" ] && { echo "${_d##*/}"; return 0; }
  done
  return 1
}

# ng_of /dev/nvmeXnY: the generic character device (/dev/ngXnY) of the same namespace.
ng_of() {
  local _b=${1#/dev/} _p _g
  _p=$(readlink -f "/sys/block/$_b" 2>/dev/null) || return 1
  for _g in "${_p%/*}"/ng*n"${_b##*n}"; do
    [ -c "/dev/${_g##*/}" ] && { echo "/dev/${_g##*/}"; return 0; }
  done
  return 1
}

# run_iolab NAME CTRL ARGS...: `iolab run -q ARGS --json -`. Sets RC, IRQS (I/O-queue interrupts
# of CTRL during the run, empty without CTRL), DEVIOS (requests the target device completed
# during the run: the measured I/O plus anything else, such as the safety check's reads before a
# write and the --verify read-back after it), RUN_NAME; keeps /tmp/NAME.{json,err,flat}.
run_iolab() {
  local _c=$2 _i0=0 _a _dev="" _s0=0
  RUN_NAME=$1; shift 2
  for _a in "$@"; do case $_a in /dev/*) _dev=${_a#/dev/};; esac; done
  # An NVMe generic character device: count the requests of its namespace's block device.
  case $_dev in ng*) _dev=$(ng_block "$_dev");; esac
  [ -n "$_dev" ] && [ ! -e "/sys/block/$_dev/stat" ] && _dev=""
  echo "+ iolab run -q $* --json -" > "/tmp/$RUN_NAME.cmd"
  [ -n "$_dev" ] && _s0=$(devios "$_dev")
  [ -n "$_c" ] && _i0=$(irqs "$_c")
  "$IOLAB" run -q "$@" --json - > "/tmp/$RUN_NAME.json" 2> "/tmp/$RUN_NAME.err"
  RC=$?
  if [ -n "$_c" ]; then IRQS=$(( $(irqs "$_c") - _i0 )); else IRQS=""; fi
  if [ -n "$_dev" ]; then DEVIOS=$(( $(devios "$_dev") - _s0 )); else DEVIOS=""; fi
  jflat "/tmp/$RUN_NAME.json" > "/tmp/$RUN_NAME.flat"
  PROBLEMS=""; KNOWN=""; KNOWN_KIND=""
}

problem() { PROBLEMS="${PROBLEMS:+$PROBLEMS; }$*"; }

# Float comparison: fcmp A OP B (OP: lt le gt ge eq).
fcmp() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
  r = (op == "lt") ? a < b : (op == "le") ? a <= b : (op == "gt") ? a > b : (op == "ge") ? a >= b : a == b
  exit !r }'; }

# check_ok EXPECTED_PATH: the standard checks on a run that should have succeeded.
#  - exit 0 and status ok, no I/O errors, I/Os done (exactly the --ios budget when one was set)
#  - completion_path.expected is EXPECTED_PATH (polled | interrupt; empty: not checked)
#  - mean latency below 1 s (SQPOLL included: fio reports tens of seconds under TCG)
#  - with a controller: no queue interrupts when expected is polled, some when interrupt
check_ok() {
  local _want=$1 _ios _path _mean _obs _mine _qi _rb _rbk _dd _tol
  if [ "$RC" != 0 ]; then problem "exit $RC: $(head -c 400 "/tmp/$RUN_NAME.err" | tr '\n' ' ')"; return; fi
  [ "$(j status)" = ok ] || problem "status $(j status): $(j error)"
  _ios=$(j results.total.ios)
  [ -n "$_ios" ] && [ "$_ios" -gt 0 ] || problem "no I/Os completed (results.total.ios=$_ios)"
  [ "$(j results.total.errors)" = 0 ] || problem "errors=$(j results.total.errors)"
  if [ "$(j spec.budget.kind)" = ios ] && [ "$_ios" != "$(j spec.budget.value)" ]; then
    problem "asked for $(j spec.budget.value) I/Os, results.total.ios=$_ios"
  fi
  _path=$(j completion_path.expected)
  if [ -n "$_want" ] && [ "$_path" != "$_want" ]; then
    problem "completion_path.expected=$_path, want $_want (reason: $(j completion_path.reason))"
  fi
  _mean=$(j results.total.lat_ns.mean)
  if [ -z "$_mean" ] || [ "$_mean" = null ]; then problem "no mean latency"
  elif ! fcmp "$_mean" lt 1000000000; then problem "mean latency ${_mean} ns is not under 1 s"; fi
  # Requests outside the measured I/O (the safety check's reads before a write to a block device,
  # the --verify read-back after it) complete by interrupt: polled measured I/O allows at most one
  # interrupt per such request.
  _rb=0
  [ -n "$DEVIOS" ] && [ -n "$_ios" ] && [ "$DEVIOS" -gt "$_ios" ] && _rb=$((DEVIOS - _ios))
  if [ -n "$IRQS" ] && [ "$IRQS" -lt 0 ]; then
    # The controller's interrupt lines were set up again during the run: the NVMe driver reset it
    # (after a command timed out). Nothing below can be judged from the counts.
    problem "the NVMe queue interrupt counts went down during the run ($IRQS): the controller was reset (a command timed out?)"
    IRQS=""
  fi
  if [ -n "$IRQS" ]; then
    case $_path in
      polled) [ "$IRQS" -le "$_rb" ] || problem "expected polled completion but the NVMe queues took $IRQS interrupts ($_rb device requests besides the measured I/O)";;
      interrupt) [ "$IRQS" -gt 0 ] || problem "expected interrupt completion but the NVMe queues took no interrupt";;
    esac
  fi
  # The device's own request count (cost.devices.0.device_ios) against iolab's measured I/Os.
  _rbk=$(j results.verify.written_blocks_read_back)
  if [ -n "$_rbk" ] && [ "$_rbk" != null ] && [ "$_rbk" -gt 0 ] && [ "$(j cost.devices.0.difference)" = "$_rbk" ]; then
    KNOWN_KIND=readback_metered
    KNOWN="iolab bug: the --verify read-back ($_rbk preads after the run) is counted inside the metered window: cost.devices.0.device_ios=$(j cost.devices.0.device_ios) for iolab_ios=$(j cost.devices.0.iolab_ios), and its interrupts and CPU time land in cost (see docs/vm-rig.md)"
  fi
  # A read-only run is all the device does here: the bytes it transferred (requests may be split,
  # so bytes, not requests) must be iolab's, give or take the requests in flight at the window's
  # edges (qd x threads blocks).
  _dd=$(j cost.devices.0.stat.read_sectors)
  if [ "$(j results.write.ios)" = 0 ] && [ -n "$_dd" ] && [ "$_dd" != null ]; then
    _dd=$(( _dd * 512 + $(j cost.devices.0.stat.write_sectors) * 512 - $(j results.total.bytes) ))
    # A timed window's edges are sampled by another thread than the workers': allow 1 % there.
    _tol=$(( $(j spec.qd) * $(j spec.threads) * $(j spec.bs) ))
    [ "$(j spec.budget.kind)" != ios ] && [ $(( $(j results.total.bytes) / 100 )) -gt $_tol ] && _tol=$(( $(j results.total.bytes) / 100 ))
    [ "${_dd#-}" -le $_tol ] \
      || problem "the device moved $_dd bytes more than iolab's $(j results.total.bytes) on a read-only run (cost.devices.0.stat)"
  fi
  # iolab's own observation (completion_path.observed, from the queue interrupts it counts over
  # the measured window) must agree with the interrupts counted here around the whole process.
  _obs=$(j completion_path.observed)
  if [ -n "$_obs" ] && [ "$_obs" != null ]; then
    if [ -n "$IRQS" ]; then
      # No interrupt: polled. More than the other requests can explain: interrupt. Otherwise the
      # count cannot tell, and the expected path (bounded above) stands.
      if [ "$IRQS" = 0 ]; then _mine=polled; elif [ "$IRQS" -gt "$_rb" ]; then _mine=interrupt; else _mine=$_path; fi
      if [ "$_obs" = "$_mine" ]; then :
      elif [ "$_mine" = polled ] && [ "$(j results.verify.written_blocks_read_back)" = "$(j cost.devices.0.difference)" ]; then
        KNOWN_KIND=readback_observed
        KNOWN="${KNOWN:+$KNOWN; }so completion_path.observed=$_obs fell_back=$(j completion_path.fell_back) ($(j completion_path.evidence)) for a run whose measured I/O was polled"
      else
        problem "completion_path.observed=$_obs ($(j completion_path.evidence)) but the NVMe queues took $IRQS interrupts"
      fi
      _qi=$(j cost.devices.0.queue_interrupts)
      if [ -n "$_qi" ] && [ "$_qi" != null ] && [ "$_qi" -gt "$IRQS" ]; then
        problem "cost.devices.0.queue_interrupts=$_qi is more than the $IRQS taken during the whole run"
      fi
    elif [ "$_obs" != unknown ]; then
      problem "completion_path.observed=$_obs on a device without interrupt lines (want unknown)"
    fi
  fi
}

# report NAME [EXTRA]: PASS with the run's key figures, or FAIL with every problem found.
report() {
  local _mean _p99 _fig _kc
  _mean=$(j results.total.lat_ns.mean); _p99=$(j results.total.lat_ns.p99)
  _fig="ios=$(j results.total.ios) iops=$(j results.total.iops | cut -d. -f1) lat_mean_us=$(awk -v m="${_mean:-0}" 'BEGIN {printf "%.1f", m / 1000}') p99_us=$(awk -v m="${_p99:-0}" 'BEGIN {printf "%.1f", m / 1000}') path=$(j completion_path.expected)$(o=$(j completion_path.observed); [ -n "$o" ] && echo " observed=$o")${IRQS:+ irqs=$IRQS}${2:+ $2}"
  if [ -z "$PROBLEMS" ]; then
    result "$1" PASS "$_fig"
  else
    result "$1" FAIL "$PROBLEMS"
    sed 's/^/    | /' "/tmp/$RUN_NAME.cmd"
    head -c 1500 "/tmp/$RUN_NAME.err" | sed 's/^/    | stderr: /'
  fi
  # A known iolab bug is shown, not failed: once per kind as a SKIP line, then counted
  # (known_bugs prints the counts). The lines go away once it is fixed.
  if [ -n "$KNOWN" ]; then
    eval "_kc=\${KNOWN_COUNT_$KNOWN_KIND:-0}"
    [ "$_kc" = 0 ] && result "$1_known_bug" SKIP "$KNOWN"
    eval "KNOWN_COUNT_$KNOWN_KIND=$((_kc + 1))"
    KNOWN_KINDS="$KNOWN_KINDS $KNOWN_KIND"
  fi
}

# known_bugs: how many runs showed each known iolab bug (not a RESULT line).
known_bugs() {
  local _k _n
  for _k in $(echo $KNOWN_KINDS | tr ' ' '\n' | sort -u); do
    eval "_n=\$KNOWN_COUNT_$_k"; echo "known iolab bug $_k: seen in $_n runs (first one reported as SKIP)"
  done
}

# t NAME CTRL EXPECTED_PATH ARGS...: run, check, report.
t() { local _tn=$1 _tc=$2 _tw=$3; shift 3; run_iolab "$_tn" "$_tc" "$@"; check_ok "$_tw"; report "$_tn"; }

# refused NAME PATTERN ARGS...: iolab must refuse (exit 2, one line on stderr matching PATTERN).
refused() {
  local _n=$1 _pat=$2 _msg
  shift 2
  run_iolab "$_n" "" "$@"
  _msg=$(head -c 600 "/tmp/$_n.err" | tr '\n' ' ')
  if [ "$RC" = 2 ] && grep -q -- "$_pat" "/tmp/$_n.err"; then
    result "$_n" PASS "refused: $_msg"
  else
    result "$_n" FAIL "want exit 2 and a message matching '$_pat', got exit $RC: $_msg"
  fi
}

# strict_fails NAME CTRL ARGS...: a --strict run whose polling the kernel did not honour must
# fail (exit 1, status failed, the error naming --strict and the observed path).
strict_fails() {
  local _n=$1 _c=$2 _e
  shift 2
  run_iolab "$_n" "$_c" "$@" --strict
  _e=$(j error)
  if [ "$RC" = 1 ] && [ "$(j status)" = failed ] && echo "$_e" | grep -q -- '--strict'; then
    result "$_n" PASS "exit 1: $_e"
  else
    result "$_n" FAIL "want exit 1 and status failed by --strict, got exit $RC status $(j status) error '$_e': $(head -c 300 "/tmp/$_n.err" | tr '\n' ' ')"
  fi
}

# Block device helpers (DEV is /dev/NAME).
qattr() { cat "/sys/block/${1#/dev/}/queue/$2" 2>/dev/null; }
sched_of() { sed -n 's/.*\[\([^]]*\)\].*/\1/p' "/sys/block/${1#/dev/}/queue/scheduler"; }
sched_set() { echo "$2" > "/sys/block/${1#/dev/}/queue/scheduler" 2>/dev/null && [ "$(sched_of "$1")" = "$2" ]; }

# kernel_at_least MAJOR MINOR
kernel_at_least() {
  local _kmaj _kr _kmin
  _kmaj=${KREL%%.*}; _kr=${KREL#*.}; _kmin=${_kr%%[!0-9]*}
  [ "$_kmaj" -gt "$1" ] || { [ "$_kmaj" -eq "$1" ] && [ "$_kmin" -ge "$2" ]; }
}

# load_null_blk ARGS...: (re)load null_blk with these parameters and wait for /dev/nullb0.
load_null_blk() {
  local _w=0
  rmmod null_blk 2>/dev/null
  modprobe null_blk "$@" || return 1
  while [ ! -b /dev/nullb0 ] && [ $_w -lt 50 ]; do sleep 0.1; _w=$((_w + 1)); done
  [ -b /dev/nullb0 ]
}

# The controller the user-space NVMe driver takes (vfio.sh, vfio-studies.sh): BDF is its PCI
# address. driver: the PCI driver bound to it now (nvme, vfio-pci or none).
driver() { basename "$(readlink "/sys/bus/pci/devices/$BDF/driver" 2>/dev/null)" 2>/dev/null; }
# The namespace's block device now: its name may move when the kernel binds the controller again.
ctrl() { basename "$(ls -d /sys/bus/pci/devices/$BDF/nvme/nvme* 2>/dev/null | head -1)"; }
ns_dev() { for n in /sys/bus/pci/devices/$BDF/nvme/nvme*/nvme*n1; do [ -d "$n" ] && echo "/dev/${n##*/}"; done | head -1; }
wait_ns() {
  local _i=0 _d
  while [ $_i -lt 100 ]; do
    _d=$(ns_dev); [ -n "$_d" ] && [ -b "$_d" ] && { DEV=$_d; return 0; }
    sleep 0.1; _i=$((_i + 1))
  done
  DEV=""; return 1
}
# bound_back NAME: the controller is the kernel's again, override cleared, namespace back.
bound_back() {
  local _o
  _o=$(cat "/sys/bus/pci/devices/$BDF/driver_override")
  if [ "$(driver)" = nvme ] && { [ -z "$_o" ] || [ "$_o" = "(null)" ]; } && wait_ns; then
    result "$1" PASS "$BDF bound to nvme, driver_override cleared, namespace $DEV back"
  else
    result "$1" FAIL "$BDF bound to '$(driver)', driver_override '$_o', namespace '$(ns_dev)'"
  fi
}
