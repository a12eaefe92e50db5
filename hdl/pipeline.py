"""Shift-register delay lines, shared by the pipelined components."""

from amaranth.hdl import Signal

__all__ = ["delay", "shift_in"]


def delay(m, value, cycles: int, *, name: str, en=None):
    """``value`` delayed by ``cycles`` registers in ``m``'s ``sync`` domain (0: ``value``).

    The registers advance only while ``en`` is 1 (always, if ``en`` is None). They are named
    ``{name}_d1``, ``{name}_d2``, … so that waveforms show the pipeline.
    """
    # lab5 begin: delay
    for i in range(cycles):
        reg = Signal.like(value, name=f"{name}_d{i + 1}")
        if en is None:
            m.d.sync += reg.eq(value)
        else:
            with m.If(en):
                m.d.sync += reg.eq(value)
        value = reg
    return value
    # lab5 end: delay


def shift_in(regs, value):
    """The statements that move a shift register ``regs`` on by one: ``regs[0]`` takes
    ``value``, ``regs[k]`` takes ``regs[k − 1]`` (add them to ``sync`` under any condition)."""
    return [regs[0].eq(value), *(b.eq(a) for a, b in zip(regs, regs[1:], strict=False))]
