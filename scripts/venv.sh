# Sourced by the install scripts that need a Python virtual environment.
# ensure_venv DIR WHAT: makes DIR with python3 -m venv unless it exists;
# exit 3 naming WHAT needs Python when python3 is missing.
ensure_venv() {
  local venv=$1 what=$2
  if ! command -v python3 >/dev/null 2>&1; then
    echo "error: python3 is missing ($what needs Python 3.8 or newer)" >&2
    exit 3
  fi
  if [ ! -x "$venv/bin/python" ]; then
    echo "installing: Python virtual environment $venv" >&2
    python3 -m venv "$venv"
  fi
}
