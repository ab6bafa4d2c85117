# Sourced by tests/vm/rig.sh for --noiommu: VFIO's no-IOMMU mode for the guest kernel.
#
# Debian builds its kernels without CONFIG_VFIO_NOIOMMU, so vfio.ko alone is rebuilt with it from
# Debian's own packages of the same version: linux-headers-ABI (with its -common part, the
# linux-kbuild tools and the compiler it names) and linux-source-MAJOR.MINOR, downloaded with
# apt-get download through the rig's apt configuration (never installed). Only the vfio module's
# sources are compiled (about 5 s); its symbols keep the CRCs of the kernel's Module.symvers, so the
# stock vfio-pci and vfio_iommu_type1 load against it. The module is cached in
# <cache>/noiommu/ABI/vfio.ko; the downloads (about 150 MB) are removed once it is built.
#
# noiommu_vfio_ko: sets NOIOMMU_KO to the built module, or NOIOMMU_WHY to why it cannot be had.
# Uses rig.sh's CACHE, KVER, KDIR, INSTALL, APT_OPTS, acache, apt_update and apt_install.

NOIOMMU_BUILD=1   # bump when the way the module is built changes (invalidates the cached ones)

noiommu_vfio_ko() {
  local dir=$CACHE/noiommu/$KVER w ver mm deps common kbuild cc src_deb hdr inc objs
  NOIOMMU_KO=$dir/vfio.ko; NOIOMMU_WHY=""
  [ -f "$NOIOMMU_KO" ] && [ "$(cat "$dir/build" 2>/dev/null)" = "$NOIOMMU_BUILD" ] && return 0
  NOIOMMU_KO=""
  [ $INSTALL = 1 ] || { NOIOMMU_WHY="no no-IOMMU vfio.ko cached for $KVER and --no-install was given"; return 1; }
  command -v make >/dev/null || apt_install make || { NOIOMMU_WHY="make is missing (Debian package make)"; return 1; }
  for t in dpkg-deb tar xz objcopy; do
    command -v $t >/dev/null || { NOIOMMU_WHY="host tool $t is missing"; return 1; }
  done
  # The exact version of the kernel package: headers and sources must be that one.
  ver=$(acache show "linux-image-$KVER" | sed -n 's/^Version: //p' | head -1)
  [ -n "$ver" ] || { apt_update; ver=$(acache show "linux-image-$KVER" | sed -n 's/^Version: //p' | head -1); }
  [ -n "$ver" ] || { NOIOMMU_WHY="apt knows no linux-image-$KVER to match headers and sources to"; return 1; }
  mm=$(echo "$KVER" | cut -d. -f1,2)
  echo "vm-rig: building vfio.ko with CONFIG_VFIO_NOIOMMU for $KVER from Debian's linux-source-$mm and linux-headers-$KVER $ver"
  rm -rf "$dir"; mkdir -p "$dir/dl" "$dir/x"; w=$dir
  nfetch() { (cd "$w/dl" && apt-get ${APT_OPTS[@]+"${APT_OPTS[@]}"} download "$@" >/dev/null 2>&1); }
  nfetch "linux-headers-$KVER=$ver" || { rm -rf "$dir"; NOIOMMU_WHY="apt-get download linux-headers-$KVER=$ver failed"; return 1; }
  # What the headers depend on: their -common half, the kbuild tools, the compiler (gcc-N).
  deps=$(dpkg-deb -f "$w"/dl/linux-headers-*.deb Depends | tr ',' '\n' | sed 's/^ *//; s/ .*//')
  common=$(echo "$deps" | grep '^linux-headers-.*-common' | head -1)
  kbuild=$(echo "$deps" | grep '^linux-kbuild-' | head -1)
  # (linux-compiler-gcc-12-x86 up to Debian 12, gcc-14 itself from Debian 13)
  cc=$(echo "$deps" | sed -n 's/^linux-compiler-\(gcc-[0-9]*\)-.*/\1/p; s/^\(gcc-[0-9]*\)$/\1/p' | head -1)
  cc=${cc:-gcc}
  command -v "$cc" >/dev/null || apt_install "$cc" \
    || { rm -rf "$dir"; NOIOMMU_WHY="kernel $KVER was built with $cc, which this host does not have"; return 1; }
  nfetch "linux-source-$mm=$ver" ${common:+"$common=$ver"} ${kbuild:+"$kbuild=$ver"} \
    || { rm -rf "$dir"; NOIOMMU_WHY="apt-get download linux-source-$mm=$ver $common $kbuild failed"; return 1; }
  for d in "$w"/dl/linux-headers-*.deb "$w"/dl/linux-kbuild-*.deb; do dpkg-deb -x "$d" "$w/x" || { rm -rf "$dir"; NOIOMMU_WHY="cannot unpack $(basename "$d")"; return 1; }; done
  # Only drivers/vfio of the source tarball (inside the .deb) is unpacked.
  src_deb=$(ls "$w"/dl/linux-source-*.deb)
  dpkg-deb --fsys-tarfile "$src_deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' \
    | tar -xJ -C "$w" --wildcards --strip-components=2 '*/drivers/vfio' 2>/dev/null
  [ -f "$w/vfio/Makefile" ] || { rm -rf "$dir"; NOIOMMU_WHY="linux-source-$mm holds no drivers/vfio"; return 1; }
  # The kernel's own Makefile for the objects of vfio.ko (with this kernel's configuration), the
  # other modules of the directory dropped, and the no-IOMMU code compiled in.
  printf 'include $(src)/Makefile\nobj-m := vfio.o\nobj-y :=\nccflags-y += -DCONFIG_VFIO_NOIOMMU=1\n' > "$w/vfio/Kbuild"
  hdr=$w/x/usr/src/linux-headers-$KVER
  inc=$(sed -n 's|^include /usr/src/\(.*\)/Makefile$|\1|p' "$hdr/Makefile" | head -1)
  objs=$hdr; [ -n "$inc" ] && objs=$w/x/usr/src/$inc
  if ! make -s -C "$objs" O="$hdr" M="$w/vfio" CC="$cc" modules > "$w/build.log" 2>&1 || [ ! -f "$w/vfio/vfio.ko" ]; then
    NOIOMMU_WHY="building vfio.ko for $KVER failed: $(grep -m1 -iE 'error' "$w/build.log" || tail -1 "$w/build.log")"
    rm -rf "$dir"; return 1
  fi
  objcopy --strip-debug "$w/vfio/vfio.ko" "$dir/vfio.ko.tmp" && mv "$dir/vfio.ko.tmp" "$dir/vfio.ko"
  echo "$NOIOMMU_BUILD" > "$dir/build"
  rm -rf "$w/dl" "$w/x" "$w/vfio"
  NOIOMMU_KO=$dir/vfio.ko
}
