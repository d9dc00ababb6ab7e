#!/usr/bin/env bash
# Fetches the daemons irqlab must live beside, for the tests that start
# them (issue 54): Debian's irqbalance, unpacked into the user's cache
# (`IRQLAB_CACHE_DIR`, else `XDG_CACHE_HOME/irqlab`, else ~/.cache/irqlab,
# as `irqlab lab` keeps its kernels) rather than installed: installing the
# package would start it at once through its init script, moving every IRQ
# of this machine under the other tests. Its libraries are installed from
# Debian (they start nothing). Only if missing.
set -euo pipefail

cache="${IRQLAB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/irqlab}"
tools="$cache/tools"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive

libs=(libcap-ng0 libglib2.0-0 libncursesw6 libnuma1 libsystemd0 libtinfo6)
missing=()
for p in "${libs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]} (irqbalance's libraries)" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x "$tools/irqbalance/usr/sbin/irqbalance" ]; then
  echo "fetching: irqbalance (Debian package, unpacked into $tools/irqbalance)" >&2
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # apt's lists may never have been fetched on a fresh machine.
  if ! (cd "$work" && apt-get download -qq irqbalance >/dev/null 2>&1); then
    $SUDO apt-get update -qq >/dev/null
    (cd "$work" && apt-get download -qq irqbalance >/dev/null)
  fi
  mkdir -p "$tools"
  rm -rf "$tools/irqbalance.tmp"
  dpkg-deb -x "$work"/irqbalance_*.deb "$tools/irqbalance.tmp"
  rm -rf "$tools/irqbalance"
  mv "$tools/irqbalance.tmp" "$tools/irqbalance"
fi
