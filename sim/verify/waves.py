r"""Waveform dumps: what is in them, and the GTKWave save file that shows the tensor engine.

A simulation run with ``WAVES=1`` (or ``--waves``) writes FST: Icarus through cocotb's dump
module, Verilator through its own FST writer (VCD where ``liblz4-dev`` is missing; see
:func:`sim.runner.run`). In both, the names are Amaranth's, one scope per module:

* the top scope is the component's name as the runner elaborated it: ``run(name=...)``, else
  the class name in snake case (``TensorEngine`` → ``tensor_engine``). Verilator's dump also
  has a scope ``$rootio`` beside it with the top-level ports again (the same values);
* each Amaranth submodule is a scope under its parent, named as in ``m.submodules``
  (``tensor_engine.array.pe_1_0.add``);
* a port or signal keeps its Python name (``busy``, ``loader.row``, ``meta``); a stream port's
  members are ``<port>__valid``, ``<port>__ready``, ``<port>__payload``, a memory port's
  ``<port>__addr``, ``<port>__data``, ``<port>__en``; the registers of a ``hdl.pipeline.delay``
  line are ``<name>_d1``, ``<name>_d2``, …;
* a struct field or array element is a signal of its own, ``<signal>.<field>`` or
  ``<signal>[i]`` (``cmd__payload.op``, ``meta.valid``, ``wr__data[0]``), besides the whole
  vector. In Verilog these are escaped identifiers, and Icarus keeps the escape in the dump
  (``\cmd__payload.op``) where Verilator drops it;
* a name used twice in one module gets a ``$<number>`` suffix (``result$93``); Yosys' own
  wires are ``$<number>`` or ``$auto$…``: skip those.

pywellen reads a 1-bit VCD variable named ``x[i]`` as bit i of a vector ``x`` (how some
simulators dump a vector bit by bit), so in a VCD a 1-bit array element loses its index; wider
elements and FST dumps keep their names. The dumps of the tensor engine, SRU, PE column and
collective ring have no 1-bit array elements.

:func:`signals` lists a dump's signals, :func:`changes` and :func:`rising_edges` read their
values; the dumps are read with pywellen (the Rust ``wellen`` reader behind the Surfer viewer:
FST, VCD). :func:`write_gtkw` writes ``docs/waves/tensor_engine.gtkw`` from a dump with pyvcd's
``GTKWSave`` (``python -m sim.verify.waves DUMP [OUT]``); :func:`gtkwave_command` says how to open a
dump.
"""

from __future__ import annotations

import io
import itertools
import re
import shlex
import sys
from pathlib import Path

import pywellen
from vcd.gtkw import GTKWSave

__all__ = ["TENSOR_ENGINE_GTKW", "open_dump", "wave_format", "signals", "changes",
           "rising_edges", "verilog_fields", "find_verilog",
           "engine_scope", "tensor_engine_traces", "gtkw_text", "write_gtkw", "gtkw_signals",
           "missing_signals", "save_file_for", "gtkwave_command"]

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The committed save file, for the 2x2 engine (``nclite gemm --array 2``).
TENSOR_ENGINE_GTKW = REPO_ROOT / "docs" / "waves" / "tensor_engine.gtkw"


# --- What is in a dump: read with pywellen (the wellen reader behind the Surfer viewer) -----


def open_dump(path: Path | str | pywellen.Waveform) -> pywellen.Waveform:
    """Open a dump (FST, VCD or GHW) with pywellen.

    Parameters
    ----------
    path : Path or str
        The dump; or a dump opened already, returned as it is (so that the readers below
        can share one opening).

    Returns
    -------
    pywellen.Waveform
        Its hierarchy; the values are read on demand.

    Raises
    ------
    ValueError
        If the file is no dump pywellen can read, or is incomplete (was the simulation ended
        cleanly?).
    """
    if isinstance(path, pywellen.Waveform):
        return path
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no dump {path} (a run with --waves or WAVES=1 writes one)")
    try:
        return pywellen.Waveform(str(path))
    except RuntimeError as exc:  # pywellen's one error type
        raise ValueError(f"{path}: not a readable FST or VCD dump: {exc}") from exc


