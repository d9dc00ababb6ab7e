#!/usr/bin/env bash
# Installs what `make bench` needs beyond `make build`: a Python virtual
# environment in .venv/bench with SimSo (PyPI), the simulator
# bench/simso_compare.py measures irqlab's against. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv/bench
. scripts/venv.sh
ensure_venv "$venv" "bench/simso_compare.py"
if ! "$venv/bin/python" -c "import simso" >/dev/null 2>&1; then
  echo "installing: SimSo (PyPI) into $venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r bench/requirements.txt
fi
