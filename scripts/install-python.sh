#!/usr/bin/env bash
# Builds and installs the Python package (python/, PyO3 + maturin) into the
# virtual environment .venv/python with what its tests use (pandas, pytest,
# Ray, nbclient, ipykernel, matplotlib), as a user would:
# `pip install ./python[test,ray]` (pip builds the wheel with maturin from PyPI).
# Re-installs only when a source of the package changed. Quiet unless it
# has work to do.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv/python
. scripts/venv.sh
ensure_venv "$venv" "the Python package"
# The package's inputs: its own sources and the crates it links.
stamp="$venv/.irqlab-sources"
sources=$(find python/src python/irqlab python/Cargo.toml python/pyproject.toml crates/analysis crates/policy crates/sim \
  -type f -newer "$stamp" 2>/dev/null | head -1 || true)
if [ ! -f "$stamp" ] || [ -n "$sources" ] || ! "$venv/bin/python" -c "import irqlab, pandas, pytest, ray, nbclient, ipykernel, matplotlib" >/dev/null 2>&1; then
  echo "installing: the irqlab Python package (pip install ./python[test,ray], builds the wheel)" >&2
  # The Rust build keeps its target directory between runs.
  CARGO_TARGET_DIR="$PWD/python/target" "$venv/bin/python" -m pip install -q --disable-pip-version-check "./python[test,ray]"
  touch "$stamp"
fi
