#!/usr/bin/env python3
"""Time git-isopatch at several commits against each other, interleaved.

Measures what one change buys: each commit's sources are exported
(``git archive``) and run by the same interpreter, and every round runs a warm
``git -c isopatch.pool=1 isopatch -q -o <patch> -- true`` of each commit, the
bare git sequence (``bench/bare.sh``) and running in place
(``bench/inplace.sh``), in an order that rotates from round to round, so that
the load of a shared machine hits every way alike.  It prints each way's
median and its ratio to bare and to in place, and how many git processes one
run of each commit starts (counted with ``GIT_TRACE2_EVENT``).  CPU time
(user and system of the whole process tree, from ``wait4``) swings less with
the load than wall time.

    python bench/compare.py 2366a8c HEAD --size small --rounds 30 \\
        --workdir /dev/shm/isopatch-compare

``--sandbox`` adds ``--sandbox`` to every tool run (else ``--no-sandbox``),
``--cold`` drops the pool; ``<commit>+sandbox``, ``<commit>+cold`` (or both)
do it for one way, so that ``HEAD HEAD+sandbox`` times what the sandbox costs.
``--edit``: every way runs ``sh -c 'echo x >> README.txt'`` instead of
``true`` (a one-line patch: the extraction's git runs).
``--attributes LINE`` (repeatable) times a clone of the repository whose
last commit adds a ``.gitattributes`` holding those lines (``'* text
eol=lf'``: git converts every file); each commit's way then runs in a
clone of its own, so that its pool holds only the worktrees it put back.
Beside them runs the floor (``bench/floor.py``: a typer app parsing
``-q -o x -- true``, pygit2 opening the repository and resolving HEAD, started
through git as ``git isopatch-floor``), and every run is traced
(``GIT_TRACE2_EVENT``), so that each way's time from exec to its first git
process is measured in the same rounds and set against the floor's whole
run.  On the small repository the report ends with the targets: a warm run
at most 5.0x the bare sequence unconfined, 6.0x sandboxed, its first git
process at most 25 ms after the floor.

Standard library only; the repositories are bench/run.py's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/run.py: repositories, environment)
import timing  # noqa: E402  (bench/timing.py: the timing loop run.py shares)

#: Largest median warm / median bare on the small repository, unconfined and sandboxed.
SMALL_RATIO_TARGETS = {False: 5.0, True: 6.0}
#: How much later than the floor's whole run a warm run may start its first git.
FIRST_GIT_MARGIN = 0.025


def export(commit: str, into: Path) -> tuple[str, Path]:
    """The sources of ``commit`` of this checkout under ``into``; its full id."""
    full = subprocess.run(
        ["git", "-C", str(bench.PROJECT_DIR), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    folder = into / full[:12]
    if not (folder / "git_isopatch").is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(bench.PROJECT_DIR), "archive", "--format=tar", full, "git_isopatch"],
            check=True,
            capture_output=True,
        ).stdout
        with tempfile.TemporaryFile() as tar:
            tar.write(archive)
            tar.seek(0)
            tarfile.open(fileobj=tar).extractall(folder)
    return full, folder


def launcher(folder: Path, python: str) -> Path:
    """A ``git-isopatch`` in ``folder/bin`` that runs ``folder``'s sources."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "git-isopatch"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{folder}" exec "{python}" -m git_isopatch "$@"\n')
    script.chmod(0o755)
    return bin_dir


def read_trace(path: Path) -> tuple[list[str], float | None]:
    """The git subcommands a run traced to ``path`` started, in order, and
    when the first of them started (``time.time()``'s clock).  The ``git
    isopatch`` that started the tool (``_run_dashed_``) is not counted."""
    first: dict[str, float] = {}
    names: dict[str, str] = {}
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines():
        event = json.loads(line)
        sid = event.get("sid", "")
        if event.get("event") == "cmd_name":
            names[sid] = event.get("name", "")
        if sid not in first and "time" in event:
            stamp = event["time"].replace("Z", "+00:00")
            first[sid] = datetime.datetime.fromisoformat(stamp).timestamp()
    started = sorted((first[sid], name) for sid, name in names.items() if name != "_run_dashed_")
    return [name for _, name in started], started[0][0] if started else None


