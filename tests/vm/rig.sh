#!/usr/bin/env bash
# iolab VM rig: boot Debian's stock kernel under QEMU (TCG, no KVM needed) with emulated NVMe
# controllers, run iolab inside it through guest scripts, and report what they found.
#
#   tests/vm/rig.sh [options] GUEST_SCRIPT [GUEST_SCRIPT...]
#
# Exit: 0 every guest RESULT passed (at least one did, none failed); 1 a RESULT failed, the
# guest crashed or timed out; 2 bad usage; 77 the rig cannot run here (no QEMU, no kernel...).
# See docs/vm-rig.md.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RIG_VERSION=3   # bump when the base initramfs layout or /init changes

usage() {
  cat <<EOF
usage: $0 [options] GUEST_SCRIPT [GUEST_SCRIPT...]

Boots the Debian kernel with emulated NVMe and runs each guest script (busybox sh) in turn.
Guest scripts print lines 'RESULT <name> PASS|FAIL|SKIP <reason>' (helpers: tests/vm/guest/lib.sh).

options:
  --iolab PATH         iolab binary to put in the guest (default: \$IOLAB or target/release/iolab)
  --poll-queues N      NVMe poll queues (nvme.poll_queues, default 1; 0 = none)
  --backend B          null | file | both (default both): the emulated NVMe controllers.
                       null: reads return zeros, writes are dropped (serial vmrig-null, 1 GiB);
                       file: a raw sparse image file (serial vmrig-file, 256 MiB)
  --mem MB             guest memory (default 1024)
  --smp N              guest CPUs (default 2)
  --timeout SECONDS    whole-VM time limit (default 900)
  --cache DIR          where the kernel and built pieces are kept (default \$IOLAB_VM_CACHE,
                       else /var/cache/iolab-vm when writable, else target/vm)
  --kernel-version V   Debian kernel ABI, e.g. 6.1.0-56-amd64 (default \$IOLAB_VM_KVER, else a
                       cached one, else the one linux-image-amd64 depends on)
  --suite SUITE        take the kernel from Debian release SUITE instead of the host's sources,
                       e.g. bullseye (5.10), through a private apt configuration in the cache
                       (the host's sources are not touched); default \$IOLAB_VM_SUITE
  --no-install         never run apt-get (skip with 77 if something is missing)
  --append ARGS        extra kernel command line
  --quiet-boot         print the console once the guest has stopped, not live
  -h, --help           this text
EOF
}

skip() { echo "vm-rig: SKIP: $*"; exit 77; }
die() { echo "vm-rig: $*" >&2; exit 2; }

IOLAB_BIN=${IOLAB:-$REPO/target/release/iolab}
POLLQ=1
BACKEND=both
MEM=1024
SMP=2
TIMEOUT=900
CACHE=${IOLAB_VM_CACHE:-}
KVER=${IOLAB_VM_KVER:-}
SUITE=${IOLAB_VM_SUITE:-}
INSTALL=1
APPEND=""
LIVE=1
SCRIPTS=()
while [ $# -gt 0 ]; do
  case $1 in
    --iolab) IOLAB_BIN=$2; shift 2;;
    --poll-queues) POLLQ=$2; shift 2;;
    --backend) BACKEND=$2; shift 2;;
    --mem) MEM=$2; shift 2;;
    --smp) SMP=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    --cache) CACHE=$2; shift 2;;
    --kernel-version) KVER=$2; shift 2;;
    --suite) SUITE=$2; shift 2;;
    --no-install) INSTALL=0; shift;;
    --append) APPEND=$2; shift 2;;
    --quiet-boot) LIVE=0; shift;;
    -h|--help) usage; exit 0;;
    --) shift; SCRIPTS+=("$@"); break;;
    -*) usage >&2; die "unknown option $1";;
    *) SCRIPTS+=("$1"); shift;;
  esac
