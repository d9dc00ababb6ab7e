#!/usr/bin/env bash
# Installs what `irqlab lab` needs, only if missing: QEMU, busybox (virtme-ng
# builds the guest's init with it), kmod (depmod for the kernel packages'
# modules) and rtla (the kernel matrix compares `measure latency` beside
# `rtla timerlat`) from Debian; bookworm-backports in apt's sources (Debian's
# 6.12 kernels live there; only its kernel packages are ever fetched, by
# `apt-get download`, never installed); virtme-ng from PyPI into .venv/lab.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive

# 6.12 comes from bookworm-backports: add the suite once (a sources file of
# irqlab's own, removed by nothing else), then refresh apt's lists.
backports=/etc/apt/sources.list.d/irqlab-backports.sources
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  echo "installing: apt source bookworm-backports ($backports; for Debian's 6.12 kernel packages)" >&2
  $SUDO tee "$backports" >/dev/null <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $SUDO apt-get update -qq >/dev/null
elif ! apt-cache show 'linux-image-6.12.*+deb12-rt-amd64-unsigned' >/dev/null 2>&1; then
  $SUDO apt-get update -qq >/dev/null
fi

packages=(qemu-system-x86 busybox-static kmod rtla)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

venv=.venv/lab
ensure_venv "$venv" "irqlab lab (virtme-ng)"
if [ ! -x "$venv/bin/vng" ]; then
  echo "installing: virtme-ng into $venv (PyPI)" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "virtme-ng==1.42"
fi