def with_attributes(
    repo: Path, lines: list[str], clone: Path, workdir: Path, env: dict[str, str]
) -> Path:
    """A fresh clone of ``repo`` (objects hard-linked) at ``clone`` whose
    last commit adds a ``.gitattributes`` holding ``lines``, its index
    stat-clean."""
    shutil.rmtree(clone, ignore_errors=True)
    bench.git(["clone", "-q", "--no-checkout", str(repo), str(clone)], cwd=workdir, env=env)
    bench.git(["config", "gc.auto", "0"], cwd=clone, env=env)
    bench.git(["-c", "checkout.workers=0", "reset", "-q", "--hard", "HEAD"], cwd=clone, env=env)
    (clone / ".gitattributes").write_text("".join(line + "\n" for line in lines))
    bench.git(["add", ".gitattributes"], cwd=clone, env=env)
    bench.git(["commit", "-q", "-m", "attributes"], cwd=clone, env=env)
    time.sleep(1.1)  # as bench/run.py: the index older than the files, then stat-clean
    bench.git(["update-index", "-q", "--really-refresh"], cwd=clone, env=env)
    return clone


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/compare.py", description=__doc__)
    parser.add_argument("commits", nargs="+")
    parser.add_argument("--size", default="small", choices=sorted(bench.SPECS))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "isopatch-compare"
    )
    parser.add_argument("--python", default=str(bench.PROJECT_DIR / ".venv" / "bin" / "python"))
    parser.add_argument("--sandbox", action="store_true", help="every tool run with --sandbox")
    parser.add_argument(
        "--cold", action="store_true", help="no pool: every tool run makes its worktree"
    )
    parser.add_argument(
        "--edit", action="store_true", help="every way appends a line to README.txt"
    )
    parser.add_argument(
        "--attributes",
        metavar="LINE",
        action="append",
        help="time a clone whose .gitattributes holds LINE (repeatable)",
    )
    parser.add_argument(
        "--global-config",
        metavar="FILE",
        type=Path,
        help="every way reads the user's global configuration from FILE (GIT_CONFIG_GLOBAL, "
        "which libgit2 does not read: the tool asks git)",
    )
    args = parser.parse_args(argv)

    workdir = args.workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    home, run_tmp, pool_tmp = workdir / "home", workdir / "tmp", workdir / "pool-tmp"
    for folder in (home, run_tmp, pool_tmp):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    env = bench.hermetic_env(home, run_tmp)
    if args.global_config is not None:
        env["GIT_CONFIG_GLOBAL"] = str(args.global_config.absolute())
    repo = bench.prepare_repository(bench.SPECS[args.size], workdir, env)
    generated = repo
    if args.attributes is not None:
        clone = workdir / "repos" / "with-attributes"
        repo = with_attributes(generated, args.attributes, clone, workdir, env)
    patch = run_tmp / "isopatch.patch"
    warm = ["-c", "isopatch.pool=1", "-c", f"isopatch.tmpdir={pool_tmp}"]

    command = ["sh", "-c", "echo x >> README.txt"] if args.edit else ["true"]
    ways: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare": (["sh", str(bench.BARE_SCRIPT), "--", *command], env),
        "inplace": (["sh", str(bench.INPLACE_SCRIPT), "--", *command], env),
    }
    labels = {}
    cwd: dict[str, Path] = {"bare": repo, "inplace": repo}
    for number, way in enumerate(args.commits):
        commit, *modes = way.split("+")
        sandbox = ("--sandbox" if "sandbox" in modes or args.sandbox else "--no-sandbox",)
        cold = "cold" in modes or args.cold
        full, folder = export(commit, workdir / "sources")
        bin_dir = launcher(folder, args.python)
        tool_env = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
        options = ["-q", "-o", str(patch), *sandbox, "--", *command]
        name = "+".join([full[:12], *modes])
        ways[name] = (["git", *([] if cold else warm), "isopatch", *options], tool_env)
        labels[name] = way
        cwd[name] = repo
        if args.attributes is not None:  # a pool of its own: what one version keeps stays
            clone = workdir / "repos" / f"with-attributes-{number}"
            cwd[name] = with_attributes(generated, args.attributes, clone, workdir, env)

    floor_bin = timing.floor_launcher(workdir / "floor", args.python)
    ways["floor"] = (
        ["git", "isopatch-floor", "-q", "-o", str(patch), "--", "true"],
        {**env, "PATH": f"{floor_bin}{os.pathsep}{env['PATH']}"},
    )
    cwd["floor"] = repo
    trace = workdir / "run.trace2"
    traced: dict[str, list[str]] = {}

    def once(name: str) -> tuple[float, float, float | None]:
        argv_, env_ = ways[name]
        trace.unlink(missing_ok=True)
        run = timing.measure(argv_, cwd=cwd[name], env={**env_, "GIT_TRACE2_EVENT": str(trace)})
        if run.exit_code != 0:
            raise SystemExit(f"{name} failed ({run.exit_code}): {run.stderr.strip()[-500:]}")
        traced[name], first = read_trace(trace)
        for child in run_tmp.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        if name == "floor":  # the floor's whole run is its way to where git would start
            return run.seconds, run.cpu_seconds, run.seconds
        return run.seconds, run.cpu_seconds, None if first is None else first - run.spawned_at

    names = list(ways)
    loads: list[float] = []
    # two untimed rounds: bytecode written, the pool filled
    timed = timing.interleaved(names, args.rounds, once, warmup=2, loads=loads)
    samples = {name: [wall for wall, _, _ in values] for name, values in timed.items()}
    cpu = {name: [used for _, used, _ in values] for name, values in timed.items()}
    first_git = {
        name: [at for _, _, at in values if at is not None] for name, values in timed.items()
    }
    # the warm ways' pool goes: the repository is left as found
    for folder in dict.fromkeys(cwd.values()):
        subprocess.run(
            ["git", "isopatch", "prune"], cwd=folder, env=ways[list(labels)[-1]][1], check=False
        )

    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(
        f"size {args.size}, {args.rounds} rounds, {'cold' if args.cold else 'warm'}"
        f"{', edit' if args.edit else ''}"
        f"{', --sandbox' if args.sandbox else ''}; load average (1 min) during the rounds "
        f"{min(loads):.1f}-{max(loads):.1f}, median {statistics.median(loads):.1f}"
    )
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    firsts = {name: statistics.median(v) for name, v in first_git.items() if v}
    print(
        f"{'way':14s} {'median ms':>9s} {'q1-q3 ms':>13s} {'/bare':>6s} {'/in place':>9s}"
        f" {'CPU ms':>7s} {'CPU/bare':>8s} {'1st git':>7s}  git processes"
    )
    for name in names:
        q = statistics.quantiles(samples[name], n=4) if len(samples[name]) > 1 else [0, 0, 0]
        count = f"{len(traced[name])}: {' '.join(traced[name])}" if name in labels else ""
        shown = name in firsts and name not in ("bare", "inplace")
        first = f"{firsts[name] * 1000:7.1f}" if shown else "      -"
        print(
            f"{labels.get(name, name):14s} {medians[name] * 1000:9.1f} "
            f"{q[0] * 1000:6.1f}-{q[2] * 1000:6.1f} {medians[name] / medians['bare']:6.2f} "
            f"{medians[name] / medians['inplace']:9.2f} {cpu_medians[name] * 1000:7.1f} "
            f"{cpu_medians[name] / cpu_medians['bare']:8.2f} {first}  {count}"
        )
    if args.size == "small" and not args.cold:
        print_targets(labels, medians, firsts, args.sandbox)
    return 0


def print_targets(
    labels: dict[str, str],
    medians: dict[str, float],
    firsts: dict[str, float],
    all_sandboxed: bool,
) -> None:
    """One ``target ...: met`` or ``missed`` line per target of a warm way
    on the small repository."""
    for name, label in labels.items():
        if "cold" in label.split("+")[1:]:
            continue
        sandboxed = all_sandboxed or "sandbox" in label.split("+")[1:]
        limit, ratio = SMALL_RATIO_TARGETS[sandboxed], medians[name] / medians["bare"]
        print(f"target {label}/bare: {ratio:.2f} <= {limit:.1f}: {verdict(ratio <= limit)}")
        if name in firsts:
            most = firsts["floor"] + FIRST_GIT_MARGIN
            print(
                f"target {label} first git process: {firsts[name] * 1000:.1f} ms <= floor "
                f"{firsts['floor'] * 1000:.1f} + {FIRST_GIT_MARGIN * 1000:.0f} ms: "
                f"{verdict(firsts[name] <= most)}"
            )


def verdict(met: bool) -> str:
    return "met" if met else "missed"


if __name__ == "__main__":
    sys.exit(main())