def wave_format(path: Path | str) -> str:
    """The format of a dump, from its contents (not its name).

    Parameters
    ----------
    path : Path or str
        The dump.

    Returns
    -------
    str
        ``"fst"`` or ``"vcd"`` (``"ghw"`` for GHDL's format, which no simulator here writes).
    """
    return open_dump(path).file_format.lower()


def _dump_vars(dump: pywellen.Waveform) -> dict[str, pywellen.Var]:
    """Every variable of ``dump`` by full dotted name, as the simulator wrote it.

    wellen turns an array element ``x[0]`` into a variable ``[0]`` of a scope ``x`` of type
    ``vhdl_array`` (and ``x[0].data`` into ``[0].data``); its ``full_name`` then reads
    ``x.[0]``. The names are joined here without that dot, as in the dump.
    """
    out: dict[str, pywellen.Var] = {}

    def walk(scope, prefix: str) -> None:
        name = prefix + scope.name
        sep = "" if scope.scope_type == "vhdl_array" else "."
        for var in scope.vars():
            out[name + sep + var.name] = var
        for sub in scope.scopes():
            walk(sub, name + sep)

    for var in dump.vars():
        out[var.name] = var
    for scope in dump.scopes():
        walk(scope, "")
    return out


def signals(path: Path | str) -> dict[str, int]:
    """Every signal of a dump and its width.

    Parameters
    ----------
    path : Path or str
        The dump (FST or VCD).

    Returns
    -------
    dict of str to int
        Full dotted name (``tensor_engine.array.pe_0_0.x_in.op.sig``, without the bit range) →
        width in bits.
    """
    return {name: var.bitwidth for name, var in _dump_vars(open_dump(path)).items()}


#: A value as pywellen reads it: an int when every bit is 0 or 1, else a string of the bits
#: (``"x"``, ``"z"``, ``"xx01"``), msb first.
Value = int | str


def _lookup(vars_: dict[str, pywellen.Var], names) -> list[pywellen.Var]:
    missing = [n for n in names if n not in vars_]
    if missing:
        raise KeyError(f"no signal {missing} in the dump")
    return [vars_[n] for n in names]


def _changes(dump: pywellen.Waveform, vars_: dict[str, pywellen.Var],
             names: list[str]) -> dict[str, list[tuple[int, Value]]]:
    wanted = _lookup(vars_, names)
    by_signal: dict[str, list[str]] = {}  # aliases (two names, one signal) share an id
    for name, var in zip(names, wanted, strict=True):
        by_signal.setdefault(str(var.signal_ref), []).append(name)
    out: dict[str, list[tuple[int, Value]]] = {name: [] for name in names}

    def record(time: int, signal, value: Value) -> None:
        for name in by_signal.get(str(signal), ()):
            out[name].append((time, value))

    dump.stream_changes(record, wanted)
    return out


def changes(path: Path | str, names) -> dict[str, list[tuple[int, Value]]]:
    """Every change of some signals of a dump.

    Parameters
    ----------
    path : Path or str
        The dump.
    names : iterable of str
        Full dotted names, as :func:`signals` gives them.

    Returns
    -------
    dict of str to list of (int, Value)
        Per name, its (time, new value) pairs in time order, the time in the dump's own
        unit (``open_dump(path).timescale``: 1 ps for this project's dumps), the first at
        the time the signal is first dumped.

    Raises
    ------
    KeyError
        If a name is not in the dump.
    """
    dump = open_dump(path)
    return _changes(dump, _dump_vars(dump), list(names))


def rising_edges(path: Path | str, clock: str, names) -> list[tuple[int, dict[str, Value]]]:
    """What the flip-flops clocked by ``clock`` see: some signals at each rising edge.

    Parameters
    ----------
    path : Path or str
        The dump.
    clock : str
        The clock's full name (``tensor_engine.clk``).
    names : iterable of str
        The signals to read.

    Returns
    -------
    list of (int, dict of str to Value)
        Per rising edge of ``clock`` (a change to 1 from 0, ``x`` or ``z``, as Verilog's
        ``posedge``; not its first value), its time and each signal's value one time unit
        before it: the value the edge samples, not the one it, or a testbench reacting to it,
        sets.

    Raises
    ------
    KeyError
        If a name is not in the dump.
    """
    dump = open_dump(path)
    vars_ = _dump_vars(dump)
    names = list(names)
    edges = [t for (_, before), (t, now) in itertools.pairwise(_changes(dump, vars_,
                                                                        [clock])[clock])
             if now == 1 and before != 1]
    sigs = [var.signal for var in _lookup(vars_, names)]
    return [(t, {n: s.value_at(t - 1) for n, s in zip(names, sigs, strict=True)})
            for t in edges]