done
[ ${#SCRIPTS[@]} -gt 0 ] || { usage >&2; die "no guest script given"; }
for s in "${SCRIPTS[@]}"; do [ -f "$s" ] || die "guest script $s does not exist"; done
case $POLLQ in ''|*[!0-9]*) die "--poll-queues wants a number";; esac
case $BACKEND in null|file|both) ;; *) die "--backend is null, file or both";; esac
case $SUITE in *[!a-z0-9-]*) die "--suite wants a Debian release name such as bullseye";; esac
[ -x "$IOLAB_BIN" ] || die "iolab binary $IOLAB_BIN not found (cargo build --release, or --iolab PATH)"
IOLAB_BIN=$(readlink -f "$IOLAB_BIN")

[ "$(uname -m)" = x86_64 ] || skip "the rig boots an x86_64 Debian kernel; this machine is $(uname -m)"

# ---------------------------------------------------------------- host tools
APT_UPDATED=0
apt_install() {   # apt_install PKG...: install Debian packages, or say why not
  [ $INSTALL = 1 ] || return 1
  [ "$(id -u)" = 0 ] || return 1
  command -v apt-get >/dev/null || return 1
  export DEBIAN_FRONTEND=noninteractive
  if [ $APT_UPDATED = 0 ]; then apt-get update -qq >/dev/null 2>&1; APT_UPDATED=1; fi
  echo "vm-rig: installing $*"
  apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}
static_busybox() {   # print a statically linked busybox, if there is one
  local b
  for b in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null)"; do
    [ -n "$b" ] && [ -x "$b" ] || continue
    if ! ldd "$b" >/dev/null 2>&1; then echo "$b"; return 0; fi   # ldd fails on static binaries
  done
  return 1
}
command -v qemu-system-x86_64 >/dev/null || apt_install qemu-system-x86 \
  || skip "qemu-system-x86_64 is not installed and could not be installed (Debian package qemu-system-x86)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is still missing after installing qemu-system-x86"
BUSYBOX=$(static_busybox) || { apt_install busybox-static; BUSYBOX=$(static_busybox); } \
  || skip "no statically linked busybox (Debian package busybox-static)"
for t in ldd timeout flock; do command -v $t >/dev/null || skip "host tool $t is missing"; done

# ---------------------------------------------------------------- cache
if [ -z "$CACHE" ]; then
  if mkdir -p /var/cache/iolab-vm 2>/dev/null && [ -w /var/cache/iolab-vm ]; then CACHE=/var/cache/iolab-vm
  else CACHE=$REPO/target/vm; fi
fi
mkdir -p "$CACHE" || skip "cannot create the cache directory $CACHE"
CACHE=$(cd "$CACHE" && pwd)
exec 9>"$CACHE/.lock"
# One rig at a time prepares the cache and boots (two TCG guests on 2 cores starve each other).
flock -n 9 || { echo "vm-rig: waiting for another rig run to finish (lock $CACHE/.lock)"; flock 9; }

# ---------------------------------------------------------------- kernel
# Debian's kernel package, unpacked under the cache: never installed into the host's /boot.
kernel_ready() { [ -f "$CACHE/kernel/$1/vmlinuz" ] && [ -f "$CACHE/kernel/$1/modules/modules.dep" ]; }
# The suite a cached kernel was fetched from with --suite (empty: the host's own sources).
kernel_suite() { cat "$CACHE/kernel/$1/suite" 2>/dev/null; }
# --suite: another Debian release's packages through a private apt configuration (sources list,
# package lists and downloads under the cache), so the host's sources never change.
APT_OPTS=()
if [ -n "$SUITE" ]; then
  PA=$CACHE/apt/$SUITE
  APT_OPTS=(-o "Dir::Etc::sourcelist=$PA/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$PA/lists"
            -o "Dir::Cache=$PA/cache" -o "Dir::Etc::preferencesparts=$PA/preferences.d" -o Dir::State::status=/dev/null
            -o Debug::NoLocking=1)
  mkdir -p "$PA/lists/partial" "$PA/cache/archives/partial" "$PA/preferences.d"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE main" > "$PA/sources.list"
