def xorwow_step(state):
    """One XORWOW step of ``state`` (a :data:`XorwowState` view).

    Returns ``(next_state, output)`` as Amaranth values: ``next_state`` is laid out as
    :data:`XorwowState`, ``output`` is the 32-bit result ``v[4]' + d'``. Pure logic: XORs,
    constant shifts and two 32-bit adders.
    """
    # TODO(lab3): one step of the generator in golden/prng.py (its module docstring and
    # LanePRNG.next_u32), bit for bit: every word is a uint32, all arithmetic mod 2**32.
    # state.v[0] .. state.v[4] and state.d are 32-bit values; XorwowState puts v[0] in
    # bits 0-31, ..., v[4] in bits 128-159 and d in bits 160-191 of the state.
    raise NotImplementedError("lab 3: the XORWOW step in hdl/xorwow.py "
                              "(docs/labs/lab3-stochastic-rounding/README.md)")