# --- Struct fields: slices of plain vectors, the same in every simulator ------------------

# A struct field or array element is an escaped Verilog identifier (\cmd__payload.op), which
# Icarus' dump keeps with its backslash and Verilator's drops, so a save file that names it
# would fit only one of them. The save file names the plain vector instead (cmd__payload),
# with the field's bits, read from Amaranth's Verilog:
# ``assign \cmd__payload.op = cmd__payload[0];``.
_MODULE = re.compile(r"^module\s+(\\\S+|[A-Za-z_]\w*)\s*\(", re.MULTILINE)
_FIELD = re.compile(r"^\s*assign\s+\\(\S+)\s+=\s+([A-Za-z_]\w*)(?:\[(\d+)(?::(\d+))?\])?;",
                    re.MULTILINE)
_PLAIN = re.compile(r"[A-Za-z_]\w*")


def verilog_fields(verilog_path: Path | str) -> dict[str, tuple[str, int, int]]:
    """Each struct field or array element of the design that Amaranth's Verilog assigns from a
    plain vector: full name → (the vector's full name, msb, lsb). A module's fields are named
    at each scope path its instances have below a top module (one no other module instantiates:
    ``tensor_engine.array.pe_0_0`` for an instance ``pe_0_0`` of a PE module the array holds,
    whether Amaranth named that module after the path or :mod:`hdl.instances` shares it)."""
    from sim.runner import verilog_hierarchy

    text = Path(verilog_path).read_text()
    fields: dict[str, list[tuple[str, str, int, int]]] = {}
    starts = list(_MODULE.finditer(text)) + [None]
    for here, nxt in zip(starts, starts[1:], strict=False):
        body = text[here.end():nxt.start() if nxt else len(text)]
        own = fields.setdefault(here[1].lstrip("\\"), [])
        for m in _FIELD.finditer(body):
            if m[3] is None:
                continue  # a whole vector: not a slice
            hi = int(m[3])
            own.append((m[1], m[2], hi, int(m[4]) if m[4] else hi))
    hierarchy = verilog_hierarchy(text)
    below = {sub for insts in hierarchy.values() for sub in insts.values()}
    scopes = [(top, top) for top in hierarchy if top not in below]
    out: dict[str, tuple[str, int, int]] = {}
    while scopes:
        module, scope = scopes.pop()
        for field, vector, hi, lo in fields.get(module, ()):
            out[f"{scope}.{field}"] = (f"{scope}.{vector}", hi, lo)
        scopes += [(sub, f"{scope}.{inst}") for inst, sub in hierarchy.get(module, {}).items()]
    return out


def find_verilog(dump_path: Path | str) -> Path:
    """The elaborated Verilog of a dump written by :func:`sim.runner.run`: the dump is
    ``build/sim/<name>-<hash>/runs/<run>/<file>``, the Verilog ``build/sim/<name>-<hash>/<name>.v``
    (the runner's ``<name>.icarus.v`` differs only in an ``initial`` block)."""
    dump_path = Path(dump_path).resolve()
    for parent in dump_path.parents[:3]:
        found = [v for v in parent.glob("*.v") if not v.name.endswith(".icarus.v")]
        if len(found) == 1:
            return found[0]
    raise FileNotFoundError(f"no elaborated Verilog (<name>.v) above {dump_path}; "
                            "pass it explicitly")


# --- The tensor engine's save file ---------------------------------------------------------

#: A trace: (full Amaranth name, display format, alias or None).
Trace = tuple[str, str, "str | None"]


def _numbered(names, prefix: str) -> list[int]:
    return sorted(int(m[1]) for name in names
                  if (m := re.fullmatch(re.escape(prefix) + r"(\d+)", name)))


def _array_size(names, scope: str) -> int:
    n = 0
    while f"{scope}.array.pe_{n}_0.psum_out" in names:
        n += 1
    return n


