#!/bin/sh
# Unpack the fixtures a guest script printed between CAPTURE lines (tests/vm/guest/profile.sh,
# booted with `--append iolab_fixtures_capture`) into tests/fixtures/, checking their sha256:
#   IOLAB_VM_LOG=target/fixtures.log tests/vm/rig.sh --append iolab_fixtures_capture tests/vm/guest/profile.sh
#   tests/vm/capture.sh target/fixtures.log
set -eu
LOG=${1:?usage: tests/vm/capture.sh CONSOLE_LOG [DEST, default tests/fixtures]}
DEST=${2:-$(dirname "$0")/../fixtures}
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
want=$(sed -n 's/^CAPTURE-BEGIN fixtures\.tar\.gz\.b64 sha256=\([0-9a-f]*\).*/\1/p' "$LOG" | tail -n 1)
[ -n "$want" ] || { echo "capture.sh: no CAPTURE-BEGIN fixtures.tar.gz.b64 line in $LOG" >&2; exit 1; }
sed -n '/^CAPTURE-BEGIN fixtures\.tar\.gz\.b64/,/^CAPTURE-END fixtures\.tar\.gz\.b64/p' "$LOG" | sed '1d;$d' | base64 -d > "$TMP"
got=$(sha256sum < "$TMP" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "capture.sh: sha256 $got, the guest said $want: the console mixed something into the capture; boot again" >&2; exit 1; }
tar xzf "$TMP" -C "$DEST"
tar tzf "$TMP" | grep -v '/$' | sed "s|^\./|  $DEST/|"
