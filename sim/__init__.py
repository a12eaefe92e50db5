"""nclite's simulation side: runner, testbenches, host software, CLI.

Importing it turns on Python's bytecode cache in ``build/pycache``
(:func:`sim.toolchain.cache_bytecode`), for this process and the simulators it starts.
"""

from sim.toolchain import cache_bytecode

cache_bytecode()