_ENGINE_MARK = ".array.pe_0_0.psum_out"


def engine_scope(names) -> str | None:
    """The scope of the one tensor engine among ``names`` (``tensor_engine`` when it is the
    design; the scope path of a core's engine), None if there is none; ValueError if several."""
    scopes = sorted(name[:-len(_ENGINE_MARK)] for name in names if name.endswith(_ENGINE_MARK))
    if len(scopes) > 1:
        raise ValueError(f"several tensor engines in the dump: {scopes}; choose a scope")
    return scopes[0] if scopes else None


def _engine_scope(names, scope: str | None) -> str:
    scope = scope or engine_scope(names)
    if scope is None:
        raise ValueError("no tensor engine in the dump (no <scope>.array.pe_0_0.psum_out)")
    return scope


def tensor_engine_traces(names, scope: str | None = None) -> list[tuple[str, list[Trace]]]:
    """The groups of traces that show a tensor engine's systolic wavefront, for a dump whose
    signals are ``names``. The engine's scope (default: :func:`engine_scope`), the array size
    and the pipeline depths are read from the names: ``n`` from the PEs
    ``array.pe_<k>_<m>``, ``add_stages`` from the registers of row 1's input skew
    (``array.x_row1_d<i>``), the array's latency from the metadata delay line
    (``meta_d<i>``, then ``psum.meta``), which carries each moving column's ``valid`` beside
    the array; the
    loader, mover and PSUM are the engine's submodules ``loader``, ``mover`` and ``psum``."""
    names = set(names)
    scope = _engine_scope(names, scope)
    t, a = f"{scope}.", f"{scope}.array."
    n = _array_size(names, scope)
    add_stages = max(_numbered(names, f"{a}x_row1_d"), default=0)
    # n*add + mul + n - 1: the delay line stops a cycle short (PSUM reads ahead of the sums)
    # and PSUM's `meta` register is its last tap.
    latency = max(_numbered(names, f"{t}meta_d"), default=0) + 1
    write_delay = max(_numbered(names, f"{t}psum.meta_w_d"), default=0)  # add_stages
    if not n or (n > 1 and not add_stages) or latency < 2 or not write_delay:
        raise ValueError(f"the dump does not look like a tensor engine's under {scope!r}")

    def meta(d: int) -> str:
        """The metadata delayed d cycles beside the array (1 <= d <= latency)."""
        return f"{t}meta_d{d}" if d < latency else f"{t}psum.meta"

    def sum_delay(k: int, m: int) -> int:
        # A column taken into the issue register (mover.x) reaches PE (k, m)'s input after
        # k * add_stages + m cycles and its psum_out mul_stages + add_stages cycles later:
        # latency - (n-1-k) * add_stages - (n-1-m). PE (n-1, n-1)'s is the array's latency.
        return latency - (n - 1 - k) * add_stages - (n - 1 - m)

    def stream(port: str, payload: list[Trace]) -> list[Trace]:
        return [(f"{t}{port}__valid", "bin", f"{port} valid"),
                (f"{t}{port}__ready", "bin", f"{port} ready"), *payload]

    groups: list[tuple[str, list[Trace]]] = [
        ("clock and state", [(f"{t}clk", "bin", None), (f"{t}rst", "bin", None),
                             (f"{t}busy", "bin", None), (f"{t}error", "bin", None)]),
        ("cmd stream", stream("cmd", [
            (f"{t}cmd__payload.{fld}", "dec", f"cmd {fld}")
            for fld in ("op", "k", "m", "f", "bank", "addr", "accumulate")])),
        ("weights stream: stationary rows", stream("weights", [
            (f"{t}weights__payload[{j}]", "hex", f"weights[{j}]") for j in range(n)])
         + [(f"{t}loader.next_row", "dec", "loader row")]),
        ("moving stream: moving columns", stream("moving", [
            (f"{t}moving__payload[{i}]", "hex", f"moving[{i}]") for i in range(n)])
         + [(f"{t}mover.col", "dec", "mover column")]),
        ("issue register: a column, all rows at once", [
            (f"{t}mover.meta.valid", "bin", "column valid"),
            (f"{t}mover.x[0].swap", "bin", "swap (new weights)")]
         + [(f"{t}mover.x[{k}].data", "hex", f"x[{k}] row {k}") for k in range(n)]),
    ]
    for k in range(n):
        # The PEs' operands arrive decoded (the array decodes at its edge): the significand
        # shows each operand as it passes (sig: 8 bits, 0x80 for powers of two).
        traces: list[Trace] = [(f"{a}pe_{k}_0.x_in.op.sig", "hex",
                                f"row {k} x_in significand (skewed)")]
        for m in range(n):
            d = sum_delay(k, m)
            traces += [(f"{meta(d)}.valid", "bin", f"pe_{k}_{m} sum valid (meta, {d} cycles)"),
                       (f"{a}pe_{k}_{m}.psum_out", "hex", f"pe_{k}_{m} psum_out")]
        groups.append((f"row {k}: skewed operand, partial sums", traces))
    groups += [
        ("array result (deskewed)", [(f"{meta(latency)}.valid", "bin",
                                      f"result valid (meta, {latency} cycles)")]
         + [(f"{a}result[{m}]", "hex", f"result[{m}]") for m in range(n)]),
        ("PSUM write", [(f"{t}psum.meta_w_d{write_delay}.valid", "bin", "write valid"),
                        (f"{t}psum.meta_w_d{write_delay}.accumulate", "bin", "accumulate"),
                        (f"{t}psum.wr__en", "bin", "wr en (partitions)"),
                        (f"{t}psum.wr__addr", "dec", "wr addr (bank*words+word)")]
         + [(f"{t}psum.wr__data[{m}]", "hex", f"wr data[{m}]") for m in range(n)]),
    ]
    return groups


