"""Hardware-course labs: their definitions, scratch copies with the exercises stubbed out, checks.

Each lab is a directory ``docs/labs/lab<N>-<slug>/`` with the text (``README.md``), pictures,
stub files and ``lab.toml``::

    title = "Floating point and the PE"
    check = ["tests/hdl/test_fp_mul_pysim.py::test_fp8_exhaustive", ...]   # make lab<N>-check
    fast = ["tests/hdl/test_fp_mul_pysim.py::test_fp8_exhaustive"]         # fails with the stubs
    [[exercise]]
    file = "hdl/fp_mul.py"      # holds the reference solution between two markers
    region = "unpack"
    stub = "stub_unpack.py"     # replaces the lines between the markers in a scratch copy

The reference solution is the project's own code, between comment lines
``# lab<N> begin: <region>`` and ``# lab<N> end: <region>``. :func:`start` copies the repository
to a scratch directory and puts each stub (re-indented to its begin marker) between the markers,
so the main tree stays complete; :func:`check_args` is what ``make lab<N>-check`` runs there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from sim.runner import REPO_ROOT
from sim.tools.lab_stub import MARKER, lab_copy, stub_message

__all__ = ["Exercise", "Hide", "Lab", "LabError", "labs", "get", "find_region", "stub_region",
           "apply_stubs", "hide_text", "apply_hides", "start", "check_args", "failure_summary",
           "lab_copy", "stub_message"]

LABS_DIR = Path("docs") / "labs"
# Never copied into a scratch copy (the venv is linked instead).
_EXCLUDE = {".git", ".venv", "build", "__pycache__", ".pytest_cache", ".ruff_cache"}
# MARKER (written into every scratch copy: ``--force`` deletes only a directory that holds
# it), lab_copy and stub_message live in sim.tools.lab_stub, which the copy's hdl/ and golden/
# import without the rest of sim/.


class LabError(Exception):
    """A lab that does not exist, a malformed definition or marker, a scratch dir in the way."""


@dataclass(frozen=True)
class Exercise:
    file: str
    region: str
    stub: str


@dataclass(frozen=True)
class Hide:
    """Code or text elsewhere in the tree that spells an exercise's answer out, left out of the
    scratch copy: a ``region`` between ``# lab<N> hide begin: <region>`` and ``# lab<N> hide
    end: <region>`` (replaced by a ``raise NotImplementedError("lab <N>: ...")``), an exact
    ``text`` (replaced by ``by``), or the ``whole`` file (its content replaced by ``by``: a
    generated file such as a wave viewer's save file, whose every line is the answer)."""

    file: str
    region: str | None = None
    text: str | None = None
    by: str = ""
    whole: bool = False


@dataclass(frozen=True)
class Lab:
    number: int
    slug: str
    title: str
    path: Path  # the lab's directory, relative to the repository root
    check: tuple[str, ...]
    fast: tuple[str, ...]
    exercises: tuple[Exercise, ...]
    hides: tuple[Hide, ...] = ()

    @property
    def markers(self) -> list[tuple[str, str]]:
        return [(f"# lab{self.number} begin: {e.region}", f"# lab{self.number} end: {e.region}")
                for e in self.exercises]

    def as_dict(self) -> dict:
        return {"number": self.number, "slug": self.slug, "title": self.title,
                "text": str(self.path / "README.md"), "check": list(self.check),
                "fast": list(self.fast),
                "exercises": [{"file": e.file, "region": e.region,
                               "stub": str(self.path / e.stub)} for e in self.exercises]}


def _load(path: Path, root: Path) -> Lab:
    m = re.fullmatch(r"lab(\d+)-([a-z0-9-]+)", path.name)
    if not m:
        raise LabError(f"{path}: a lab directory is named lab<N>-<slug>")
    try:
        data = tomllib.loads((path / "lab.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LabError(f"{path / 'lab.toml'}: {exc}") from exc
    try:
        exercises = tuple(Exercise(e["file"], e["region"], e["stub"])
                          for e in data["exercise"])
        hides = tuple(Hide(h["file"], h.get("region"), h.get("text"), h.get("by", ""),
                           h.get("whole", False))
                      for h in data.get("hide", ()))
        lab = Lab(int(m[1]), m[2], data["title"], path.relative_to(root),
                  tuple(data["check"]), tuple(data.get("fast", ())), exercises, hides)
    except (KeyError, TypeError) as exc:
        raise LabError(f"{path / 'lab.toml'}: missing or malformed key {exc}") from exc
    if not lab.check or not lab.exercises:
        raise LabError(f"{path / 'lab.toml'}: a lab needs `check` tests and an [[exercise]]")
    if not set(lab.fast) <= set(lab.check):
        raise LabError(f"{path / 'lab.toml'}: every `fast` test must also be in `check`")
    if any([h.region is not None, h.text is not None, h.whole is True].count(True) != 1
           for h in lab.hides):
        raise LabError(f"{path / 'lab.toml'}: a [[hide]] names a `region`, a `text` or "
                       "`whole = true`, one of them")
    return lab


def labs(root: Path = REPO_ROOT) -> dict[int, Lab]:
    """Every lab under ``docs/labs/``, by number."""
    found: dict[int, Lab] = {}
    for path in sorted((root / LABS_DIR).glob("lab*-*")):
        if (path / "lab.toml").exists():
            lab = _load(path, root)
            if lab.number in found:
                raise LabError(f"two labs numbered {lab.number}: {found[lab.number].path}, "
                               f"{lab.path}")
            found[lab.number] = lab
    return found


def get(number: int, root: Path = REPO_ROOT) -> Lab:
    all_labs = labs(root)
    if number not in all_labs:
        raise LabError(f"there is no lab {number}; the labs are "
                       + ", ".join(f"{n} ({lab.title})" for n, lab in all_labs.items()))
    return all_labs[number]


def find_region(text: str, begin: str, end: str, where: str) -> tuple[int, int, str]:
    """(index of the begin marker line, index of the end marker line, indentation)."""
    lines = text.splitlines()
    b = [i for i, line in enumerate(lines) if line.strip() == begin]
    e = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(b) != 1 or len(e) != 1:
        raise LabError(f"{where}: expected one `{begin}` and one `{end}` line, found "
                       f"{len(b)} and {len(e)}")
    if not b[0] < e[0]:
        raise LabError(f"{where}: `{end}` comes before `{begin}`")
    indent = lines[b[0]][:len(lines[b[0]]) - len(lines[b[0]].lstrip())]
    return b[0], e[0], indent


def stub_region(text: str, lab: Lab, ex: Exercise, stubs_root: Path = REPO_ROOT) -> str:
    """``text`` (the source of ``ex.file``) with ``ex``'s region replaced by its stub."""
    begin, end = lab.markers[lab.exercises.index(ex)]
    b, e, indent = find_region(text, begin, end, ex.file)
    stub = (stubs_root / lab.path / ex.stub).read_text().rstrip("\n").splitlines()
    lines = text.splitlines()
    lines[b + 1:e] = [indent + line if line.strip() else "" for line in stub]
    return "\n".join(lines) + "\n"


def apply_stubs(lab: Lab, tree: Path, stubs_root: Path = REPO_ROOT,
                regions=None) -> list[str]:
    """Replace each exercise region of ``lab`` in ``tree`` with its stub; returns the files.

    ``regions``: the names of the regions to stub (default: all of them).
    """
    changed = []
    for ex in lab.exercises:
        if regions is not None and ex.region not in regions:
            continue
        target = tree / ex.file
        target.write_text(stub_region(target.read_text(), lab, ex, stubs_root))
        changed.append(ex.file)
    return changed


def hide_text(text: str, lab: Lab, hide: Hide) -> str:
    """``text`` (the source of ``hide.file``) without what ``hide`` leaves out of a copy."""
    if hide.whole:
        return hide.by
    if hide.text is not None:
        if text.count(hide.text) != 1:
            raise LabError(f"{hide.file}: lab {lab.number}'s hidden text is there "
                           f"{text.count(hide.text)} times, not once: {hide.text[:60]!r}")
        return text.replace(hide.text, hide.by)
    begin = f"# lab{lab.number} hide begin: {hide.region}"
    end = f"# lab{lab.number} hide end: {hide.region}"
    b, e, indent = find_region(text, begin, end, hide.file)
    lines = text.splitlines()
    lines[b + 1:e] = [f'{indent}raise NotImplementedError("lab {lab.number}: left out of this '
                      f"copy, as it spells the exercise's answer out; the main tree has it "
                      f'({hide.file}, {hide.region})")']
    return "\n".join(lines) + "\n"


def apply_hides(lab: Lab, tree: Path) -> list[str]:
    """Leave out of ``tree`` what ``lab``'s ``[[hide]]`` entries name; returns the files."""
    changed = []
    for hide in lab.hides:
        target = tree / hide.file
        target.write_text(hide_text(target.read_text(), lab, hide))
        changed.append(hide.file)
    return changed


def without_hides(toml_text: str) -> str:
    """A ``lab.toml``'s text without its ``[[hide]]`` tables (and the comments right above
    each): they quote what they leave out of a scratch copy, so the copy's lab.toml must not
    hold them. The rest (check, fast, exercises) is kept as written."""
    lines = toml_text.splitlines(keepends=True)

    def head(i: int) -> int:  # where table i's comment block starts
        while i > 0 and lines[i - 1].startswith("#"):
            i -= 1
        return i

    tables = [i for i, line in enumerate(lines) if line.startswith("[[")]
    drop: set[int] = set()
    for n, i in enumerate(tables):
        if lines[i].strip() == "[[hide]]":
            end = head(tables[n + 1]) if n + 1 < len(tables) else len(lines)
            drop.update(range(head(i), end))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    if drop:
        kept.append("\n# (This lab's [[hide]] entries quote what they leave out of a scratch "
                    "copy: not in the copy.)\n")
    return "".join(kept)


def _tracked_files(root: Path) -> list[Path]:
    """The repository's files: git's view when there is one (tracked or not ignored)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], cwd=root, capture_output=True,
                             check=True).stdout.decode()
        files = [Path(p) for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = [p.relative_to(root) for p in root.rglob("*") if p.is_file()]
    return [p for p in files
            if not (set(p.parts) & _EXCLUDE or p.parts[0].endswith(".egg-info"))
            and (root / p).is_file()]


def start(number: int, dest: Path | None = None, *, force: bool = False,
          root: Path = REPO_ROOT, regions=None) -> dict:
    """Copy the repository to ``dest`` with lab N's stubs in place.

    ``dest`` defaults to ``build/labs/lab<N>`` (``$NCLITE_LABS_DIR/lab<N>`` if that is set).
    ``regions`` names the regions to stub (default: all; tests use fewer, or none).
    """
    lab = get(number, root)
    if dest is None:  # NCLITE_LABS_DIR: where make docs-check puts its copies
        dest = Path(os.environ.get("NCLITE_LABS_DIR") or root / "build" / "labs") / f"lab{number}"
    dest = dest.resolve()
    home = root.resolve()
    if dest == home or dest in home.parents or (
            home in dest.parents and home / "build" not in dest.parents):
        # Inside the sources, pytest and git of the main tree would pick the copy up.
        raise LabError(f"{dest}: put a scratch copy outside the main tree's sources "
                       "(default: build/labs/lab<N>)")
    if dest.exists():
        if not force:
            raise LabError(f"{dest} exists; use --force to start over (your changes there are "
                           "lost) or --dir to choose another place")
        if not (dest / MARKER).is_file():
            raise LabError(f"{dest} is not a lab copy made by `nclite lab start` (no {MARKER} "
                           "in it): --force deletes only those; choose another --dir")
        shutil.rmtree(dest)
    for rel in _tracked_files(root):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    venv = root / ".venv"
    if venv.exists():
        os.symlink(venv, dest / ".venv")
    changed = apply_stubs(lab, dest, stubs_root=root, regions=regions)
    if regions is None:  # a copy for a student (tests stub fewer regions, and hide nothing)
        changed += [f for f in apply_hides(lab, dest) if f not in changed]
        toml = dest / lab.path / "lab.toml"
        toml.write_text(without_hides(toml.read_text()))
    (dest / MARKER).write_text(f"lab {number}: made by `nclite lab start {number}` from {home}\n")
    _git_init(dest, number)
    return {"lab": number, "title": lab.title, "dir": str(dest), "stubbed": changed,
            "text": str(dest / lab.path / "README.md"),
            "regions": [f"{e.file}: {b}" for e, (b, _) in zip(lab.exercises, lab.markers,
                                                               strict=True)],
            "check": f"cd {shlex.quote(str(dest))} && make lab{number}-check"}


def _git_init(dest: Path, number: int) -> None:
    """Make the copy a git repository with one commit, so ``git diff`` shows the student's work
    (skipped quietly where there is no git)."""
    ident = ["-c", "user.name=nclite lab", "-c", "user.email=lab@nclite.invalid",
             "-c", "commit.gpgsign=false"]
    try:
        for args in (["init", "-q"], ["add", "-A"],
                     [*ident, "commit", "-q", "-m", f"lab {number}: start"]):
            subprocess.run(["git", *args], cwd=dest, check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pass


def check_args(number: int, tree: Path, *, fast: bool = False, jobs: str = "auto",
               verbose: bool = False, junit: Path | None = None) -> list[str]:
    """The pytest command line of lab N's check, to run with ``tree`` as working directory.

    ``python -m pytest`` puts the working directory first on ``sys.path``, so the tree's own
    ``hdl/``, ``golden/`` and ``sim/`` are tested, not the main tree's installed ones. Without
    ``verbose`` no tracebacks (``--tb=no``): :func:`failure_summary` reads the failures from
    the ``junit`` XML instead.
    """
    lab = get(number, tree)
    tests = lab.fast if fast else lab.check
    out = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", jobs]
    if not verbose:
        out += ["--tb=no", "-rN"]  # no per-test summary lines: failure_summary says it
    if junit is not None:
        out += [f"--junitxml={junit}"]
    return out + list(tests)


def _nodeid(classname: str, name: str, tree: Path) -> str:
    """pytest's node id of a junit test case: the class name's longest prefix that is a file
    of ``tree`` is the module, the rest its classes (``tests.x.test_y.TestZ`` ->
    ``tests/x/test_y.py::TestZ::name``)."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        module = "/".join(parts[:i]) + ".py"
        if (tree / module).is_file():
            return "::".join([module, *parts[i:], name])
    return "/".join(parts) + ".py::" + name


def failure_summary(junit: Path, number: int, *, groups: int = 3, lines: int = 6,
                    tree: Path | None = None) -> list[str]:
    """What failed in a lab check, short: the failures grouped by their message's first line
    (numbers aside), each group's first test and the first lines of its message (the checks'
    own diagnosis: the seed, which sums, the hint), then how to rerun one and see everything.
    ``tree``: where the check ran (default: the working directory), for the tests' node ids.

    Returns no lines when nothing failed.
    """
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return [f"(no report in {junit}: see the output above)"]
    cases = root.iter("testcase")
    here = Path.cwd() if tree is None else Path(tree)  # (for the tests' node ids)
    failed, total = [], 0
    for case in cases:
        total += 1
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if bad is not None:
            nodeid = _nodeid(case.get("classname", ""), case.get("name", ""), here)
            # The report's text holds the whole message (its "message" attribute is cut at a
            # few lines): from the first line pytest marks with "E" to a traceback location.
            report = (bad.text or "").splitlines()
            first = next((i for i, line in enumerate(report) if line.startswith("E ")), None)
            marked = []
            for line in report[first:] if first is not None else ():
                if re.match(r"[\w/.-]+\.py:\d+", line):
                    break
                # pytest's own explanation of an assert's operands ("+  where 16 = <built-in
                # method count of list object at 0x7f...>(...)") is for -v, not the summary.
                if not re.match(r"E?\s*\+\s+(where|and)\b", line):
                    marked.append(line[4:])  # pytest's "E   " or its 4 spaces
            text = ("\n".join(marked) if marked else (bad.get("message") or "")).strip()
            failed.append((nodeid, text))
    if not failed:
        return []
    seed = os.environ.get("NCLITE_SEED", "1")
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for nodeid, text in failed:
        # A kind: the first line, and the check's diagnosis (a "likely:" line) if it has one,
        # numbers aside.
        said = text.splitlines() or ["(no message)"]
        kind = [said[0], *(ln for ln in said[1:] if ln.strip().startswith("likely:"))]
        key = re.sub(r"0x[0-9a-f]+|\d+", "#", "\n".join(kind[:2]))
        by_kind.setdefault(key, []).append((nodeid, text))
    out = [f"lab {number}: {len(failed)} of {total} checks fail (seed {seed})"]
    for kind in list(by_kind.values())[:groups]:
        nodeid, text = kind[0]
        more = f" (and {len(kind) - 1} more like it)" if len(kind) > 1 else ""
        out.append(f"  {nodeid}{more}:")
        body = text.splitlines() or ["(no message)"]
        out += [f"    {line}" for line in body[:lines]]
        if len(body) > lines:
            out.append(f"    ... ({len(body) - lines} more lines)")
    if len(by_kind) > groups:
        out.append(f"  ... and {len(by_kind) - groups} other kinds of failure")
    first = failed[0][0]
    out += [f"rerun one   : python -m pytest -q '{first}'",
            f"full traces : nclite lab check {number} -v   (another seed: NCLITE_SEED=2 ...)"]
    return out