fi
suite_update() {   # fetch the private package lists (only with --suite)
  [ -n "$SUITE" ] && [ $INSTALL = 1 ] && command -v apt-get >/dev/null || return 1
  echo "vm-rig: fetching Debian $SUITE's package lists into $PA"
  apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1
}
if [ -z "$KVER" ]; then
  for d in $(ls -1d "$CACHE"/kernel/*/ 2>/dev/null | sort -V -r); do
    v=$(basename "$d"); if kernel_ready "$v" && [ "$(kernel_suite "$v")" = "$SUITE" ]; then KVER=$v; break; fi
  done
fi
if [ -z "$KVER" ]; then
  command -v apt-cache >/dev/null || skip "no cached kernel and no apt to fetch one (set IOLAB_VM_KVER and --cache)"
  pick() { apt-cache ${APT_OPTS[@]+"${APT_OPTS[@]}"} depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\(.*-amd64\)$/\1/p' | head -1; }
  KVER=$(pick)
  if [ -z "$KVER" ] && [ -n "$SUITE" ]; then suite_update; KVER=$(pick)
  elif [ -z "$KVER" ] && [ "$(id -u)" = 0 ] && [ $INSTALL = 1 ]; then apt-get update -qq >/dev/null 2>&1; APT_UPDATED=1; KVER=$(pick); fi
  [ -n "$KVER" ] || skip "apt offers no linux-image-amd64 kernel${SUITE:+ in Debian $SUITE} (is this Debian? run apt-get update)"
fi
KDIR=$CACHE/kernel/$KVER
if ! kernel_ready "$KVER"; then
  [ $INSTALL = 1 ] || skip "kernel $KVER is not in $CACHE and --no-install was given"
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "no apt-get/dpkg-deb to fetch kernel $KVER"
  echo "vm-rig: fetching Debian kernel package linux-image-$KVER into $KDIR"
  rm -rf "$KDIR"; mkdir -p "$KDIR/dl"
  fetch() { (cd "$KDIR/dl" && apt-get ${APT_OPTS[@]+"${APT_OPTS[@]}"} download "linux-image-$KVER" >/dev/null 2>&1); }
  if [ -n "$SUITE" ]; then fetch || { suite_update && fetch; }
  else fetch || { [ "$(id -u)" = 0 ] && apt-get update -qq >/dev/null 2>&1 && fetch; }; fi \
    || skip "apt-get download linux-image-$KVER failed"
  mkdir -p "$KDIR/x"
  dpkg-deb -x "$KDIR"/dl/*.deb "$KDIR/x" || skip "cannot unpack linux-image-$KVER"
  cp "$KDIR/x/boot/vmlinuz-$KVER" "$KDIR/vmlinuz" || skip "linux-image-$KVER holds no /boot/vmlinuz-$KVER"
  mv "$KDIR/x/lib/modules/$KVER" "$KDIR/modules"
  # The package's postinst would run depmod; do it here, in the cache.
  mkdir -p "$KDIR/depmod/lib/modules"; ln -s "$KDIR/modules" "$KDIR/depmod/lib/modules/$KVER"
  "$BUSYBOX" depmod -b "$KDIR/depmod" "$KVER" || skip "depmod over the kernel's modules failed"
  rm -rf "$KDIR/x" "$KDIR/dl" "$KDIR/depmod"
  [ -z "$SUITE" ] || echo "$SUITE" > "$KDIR/suite"
fi
kernel_ready "$KVER" || skip "kernel $KVER in $KDIR is incomplete"
echo "vm-rig: kernel $KVER (Debian ${SUITE:+$SUITE }package linux-image-$KVER, cached in $KDIR)"

# ---------------------------------------------------------------- base initramfs (cached)
# busybox, the block modules and /init. The per-run part (iolab, its libraries, the guest
# scripts) is a second cpio archive appended to it: the kernel unpacks both.
WANT_MODULES="nvme kyber-iosched bfq null_blk crct10dif_generic crct10dif-pclmul crc64_rocksoft_generic"
BASE_KEY=$( (echo "$RIG_VERSION $KVER $WANT_MODULES"; cat "$HERE/init.sh"; sha256sum "$BUSYBOX") | sha256sum | cut -c1-16)
BASE=$CACHE/base-$KVER-$BASE_KEY.cpio
if [ ! -f "$BASE" ]; then
  echo "vm-rig: building the base initramfs"
  R=$(mktemp -d "$CACHE/base-root.XXXXXX")
  mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,etc,mnt,vm,lib/modules/$KVER}
  cp "$BUSYBOX" "$R/bin/busybox"
  for a in $("$R/bin/busybox" --list); do [ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"; done
  for a in modprobe insmod rmmod depmod poweroff; do ln -sf ../bin/busybox "$R/sbin/$a"; done
  # The wanted modules and everything they depend on, by modules.dep.
  DEP=$KDIR/modules/modules.dep
  files=""
  for m in $WANT_MODULES; do
    mm=$(echo "$m" | sed 's/[-_]/[-_]/g')
    line=$(grep -E "(^|/)$mm\.ko(\.[a-z]+)?:" "$DEP" | head -1)
    [ -n "$line" ] || { echo "vm-rig: note: kernel $KVER has no module $m (built in or absent)"; continue; }
    files="$files $(echo "$line" | tr -d ':')"
  done
  for f in $(echo $files | tr ' ' '\n' | sort -u); do
    install -D -m644 "$KDIR/modules/$f" "$R/lib/modules/$KVER/$f"
  done
  cp "$KDIR/modules/modules.builtin" "$KDIR/modules/modules.order" "$R/lib/modules/$KVER/" 2>/dev/null
  "$BUSYBOX" depmod -b "$R" "$KVER" || skip "depmod over the initramfs modules failed"
  install -m755 "$HERE/init.sh" "$R/init"
  echo "$KVER" > "$R/etc/vmrig-kver"
  (cd "$R" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$BASE.tmp" && mv "$BASE.tmp" "$BASE"
  rm -rf "$R"
  for old in "$CACHE"/base-"$KVER"-*.cpio; do [ "$old" = "$BASE" ] || rm -f "$old"; done
  [ -s "$BASE" ] || skip "could not build the base initramfs"
fi

# ---------------------------------------------------------------- per-run overlay
RUN=$(mktemp -d "${TMPDIR:-/tmp}/iolab-vm.XXXXXX")
QPID=""
cleanup() { [ -n "$QPID" ] && kill "$QPID" 2>/dev/null; rm -rf "$RUN"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
O=$RUN/overlay
mkdir -p "$O/bin" "$O/vm/tests"
# iolab without its debug info (it is built with debug = 1), and the libraries it loads.
if command -v objcopy >/dev/null; then objcopy --strip-debug "$IOLAB_BIN" "$O/bin/iolab" 2>/dev/null || cp "$IOLAB_BIN" "$O/bin/iolab"
else cp "$IOLAB_BIN" "$O/bin/iolab"; fi
chmod 755 "$O/bin/iolab"
ldd "$IOLAB_BIN" 2>/dev/null | awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(/ {print $1}' | while read -r l; do
  [ -e "$l" ] && install -D -m755 "$(readlink -f "$l")" "$O$l"
done
install -m644 "$HERE/guest/lib.sh" "$O/vm/lib.sh"
i=0
for s in "${SCRIPTS[@]}"; do
  i=$((i + 1)); install -m755 "$s" "$O/vm/tests/$(printf %02d $i)-$(basename "$s")"
done
(cd "$O" && find . -mindepth 1 | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"

# ---------------------------------------------------------------- boot
DEVS=()
if [ $BACKEND = null ] || [ $BACKEND = both ]; then
  DEVS+=(-blockdev driver=null-co,node-name=nvnull,size=1073741824,read-zeroes=on
         -device nvme,serial=vmrig-null,drive=nvnull,max_ioqpairs=8)
fi
if [ $BACKEND = file ] || [ $BACKEND = both ]; then
  truncate -s 256M "$RUN/nvme-file.img"
  DEVS+=(-blockdev driver=file,node-name=nvfile,filename=$RUN/nvme-file.img,cache.direct=on,aio=threads
         -device nvme,serial=vmrig-file,drive=nvfile,max_ioqpairs=8)
fi
ACC="-accel tcg,thread=multi -cpu max"
CMDLINE="console=ttyS0 panic=-1 oops=panic quiet loglevel=4 nvme.poll_queues=$POLLQ vmrig.poll_queues=$POLLQ vmrig.backend=$BACKEND $APPEND"
echo "vm-rig: booting: QEMU TCG, $SMP CPUs, $MEM MiB, NVMe backend $BACKEND, poll_queues=$POLLQ, scripts: $(cd "$O/vm/tests" && echo *)"
LOG=$RUN/console.log
START=$(date +%s.%N)
# The console goes to a file; a reader shows it live without the carriage returns.
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 $ACC -machine q35 -smp "$SMP" -m "$MEM" \
  -nographic -no-reboot -nodefaults -serial "file:$LOG" -monitor none -display none \
  -kernel "$KDIR/vmlinuz" -initrd "$RUN/initrd.cpio" -append "$CMDLINE" \
  "${DEVS[@]}" </dev/null >"$RUN/qemu.out" 2>&1 &
QPID=$!
if [ $LIVE = 1 ]; then
  ( tail -n +1 -F --pid=$QPID "$LOG" 2>/dev/null | tr -d '\r' ) &
  TPID=$!
fi
wait $QPID; QRC=$?
QPID=""
if [ $LIVE = 1 ]; then   # tail notices QEMU's end within a second and prints the rest first
  for _ in $(seq 30); do kill -0 $TPID 2>/dev/null || break; sleep 0.1; done
  kill $TPID 2>/dev/null; wait $TPID 2>/dev/null
fi
WALL=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
tr -d '\r' < "$LOG" > "$RUN/console.txt"
[ $LIVE = 1 ] || cat "$RUN/console.txt"
if [ -n "${IOLAB_VM_LOG:-}" ]; then cp "$RUN/console.txt" "$IOLAB_VM_LOG"; fi

# ---------------------------------------------------------------- verdict
pass=$(grep -c '^RESULT [^ ]* PASS' "$RUN/console.txt")
fail=$(grep -c '^RESULT [^ ]* FAIL' "$RUN/console.txt")
skipped=$(grep -c '^RESULT [^ ]* SKIP' "$RUN/console.txt")
echo "vm-rig: QEMU exit $QRC after ${WALL}s; results: $pass passed, $fail failed, $skipped skipped"
if [ -s "$RUN/qemu.out" ]; then echo "vm-rig: QEMU said:"; sed 's/^/  /' "$RUN/qemu.out"; fi
if [ $QRC = 124 ] || [ $QRC = 137 ]; then
  echo "vm-rig: FAIL: the guest did not finish within ${TIMEOUT}s (--timeout)"; exit 1
fi
if ! grep -q '^VMRIG DONE' "$RUN/console.txt"; then
  if grep -q '^VMRIG BOOT' "$RUN/console.txt"; then
    echo "vm-rig: FAIL: the guest stopped before finishing its scripts (kernel panic or crash?)"; exit 1
  fi
  if grep -qiE 'could not (load|open)|failed to|unsupported|not supported' "$RUN/qemu.out"; then
    skip "QEMU could not start this guest: $(head -1 "$RUN/qemu.out")"
  fi
  echo "vm-rig: FAIL: the guest never reached its init"; exit 1
fi
[ "$fail" = 0 ] || { echo "vm-rig: FAIL: $fail guest check(s) failed"; exit 1; }
[ "$pass" -gt 0 ] || { echo "vm-rig: FAIL: no guest check passed"; exit 1; }
echo "vm-rig: PASS"
exit 0