def _gtkw_name(name: str, widths: dict[str, int],
               fields: dict[str, tuple[str, int, int]]) -> str:
    """How the save file names ``name``: a plain signal as itself (``top.sig[7:0]`` for a
    vector), a struct field as its bits of the plain vector (``(n)top.vec[w-1:0]``, GTKWave's
    notation for bit n counted from the msb)."""
    if name not in fields and name in widths and _PLAIN.fullmatch(name.rsplit(".", 1)[1]):
        width = widths[name]
        return name + (f"[{width - 1}:0]" if width > 1 else "")
    if name not in fields:
        raise ValueError(f"{name} is neither a plain signal in the dump nor a field "
                         "the Verilog assigns from one")
    vec, hi, lo = fields[name]
    width = widths.get(vec)
    if width is None or not _PLAIN.fullmatch(vec.rsplit(".", 1)[1]) or hi >= width:
        raise ValueError(f"{name} = {vec}[{hi}:{lo}], which the dump does not hold")
    full = vec + (f"[{width - 1}:0]" if width > 1 else "")
    if width == 1:
        return full
    bits = " ".join(f"({width - 1 - b}){full}" for b in range(hi, lo - 1, -1))
    return bits if hi == lo else f"#{{{name}}} {bits}"


def gtkw_text(names: dict[str, int], fields: dict[str, tuple[str, int, int]],
              scope: str | None = None) -> str:
    """The save file's text for a dump whose signals (name → width) are ``names``, with the
    design's struct fields ``fields`` (:func:`verilog_fields`)."""
    scope = _engine_scope(names, scope)
    groups = tensor_engine_traces(names, scope)
    n = _array_size(names, scope)
    buf = io.StringIO()
    save = GTKWSave(buf)
    save.comment(f"The systolic wavefront of a {n}x{n} tensor engine (scope {scope}), for its "
                 "dumps from Icarus or Verilator: gtkwave <dump> <this file>.",
                 "Generated by sim/verify/waves.py (python -m sim.verify.waves DUMP OUT): "
                 "do not edit.")
    # About 0.5 ns per pixel: the whole of `nclite gemm --array 2 --m 2 --k 2 --n 4` fits.
    save.size(1600, 1250)
    save.zoom_markers(zoom=-16.0)
    save.signals_width(270)
    save.sst_expanded(False)
    for title, traces in groups:
        with save.group(title):
            for name, fmt, alias in traces:
                save.trace(_gtkw_name(name, names, fields), alias=alias, datafmt=fmt)
    return buf.getvalue()


