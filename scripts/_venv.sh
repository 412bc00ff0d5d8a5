# Sourced by scripts/serve and scripts/test: creates .venv and installs tokenplane
# (with dev extras) when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TOKENPLANE_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
STAMP="$VENV/.tokenplane-installed"
# (setup.py and the C sources too: the install builds the compiled kernels from them)
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT"/src/tokenplane/*/_*.c \
  | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  "$VENV/bin/python" -m pip install -q -e "$ROOT[dev]"
  echo "$WANT" > "$STAMP"
  # the kernels are optional C extensions: say so when they could not be built
  "$VENV/bin/python" -c "from tokenplane.cli.serve_cmd import kernels_note as n; \
m = n(); m and print(m)" >&2 || true
fi
export PATH="$VENV/bin:$PATH"
