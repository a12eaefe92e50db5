"""Checks of the build-time parameters of the components, one wording for all of them.

Every component checks its parameters in its constructor, so a bad one fails where it is
given, with a message that names it, as Amaranth's own constructors do::

    lanes must be an integer between 1 and 256, not 0

A value of the wrong type (not an ``int``, or a ``bool``) raises :class:`TypeError`; an integer
outside the legal values raises :class:`ValueError`. Both give the same message: what the
parameter must be, then the value given. Each check returns the value, so a constructor can
write ``self.lanes = check_int("lanes", lanes, lo=1, hi=256)``.
"""

__all__ = ["check_int", "check_one_of", "check_power_of_two"]


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _fail(name: str, value, what: str, note: str | None, exc: type[Exception]):
    note = f" {note}" if note else ""
    raise exc(f"{name} must be {what}{note}, not {value!r}")


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _describe_range(lo: int | None, hi: int | None) -> str:
    if lo is not None and lo == hi:
        return str(lo)
    if hi is None:
        return {None: "an integer", 0: "a non-negative integer",
                1: "a positive integer"}.get(lo, f"an integer >= {lo}")
    if lo is None:
        return f"an integer <= {hi}"
    return f"an integer between {lo} and {hi}"


def check_int(name: str, value, *, lo: int | None = None, hi: int | None = None,
              also: tuple[int, ...] = (), note: str | None = None) -> int:
    """Check that ``value`` is an integer in ``lo .. hi`` (both included) or in ``also``.

    Parameters
    ----------
    name : str
        The parameter's name, the start of the message.
    value : object
        The value given.
    lo, hi : int or None
        The smallest and the largest legal value; ``None``: no bound on that side.
    also : tuple of int
        Further legal values outside ``lo .. hi`` (e.g. ``(0,)`` for "0: turned off"); the
        message names them first: "0 or an integer between 16 and 1024".
    note : str or None
        Appended to the description of the legal values, e.g. ``"(bit times)"``.

    Returns
    -------
    int
        ``value``.

    Raises
    ------
    TypeError
        If ``value`` is not an ``int``, or is a ``bool``.
    ValueError
        If ``value`` is an integer outside ``lo .. hi`` and not in ``also``.

    The message: ``"<name> must be <what><note>, not <value!r>"``, where ``<what>`` is
    "a positive integer" (``lo`` = 1, no ``hi``), "a non-negative integer" (``lo`` = 0),
    "an integer >= lo", "an integer <= hi", "an integer between lo and hi" or just ``lo``
    (``lo`` = ``hi``), preceded by the values of ``also``.
    """
    what = _join([*(str(v) for v in also), _describe_range(lo, hi)])
    if not _is_int(value):
        _fail(name, value, what, note, TypeError)
    if value not in also and ((lo is not None and value < lo)
                              or (hi is not None and value > hi)):
        _fail(name, value, what, note, ValueError)
    return value


def check_one_of(name: str, value, allowed, *, note: str | None = None) -> int:
    """Check that ``value`` is an integer among ``allowed`` (a tuple of ints).

    Message: ``"<name> must be one of <allowed><note>, not <value!r>"``.

    Raises
    ------
    TypeError
        If ``value`` is not an ``int``, or is a ``bool``.
    ValueError
        If ``value`` is not in ``allowed``.
    """
    what = f"one of {tuple(allowed)}"
    if not _is_int(value):
        _fail(name, value, what, note, TypeError)
    if value not in allowed:
        _fail(name, value, what, note, ValueError)
    return value


def check_power_of_two(name: str, value, *, lo: int = 1, hi: int | None = None,
                       note: str | None = None) -> int:
    """Check that ``value`` is a power of two in ``lo .. hi`` (``hi`` = ``None``: no bound).

    Message: ``"<name> must be a power of two[, at least lo][, at most hi]<note>, not
    <value!r>"``.

    Raises
    ------
    TypeError
        If ``value`` is not an ``int``, or is a ``bool``.
    ValueError
        If ``value`` is not a power of two, or is outside ``lo .. hi``.
    """
    what = "a power of two"
    if lo > 1:
        what += f", at least {lo}"
    if hi is not None:
        what += f", at most {hi}"
    if not _is_int(value):
        _fail(name, value, what, note, TypeError)
    if value < lo or value & (value - 1) or (hi is not None and value > hi):
        _fail(name, value, what, note, ValueError)
    return value
