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
RIG_VERSION=4   # bump when the base initramfs layout or /init changes

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
  --kernel K           which Debian kernel to boot (default \$IOLAB_VM_KERNEL, else the host's
                       own: linux-image-amd64 of its sources, Debian 12's 6.1 here):
                         5.10    Debian 11 (bullseye)
                         6.1     Debian 12 (the host's sources if they carry 6.1, else bookworm)
                         6.12    Debian 13 (trixie); boots with single-threaded TCG
                         newest  trixie-backports' linux-image-amd64 (7.x)
                         linux-image-ABI (or ABI), e.g. linux-image-6.12.48+deb13-amd64: found
                                 in the host's sources, bookworm, bullseye, trixie or trixie-backports
                       Other releases come through a private apt configuration per release under
                       <cache>/apt/ (the host's sources are never touched); each kernel is
                       cached in <cache>/kernel/ABI/ with its own initramfs.
  --kernel-version V   Debian kernel ABI, e.g. 6.1.0-56-amd64 (default \$IOLAB_VM_KVER, else a
                       cached one, else the one linux-image-amd64 depends on)
  --suite SUITE        take the kernel from Debian release SUITE instead of the host's sources,
                       e.g. bullseye (the same as --kernel 5.10); default \$IOLAB_VM_SUITE
  --tcg single|multi   QEMU TCG threads (default multi: one per vCPU; single for 6.12, which
                       oopses under multi-threaded TCG); default \$IOLAB_VM_TCG
  --no-install         never run apt-get (skip with 77 if something is missing)
  --append ARGS        extra kernel command line
  --iommu              an emulated Intel IOMMU (intel-iommu,intremap=on) and intel_iommu=on
                       iommu=pt, for iolab's user-space NVMe driver through VFIO type-1
                       (docs/nvme-driver.md); the vfio modules are in every initramfs
  --noiommu            no IOMMU, and vfio.ko rebuilt with CONFIG_VFIO_NOIOMMU (Debian's lacks it)
                       for VFIO's unsafe no-IOMMU mode: built on the host from Debian's
                       linux-source and linux-headers of the guest kernel (tests/vm/noiommu.sh,
                       cached in <cache>/noiommu/ABI/); skips (77) with the reason where it cannot
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
KERNEL=${IOLAB_VM_KERNEL:-}
TCG=${IOLAB_VM_TCG:-}
INSTALL=1
APPEND=""
IOMMU=0
NOIOMMU=0
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
    --kernel) KERNEL=$2; shift 2;;
    --tcg) TCG=$2; shift 2;;
    --no-install) INSTALL=0; shift;;
    --append) APPEND=$2; shift 2;;
    --iommu) IOMMU=1; shift;;
    --noiommu) NOIOMMU=1; shift;;
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
case $TCG in ''|single|multi) ;; *) die "--tcg is single or multi";; esac
[ $IOMMU = 1 ] && [ $NOIOMMU = 1 ] && die "--iommu and --noiommu exclude each other: pick one"
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
  # One install at a time with the integration tests' own installs (tests/it/common's
  # APT_LOCK), and apt's lock waited for: rig boots started together install QEMU once instead
  # of colliding on dpkg's lock and each concluding it cannot be installed.
  (
    flock 8
    [ "$(dpkg-query -W -f='${Status}\n' "$@" 2>/dev/null | grep -c '^install ok installed$')" = $# ] && exit 0
    echo "vm-rig: installing $*"
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 && exit 0
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
  ) 8>>/var/lock/iolab-tests-apt.lock
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
# Each kernel has its own directory <cache>/kernel/<ABI>/ (vmlinuz, modules/, and `suite`: the
# Debian release it came from through a private apt configuration; none for the host's sources).
kernel_ready() { [ -f "$CACHE/kernel/$1/vmlinuz" ] && [ -f "$CACHE/kernel/$1/modules/modules.dep" ]; }
kernel_suite() { cat "$CACHE/kernel/$1/suite" 2>/dev/null; }
# --kernel: which Debian release carries that kernel (KWANT: the version an ABI must start with).
KWANT=""
case $KERNEL in
  "") ;;
  5.10) SUITE=${SUITE:-bullseye}; KWANT=5.10;;
  6.1) KWANT=6.1;;     # the host's own sources when they carry 6.1 (Debian 12), else bookworm
  6.12) SUITE=${SUITE:-trixie}; KWANT=6.12;;
  newest) SUITE=${SUITE:-trixie-backports};;
  linux-image-*) KVER=${KERNEL#linux-image-};;
  [0-9]*.*-*) KVER=$KERNEL;;
  *) die "--kernel wants 5.10, 6.1, 6.12, newest or a package name such as linux-image-6.12.48+deb13-amd64";;
