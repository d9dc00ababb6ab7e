#!/usr/bin/env bash
# Builds, once, the root file system that `irqlab lab run --root` boots with
# systemd as init (the reboot test of `control install`): Debian 12 from
# Debian's own packages (mmdebstrap, installed from apt if missing), with
# systemd, D-Bus, and the daemons irqlab lives beside (irqbalance 1.9.2,
# tuned 2.20; stalld is not in Debian 12). Into the user's cache, never
# the repository:
#   ${IRQLAB_LAB_ROOT:-${IRQLAB_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/irqlab}/roots/bookworm-systemd}
# Prints the root's path. About a minute and 240 MB; nothing is done when
# the root is there (its stamp file names what it was built with).
set -euo pipefail
cache=${IRQLAB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/irqlab}
root=${IRQLAB_LAB_ROOT:-$cache/roots/bookworm-systemd}
# Bump when the package list or the setup below changes: an older root is rebuilt.
stamp_text="irqlab lab root v2: bookworm minbase + systemd dbus irqbalance tuned linux-perf"
stamp=$root/etc/irqlab-lab-root

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "error: building the lab root needs root (mmdebstrap's chroot mode, files owned by root)" >&2
  exit 3
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "installing: mmdebstrap (builds the lab's systemd root file system)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# Built next to its final place and renamed: an interrupted build never
# looks like a root.
tmp=$root.tmp
rm -rf "$tmp"
mkdir -p "$(dirname "$root")"
echo "building: the lab's systemd root file system in $root (mmdebstrap, about a minute)" >&2
# libelf1 and zlib1g: what the irqlab executable links (it is copied in by
# `lab run --root`); procps and iproute2: what the tests read values with;
# linux-perf: Python's `perf` module, which tuned's scheduler plugin imports
# (Debian's tuned does not depend on it: without it tuned 2.20 skips every
# [scheduler] section, so thread policies of an exported profile are lost).
packages=systemd,systemd-sysv,dbus,udev,kmod,procps,iproute2,libelf1,zlib1g,irqbalance,tuned,linux-perf
mmdebstrap --quiet --variant=minbase --include="$packages" \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$tmp" http://deb.debian.org/debian

# The guest's kernel is started by QEMU, not by a boot loader: this file
# stands for GRUB's configuration (Debian's default), so that `control
# install` of a profile with a [boot] part has a GRUB to write a drop-in
# for. update-grub is not installed (it would probe a disk there is none of).
cat > "$tmp/etc/default/grub" <<'GRUB'
# Debian's default GRUB settings, written by irqlab's install-lab-root.sh: the
# lab guest's kernel is started by QEMU, so nothing reads this file at boot.
GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""
GRUB
# Timers a guest that lives a minute never needs: they only add work to
# an emulated boot.
for unit in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$tmp/etc/systemd/system/$unit"
done
echo "irqlab-lab" > "$tmp/etc/hostname"
echo "$stamp_text" > "$tmp/etc/irqlab-lab-root"

rm -rf "$root"
mv "$tmp" "$root"
echo "$root"
