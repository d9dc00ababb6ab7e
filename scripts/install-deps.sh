#!/usr/bin/env bash
# Installs what irqlab's build, demo and tests need, only if missing.
# Debian packages: clang/libelf/zlib/bpftool for the BPF programs, rt-tests
# (cyclictest, oslat) and bpftrace as references the tests compare against,
# iproute2/ethtool for the network testbed, prometheus with promtool,
# which the exporter's test runs against it, and chromium, in which the
# survey page's test renders the page headless (screenshot, console errors),
# and man-db, with which `man -l` reads the generated man pages (`make man`).
set -euo pipefail

packages=(clang llvm libelf-dev zlib1g-dev pkg-config make bpftool rt-tests bpftrace iproute2 ethtool procps prometheus chromium man-db)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
      echo "error: missing Debian packages: ${missing[*]} (run as root or install them)" >&2
      exit 3
    fi
  else
    SUDO=
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  # One retry after `dpkg --configure -a`: a postinst that fails on the first
  # pass (e.g. while another apt run held the lock) usually succeeds then.
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    $SUDO dpkg --configure -a >/dev/null || true
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# irqbalance for the coexistence tests, unpacked, never started here.
"$(dirname "$0")/install-daemons.sh"

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    echo "note: cargo is in \$HOME/.cargo/bin; add it to PATH" >&2
  else
    echo "error: no Rust toolchain (cargo) found; install Rust 1.82 or newer" >&2
    exit 3
  fi
fi

# make test checks formatting and lints: rustfmt and clippy, from rustup
# where the toolchain came from it.
for component in rustfmt clippy; do
  if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
    if command -v rustup >/dev/null 2>&1; then
      echo "installing: rust component $component" >&2
      rustup component add "$component" >/dev/null
    else
      echo "error: cargo ${component/rustfmt/fmt} is missing (install the $component component)" >&2
      exit 3
    fi
  fi
done