esac
case $KVER in *[!a-z0-9.+~-]*) die "bad kernel version '$KVER'";; esac
# A private apt configuration per Debian release (sources list, package lists and downloads under
# the cache): the host's sources never change. apt_opts SUITE sets APT_OPTS (empty: host's own).
APT_OPTS=(); PA=""
apt_opts() {
  APT_OPTS=(); PA=""
  [ -n "$1" ] || return 0
  PA=$CACHE/apt/$1
  APT_OPTS=(-o "Dir::Etc::sourcelist=$PA/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$PA/lists"
            -o "Dir::Cache=$PA/cache" -o "Dir::Etc::preferencesparts=$PA/preferences.d" -o Dir::State::status=/dev/null
            -o Debug::NoLocking=1)
  mkdir -p "$PA/lists/partial" "$PA/cache/archives/partial" "$PA/preferences.d"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $1 main" > "$PA/sources.list"
}
apt_update() {   # fetch SUITE's package lists (the private ones; the host's only as root)
  [ $INSTALL = 1 ] && command -v apt-get >/dev/null || return 1
  if [ -n "$SUITE" ]; then
    echo "vm-rig: fetching Debian $SUITE's package lists into $PA"
    apt-get "${APT_OPTS[@]}" update -qq >/dev/null 2>&1
  else
    [ "$(id -u)" = 0 ] && [ $APT_UPDATED = 0 ] \
      && (flock 8; apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1) 8>>/var/lock/iolab-tests-apt.lock \
      && APT_UPDATED=1
  fi
}
acache() { apt-cache ${APT_OPTS[@]+"${APT_OPTS[@]}"} "$@" 2>/dev/null; }
# The ABI linux-image-amd64 depends on (from 6.19 it depends on linux-base-amd64 too).
pick() { acache depends linux-image-amd64 | sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1; }
wanted() { [ -z "$KWANT" ] || case $1 in "$KWANT".*) true;; *) false;; esac; }
if [ -z "$KVER" ]; then   # the newest cached kernel of this release (and version)
  for d in $(ls -1d "$CACHE"/kernel/*/ 2>/dev/null | sort -V -r); do
    v=$(basename "$d")
    if kernel_ready "$v" && [ "$(kernel_suite "$v")" = "$SUITE" ] && wanted "$v"; then KVER=$v; break; fi
  done
  if [ -z "$KVER" ] && [ "$KERNEL" = 6.1 ] && [ -z "$SUITE" ]; then   # 6.1 cached from bookworm?
    for d in $(ls -1d "$CACHE"/kernel/6.1.*/ 2>/dev/null | sort -V -r); do
      v=$(basename "$d"); if kernel_ready "$v" && [ "$(kernel_suite "$v")" = bookworm ]; then KVER=$v; SUITE=bookworm; break; fi
    done
  fi
fi
if [ -n "$KVER" ] && [ -z "$SUITE" ] && kernel_ready "$KVER"; then SUITE=$(kernel_suite "$KVER"); fi
apt_opts "$SUITE"
if [ -z "$KVER" ]; then
  command -v apt-cache >/dev/null || skip "no cached kernel and no apt to fetch one (set IOLAB_VM_KVER and --cache)"
  KVER=$(pick)
  [ -n "$KVER" ] && wanted "$KVER" || { apt_update; KVER=$(pick); }
  if [ "$KERNEL" = 6.1 ] && [ -z "$SUITE" ] && ! { [ -n "$KVER" ] && wanted "$KVER"; }; then
    SUITE=bookworm; apt_opts bookworm; KVER=$(pick); [ -n "$KVER" ] || { apt_update; KVER=$(pick); }
  fi
  [ -n "$KVER" ] || skip "apt offers no linux-image-amd64 kernel${SUITE:+ in Debian $SUITE} (Debian's package registry unreachable? is this Debian?)"
  wanted "$KVER" || skip "linux-image-amd64 in ${SUITE:-the host sources} is $KVER, not $KWANT"
elif ! kernel_ready "$KVER" && [ -z "$SUITE" ] && [ -n "$KERNEL" ]; then
  # A package name: the first of the host's sources and the private releases that has it.
  for s in "" bookworm bullseye trixie trixie-backports; do
    SUITE=$s; apt_opts "$s"
    [ -n "$(acache show "linux-image-$KVER" | head -1)" ] && break
    [ -n "$s" ] && apt_update && [ -n "$(acache show "linux-image-$KVER" | head -1)" ] && break
    SUITE=""
  done
  apt_opts "$SUITE"
  [ -n "$SUITE" ] || [ -n "$(acache show "linux-image-$KVER" | head -1)" ] \
    || skip "no Debian release here offers linux-image-$KVER (looked in the host's sources, bookworm, bullseye, trixie, trixie-backports)"