def write_gtkw(dump_path: Path | str, out_path: Path | str = TENSOR_ENGINE_GTKW, *,
               verilog: Path | str | None = None, scope: str | None = None) -> Path:
    """Write a GTKWave save file that shows the tensor engine's systolic wavefront.

    The traces — clock, the command, weights and moving stream handshakes, the issue register,
    each row's skewed operand, every PE's partial sum with the ``valid`` of its column, the
    deskewed result and the PSUM write — are checked against ``dump_path``'s signals, which
    also give the array size and the engine's scope (or ``scope``). Struct fields are given as
    bits of plain vectors, read from ``verilog`` (default: :func:`find_verilog`), so that one
    file fits the dumps of both simulators. The file names no dump, and fits every dump of an
    engine with the same parameters: ``gtkwave <dump> <out_path>``.
    """
    names = signals(dump_path)
    fields = verilog_fields(verilog or find_verilog(dump_path))
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(gtkw_text(names, fields, scope))
    return out_path


def gtkw_signals(gtkw_path: Path | str) -> dict[str, int]:
    """The signals a save file names: name (without bit range) → the width it expects."""
    out: dict[str, int] = {}
    for line in Path(gtkw_path).read_text().splitlines():
        if line[:1] in ("[", "@", "*", "-", ""):
            continue
        line = re.sub(r"^\+\{[^}]*\}\s*", "", line)
        line = re.sub(r"^#\{[^}]*\}\s*", "", line)
        for ref in line.split():
            m = re.fullmatch(r"(?:\((\d+)\))?([^\[\s]+)(?:\[(\d+):0\])?", ref)
            if m is None:
                raise ValueError(f"cannot read {ref!r} in {gtkw_path}")
            width = int(m[3]) + 1 if m[3] else 1
            if m[1] is not None and int(m[1]) >= width:
                raise ValueError(f"bit {m[1]} of a {width}-bit vector in {gtkw_path}")
            out[m[2]] = width
    return out


def missing_signals(gtkw_path: Path | str, names: dict[str, int]) -> list[str]:
    """The signals that ``gtkw_path`` names but a dump with signals ``names`` lacks (or holds
    with another width): GTKWave would leave their traces out without a word."""
    return [f"{name} ({width} bits)" for name, width in gtkw_signals(gtkw_path).items()
            if names.get(name) != width]


def save_file_for(dump_path: Path | str) -> Path | None:
    """The save file to open a dump with: ``docs/waves/tensor_engine.gtkw`` if the dump holds a
    tensor engine that file fits (the 2x2 engine of ``nclite gemm --array 2``), else one
    written beside the dump for its engine (``<dump>.gtkw``); None without a tensor engine."""
    dump_path = Path(dump_path)
    names = signals(dump_path)
    if engine_scope(names) is None:
        return None
    if TENSOR_ENGINE_GTKW.exists() and not missing_signals(TENSOR_ENGINE_GTKW, names):
        return TENSOR_ENGINE_GTKW
    return write_gtkw(dump_path, dump_path.with_name(dump_path.name + ".gtkw"))


def gtkwave_command(dump_path: Path | str, save_file: Path | str | None = None) -> str:
    """The shell command that opens a dump in GTKWave, with :func:`save_file_for`'s save file
    (or ``save_file``), e.g. ``gtkwave build/sim/.../dump.fst docs/waves/tensor_engine.gtkw``.
    Paths under the working directory are shown relative to it. Never raises for a dump it
    cannot read: the command then names the dump alone."""
    dump_path = Path(dump_path)
    if save_file is None:
        try:
            save_file = save_file_for(dump_path)
        except (OSError, ValueError):
            save_file = None
    from sim.runner import shown_path

    args = [dump_path] + ([Path(save_file)] if save_file is not None else [])
    return shlex.join(["gtkwave", *map(shown_path, args)])


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.verify.waves DUMP [OUT.gtkw]``: write the tensor engine's save file."""
    argv = sys.argv[1:] if argv is None else argv
    if not 1 <= len(argv) <= 2 or argv[0].startswith("-"):
        print("usage: python -m sim.verify.waves DUMP [OUT.gtkw]  (default OUT: "
              "docs/waves/tensor_engine.gtkw)", file=sys.stderr)
        return 2
    out = write_gtkw(argv[0], *argv[1:2])
    print(f"wrote {out}; open with: {gtkwave_command(argv[0], out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
