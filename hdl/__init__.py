"""nclite's hardware: Amaranth components (the design)."""

# In a lab's scratch copy, a stub's error that nothing catches is one line (sim.tools.lab_stub).
from pathlib import Path as _Path

if (_Path(__file__).resolve().parents[1] / ".nclite-lab").is_file():
    from sim.tools.lab_stub import install_excepthook

    install_excepthook()