fi
KDIR=$CACHE/kernel/$KVER
if ! kernel_ready "$KVER"; then
  [ $INSTALL = 1 ] || skip "kernel $KVER is not in $CACHE and --no-install was given"
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "no apt-get/dpkg-deb to fetch kernel $KVER"
  echo "vm-rig: fetching Debian kernel package linux-image-$KVER${SUITE:+ from $SUITE} into $KDIR"
  rm -rf "$KDIR"; mkdir -p "$KDIR/dl" "$KDIR/x"
  fetch() { (cd "$KDIR/dl" && apt-get ${APT_OPTS[@]+"${APT_OPTS[@]}"} download "$@" >/dev/null 2>&1); }
  fetch "linux-image-$KVER" || { apt_update && fetch "linux-image-$KVER"; } \
    || skip "apt-get download linux-image-$KVER failed${SUITE:+ (Debian $SUITE)}: is Debian's package registry reachable?"
  # From 6.19 linux-image-V is a metapackage: vmlinuz is in linux-binary-V, the modules in
  # linux-modules-V, modules.builtin/order in linux-base-V. Fetch the linux-*-V it depends on.
  parts=$(dpkg-deb -f "$KDIR"/dl/*.deb Depends | tr ',|' '\n\n' | sed -n "s/^ *\(linux-[a-z]*-$(echo "$KVER" | sed 's/\./\\./g')\)\( .*\)\?$/\1/p" | sort -u)
  if [ -n "$parts" ]; then
    echo "vm-rig: linux-image-$KVER is a metapackage: fetching" $parts
    fetch $parts || skip "apt-get download $(echo $parts) failed"
  fi
  for deb in "$KDIR"/dl/*.deb; do   # one dpkg-deb -x per archive
    dpkg-deb -x "$deb" "$KDIR/x" || skip "cannot unpack $(basename "$deb")"
  done
  # vmlinuz: /boot/vmlinuz-V, or (linux-binary-V, from 6.19) /usr/lib/modules/V/vmlinuz.
  for k in "$KDIR/x/boot/vmlinuz-$KVER" "$KDIR/x/usr/lib/modules/$KVER/vmlinuz" "$KDIR/x/lib/modules/$KVER/vmlinuz"; do
    [ -f "$k" ] && { mv "$k" "$KDIR/vmlinuz"; break; }
  done
  [ -f "$KDIR/vmlinuz" ] || skip "linux-image-$KVER (and what it depends on) holds no vmlinuz"
  # Modules under /lib/modules up to 6.11, /usr/lib/modules from 6.12.
  for m in "$KDIR/x/usr/lib/modules/$KVER" "$KDIR/x/lib/modules/$KVER"; do
    [ -d "$m" ] && { mv "$m" "$KDIR/modules"; break; }
  done
  [ -d "$KDIR/modules" ] || skip "linux-image-$KVER holds no modules directory"
  # The package's postinst would run depmod; do it here, in the cache.
  mkdir -p "$KDIR/depmod/lib/modules"; ln -s "$KDIR/modules" "$KDIR/depmod/lib/modules/$KVER"
  "$BUSYBOX" depmod -b "$KDIR/depmod" "$KVER" || skip "depmod over the kernel's modules failed"
  rm -rf "$KDIR/x" "$KDIR/dl" "$KDIR/depmod"
  [ -z "$SUITE" ] || echo "$SUITE" > "$KDIR/suite"
fi
kernel_ready "$KVER" || skip "kernel $KVER in $KDIR is incomplete"
echo "vm-rig: kernel $KVER (Debian ${SUITE:+$SUITE }package linux-image-$KVER, cached in $KDIR)"
# QEMU's multi-threaded TCG (one host thread per vCPU) is fast, but Debian's 6.12 and 7.3 oops
# under QEMU 7.2's (int3 in __schedule, while the kernel patches its own code: perf_event_open's
# static keys, or a few seconds of I/O): from 6.12 the guest gets one TCG thread for both vCPUs.
if [ -z "$TCG" ]; then
  if [ "$(printf '%s\n' 6.12 "${KVER%%-*}" | sort -V | head -1)" = 6.12 ]; then TCG=single; else TCG=multi; fi
fi

# ---------------------------------------------------------------- base initramfs (cached)
# busybox, the block modules and /init. The per-run part (iolab, its libraries, the guest
# scripts) is a second cpio archive appended to it: the kernel unpacks both.
WANT_MODULES="nvme kyber-iosched bfq null_blk crct10dif_generic crct10dif-pclmul crc64_rocksoft_generic vfio vfio_iommu_type1 vfio-pci ext4 crc32c_generic nbd"
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
  # Debian compresses modules with xz from 6.12 (.ko.xz): busybox modprobe first hands the kernel
  # the compressed file ("Invalid ELF header magic" in the log), then the decompressed one.
  # Decompress them here once.
  find "$R/lib/modules/$KVER" -name '*.ko.xz' -exec "$BUSYBOX" unxz {} + || skip "cannot decompress the .ko.xz modules"
  cp "$KDIR/modules/modules.builtin" "$KDIR/modules/modules.order" "$R/lib/modules/$KVER/" 2>/dev/null
  "$BUSYBOX" depmod -b "$R" "$KVER" || skip "depmod over the initramfs modules failed"
  install -m755 "$HERE/init.sh" "$R/init"
  echo "$KVER" > "$R/etc/vmrig-kver"
  (cd "$R" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$BASE.tmp" && mv "$BASE.tmp" "$BASE"
  rm -rf "$R"
  # Older builds of this kernel's base (other keys); never another kernel's.
  for old in "$CACHE"/base-"$KVER"-????????????????.cpio; do [ "$old" = "$BASE" ] || rm -f "$old"; done
  [ -s "$BASE" ] || skip "could not build the base initramfs"
fi

# ---------------------------------------------------------------- no-IOMMU vfio.ko (cached)
if [ $NOIOMMU = 1 ]; then
  . "$HERE/noiommu.sh"
  noiommu_vfio_ko || skip "no-IOMMU mode: $NOIOMMU_WHY"
  # Where the stock vfio.ko sits in the guest's module tree (decompressed there from 6.12).
  VFIO_KO=$(sed -n 's/^\(\(.*\/\)\?vfio\.ko\)\(\.[a-z]*\)\?:.*/\1/p' "$KDIR/modules/modules.dep" | head -1)
  [ -n "$VFIO_KO" ] || skip "no-IOMMU mode: kernel $KVER has no vfio module"
  echo "vm-rig: no-IOMMU mode: vfio.ko rebuilt with CONFIG_VFIO_NOIOMMU ($NOIOMMU_KO)"
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
# The libraries `ldd` names for binary $1, each installed once into the overlay at its path.
install_libs() {
  ldd "$1" 2>/dev/null | awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(/ {print $1}' | while read -r l; do
    [ -e "$O$l" ] || { [ -e "$l" ] && install -D -m755 "$(readlink -f "$l")" "$O$l"; }
  done
}
install_libs "$IOLAB_BIN"
# Host tools the guest scripts use that busybox lacks, with their libraries: mke2fs as mkfs.ext4
# (nbd.sh makes ext4 on the kernel's NBD client). A host without one leaves it out and the guest
# check that needs it says so.
for t in mke2fs; do
  tp=$(command -v "$t" 2>/dev/null) || { echo "vm-rig: note: host has no $t (the guest goes without it)"; continue; }
  install -D -m755 "$(readlink -f "$tp")" "$O/usr/sbin/$t"
  [ "$t" = mke2fs ] && ln -sf mke2fs "$O/usr/sbin/mkfs.ext4"
  install_libs "$tp"
done
install -m644 "$HERE/guest/lib.sh" "$O/vm/lib.sh"
i=0
for s in "${SCRIPTS[@]}"; do
  i=$((i + 1)); install -m755 "$s" "$O/vm/tests/$(printf %02d $i)-$(basename "$s")"
done
# The rebuilt vfio.ko replaces the stock one at its path (a later cpio entry overwrites).
[ $NOIOMMU = 1 ] && install -D -m644 "$NOIOMMU_KO" "$O/lib/modules/$KVER/$VFIO_KO"
(cd "$O" && find . -mindepth 1 | "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$RUN/overlay.cpio"
cat "$BASE" "$RUN/overlay.cpio" > "$RUN/initrd.cpio"

# ---------------------------------------------------------------- boot
DEVS=()
# The IOMMU before the NVMe controllers (QEMU wants it first); interrupt remapping on, or
# VFIO_SET_IOMMU fails with EPERM even for a driver that takes no interrupt.
if [ $IOMMU = 1 ]; then
  DEVS+=(-device intel-iommu,intremap=on)
  APPEND="intel_iommu=on iommu=pt $APPEND"
fi
if [ $BACKEND = null ] || [ $BACKEND = both ]; then
  DEVS+=(-blockdev driver=null-co,node-name=nvnull,size=1073741824,read-zeroes=on
         -device nvme,serial=vmrig-null,drive=nvnull,max_ioqpairs=8)
fi
if [ $BACKEND = file ] || [ $BACKEND = both ]; then
  truncate -s 256M "$RUN/nvme-file.img"
  DEVS+=(-blockdev driver=file,node-name=nvfile,filename=$RUN/nvme-file.img,cache.direct=on,aio=threads
         -device nvme,serial=vmrig-file,drive=nvfile,max_ioqpairs=8$([ $IOMMU = 1 ] || [ $NOIOMMU = 1 ] && echo ,mdts=8))
fi
ACC="-accel tcg,thread=$TCG -cpu max"
CMDLINE="console=ttyS0 panic=-1 oops=panic quiet loglevel=4 nvme.poll_queues=$POLLQ vmrig.poll_queues=$POLLQ vmrig.backend=$BACKEND vmrig.iommu=$IOMMU vmrig.noiommu=$NOIOMMU $APPEND"
echo "vm-rig: booting: QEMU TCG (thread=$TCG), $SMP CPUs, $MEM MiB, NVMe backend $BACKEND, poll_queues=$POLLQ, scripts: $(cd "$O/vm/tests" && echo *)"
LOG=$RUN/console.log
START=$(date +%s.%N)
# The console goes to a file; a reader shows it live without the carriage returns and terminal
# escape codes (SeaBIOS and the kernel clear the screen: ESC c, ESC [2J... a reset starts a line,
# so `VMRIG BOOT` begins one as the guest printed it).
plain() { sed -u -e 's/\r//g' -e 's/\x1bc/\n/g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[()][A-Z0-9]//g'; }
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 $ACC -machine q35 -smp "$SMP" -m "$MEM" \
  -nographic -no-reboot -nodefaults -serial "file:$LOG" -monitor none -display none \
  -kernel "$KDIR/vmlinuz" -initrd "$RUN/initrd.cpio" -append "$CMDLINE" \
  "${DEVS[@]}" </dev/null >"$RUN/qemu.out" 2>&1 &
QPID=$!
if [ $LIVE = 1 ]; then
  ( tail -n +1 -F --pid=$QPID "$LOG" 2>/dev/null | plain ) &
  TPID=$!
fi
wait $QPID; QRC=$?
QPID=""
if [ $LIVE = 1 ]; then   # tail notices QEMU's end within a second and prints the rest first
  for _ in $(seq 30); do kill -0 $TPID 2>/dev/null || break; sleep 0.1; done
  kill $TPID 2>/dev/null; wait $TPID 2>/dev/null
fi
WALL=$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
plain < "$LOG" > "$RUN/console.txt"
[ $LIVE = 1 ] || cat "$RUN/console.txt"
if [ -n "${IOLAB_VM_LOG:-}" ]; then cp "$RUN/console.txt" "$IOLAB_VM_LOG"; fi

# ---------------------------------------------------------------- verdict
pass=$(grep -c '^RESULT [^ ]* PASS' "$RUN/console.txt")
fail=$(grep -c '^RESULT [^ ]* FAIL' "$RUN/console.txt")
skipped=$(grep -c '^RESULT [^ ]* SKIP' "$RUN/console.txt")
echo "vm-rig: QEMU exit $QRC after ${WALL}s; results: $pass passed, $fail failed, $skipped skipped"
if [ -s "$RUN/qemu.out" ]; then echo "vm-rig: QEMU said:"; sed 's/^/  /' "$RUN/qemu.out"; fi
# The first sign of a guest kernel in trouble, if any.
oops=$(grep -m1 -E 'Oops:|BUG:|Kernel panic|general protection fault|self-detected stall|soft lockup' "$RUN/console.txt" | sed 's/^\[ *[0-9.]*\] //')
if [ $QRC = 124 ] || [ $QRC = 137 ]; then
  echo "vm-rig: FAIL: the guest did not finish within ${TIMEOUT}s (--timeout)${oops:+; the kernel said: $oops}"; exit 1
fi
if ! grep -q '^VMRIG DONE' "$RUN/console.txt"; then
  if grep -q '^VMRIG BOOT' "$RUN/console.txt"; then
    echo "vm-rig: FAIL: the guest stopped before finishing its scripts (${oops:-kernel panic or crash?})"
    [ "$TCG" = single ] || echo "vm-rig: (a kernel that oopses under multi-threaded TCG may boot with --tcg single)"
    exit 1
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
