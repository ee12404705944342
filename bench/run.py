#!/usr/bin/env python3
"""Benchmark harness for git isopatch.

Times ``git isopatch -q -- <command>`` against the plain git sequence in
``bench/bare.sh`` on generated repositories of three sizes, and measures the
tool's start-up time and its peak memory while capturing a large binary change.
See bench/README.md for what is measured and the targets.

    python bench/run.py                      # small, medium and large
    python bench/run.py --sizes small,medium --rounds 3
    python bench/run.py --quick              # a few seconds, tiny repository

Standard library only. Exit status: 0 when everything ran (targets met or
not), 1 when a measured command failed, 2 on a usage or set-up error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
import base_trees  # noqa: E402  (bench/base_trees.py: the base trees' measurements)
import timing  # noqa: E402  (bench/timing.py: the timing loop compare.py shares)

PROJECT_DIR = BENCH_DIR.parent
BARE_SCRIPT = BENCH_DIR / "bare.sh"
INPLACE_SCRIPT = BENCH_DIR / "inplace.sh"
CLONE_SCRIPT = BENCH_DIR / "clone.sh"

# The ways a user would get the same patch without git isopatch: the plain
# worktree sequence, in place with stash/reset/pop (lint-staged's way), and a
# `git clone --shared`.  Each is a script taking [-o <patch>] [--] <command>.
ALTERNATIVES: dict[str, Path] = {
    "bare": BARE_SCRIPT,
    "inplace": INPLACE_SCRIPT,
    "clone": CLONE_SCRIPT,
}
ALTERNATIVE_LABELS = {"bare": "bare", "inplace": "in place", "clone": "clone"}
# The ways of git isopatch that are compared with each alternative.
TOOL_WAYS = {"tool": "cold", "sandbox": "sandbox", "warm": "warm", "warm-sandbox": "warm+sandbox"}

# Bump when the repository generator changes, so that cached repositories made
# by an older generator are regenerated.
GENERATOR_VERSION = 1

IDENTITY_NAME = "Isopatch Bench"
IDENTITY_EMAIL = "bench@isopatch.invalid"
FIXED_DATE = "1700000000 +0000"

MB = 1024 * 1024
EDITED_FILE = "README.txt"

# What each scenario runs inside the worktree.
SCENARIOS: dict[str, list[str]] = {
    "true": ["true"],
    "edit": ["sh", "-c", f"echo x >> {EDITED_FILE}"],
}

# Largest acceptable median(tool) / median(bare), per repository size.
RATIO_TARGETS: dict[str, float] = {"small": 3.5, "medium": 0.65}
# With --pool: largest acceptable median(warm) / median(bare), a run that
# claims a worktree from the pool (isopatch.pool=1).
WARM_RATIO_TARGETS: dict[str, float] = {"medium": 0.15}
# Issue 23's targets, (way, alternative, size) -> largest acceptable ratio of
# medians: a warm run costs little more than running in place, with and
# without the sandbox; the small one is judged with --workdir on a tmpfs.
ALTERNATIVE_TARGETS: dict[tuple[str, str, str], float] = {
    ("warm", "inplace", "medium"): 2.0,
    ("warm-sandbox", "inplace", "medium"): 2.0,
    ("warm", "bare", "small"): 6.0,
}
PEAK_RSS_TARGET_MB = 80.0


@dataclasses.dataclass(frozen=True)
class RepoSpec:
    """Parameters of one generated repository; all of them go into its cache key."""

    name: str
    seed: int
    files: int  # total, README.txt and binaries included
    text_size: tuple[int, int]  # bytes, drawn log-uniformly in this range
    binary_files: int
    total_bytes: int  # binaries top the repository up to this size (0: no binaries)
    folders: int
    max_depth: int


SPECS: dict[str, RepoSpec] = {
    "tiny": RepoSpec(
        "tiny",
        seed=1,
        files=5,
        text_size=(100, 2_000),
        binary_files=0,
        total_bytes=0,
        folders=1,
        max_depth=1,
    ),
    "small": RepoSpec(
        "small",
        seed=20,
        files=20,
        text_size=(200, 8_000),
        binary_files=0,
        total_bytes=0,
        folders=3,
        max_depth=2,
    ),
    "medium": RepoSpec(
        "medium",
        seed=5_000,
        files=5_000,
        text_size=(200, 32_000),
        binary_files=10,
        total_bytes=60 * MB,
        folders=120,
        max_depth=4,
    ),
    "large": RepoSpec(
        "large",
        seed=50_000,
        files=50_000,
        text_size=(100, 2_000),
        binary_files=0,
        total_bytes=0,
        folders=500,
        max_depth=3,
    ),
}
# The repositories of the base trees' measurements (--base-trees): text files
# of 100 B-2 kB, as large's, with README.txt at the top.
for _files, _name in ((1_000, "1k"), (10_000, "10k"), (50_000, "50k")):
    SPECS[_name] = RepoSpec(
        _name,
        seed=_files + 1,
        files=_files,
        text_size=(100, 2_000),
        binary_files=0,
        total_bytes=0,
        folders=max(10, _files // 100),
        max_depth=3,
    )
DEFAULT_ROUNDS = {"tiny": 1, "small": 5, "medium": 5, "large": 3, "1k": 5, "10k": 5, "50k": 3}
# Untimed rounds before the timed ones; none for large by default, where one
# capture takes 10 s or more and a warm-up round would add minutes.
DEFAULT_WARMUP = {"tiny": 0, "small": 1, "medium": 1, "large": 0, "1k": 0, "10k": 0, "50k": 0}


# --------------------------------------------------------------------------
# Environment


class SetupError(Exception):
    """The bench cannot run: no tool, or git failed while preparing (exit 2)."""


def hermetic_env(home: Path, tmpdir: Path) -> dict[str, str]:
    """The environment every git (and tool) process runs in.

    No inherited ``GIT_*`` variables, no system or user configuration, a fixed
    identity and date, and temporary folders under the bench's work folder.
    Python may write its bytecode cache, as it does for a user: with an
    inherited ``PYTHONDONTWRITEBYTECODE`` an editable install compiles every
    module of the tool on every run (about 0.1 s here), which no user pays.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GIT_") and key != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        TMPDIR=str(tmpdir),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME=IDENTITY_NAME,
        GIT_AUTHOR_EMAIL=IDENTITY_EMAIL,
        GIT_AUTHOR_DATE=FIXED_DATE,
        GIT_COMMITTER_NAME=IDENTITY_NAME,
        GIT_COMMITTER_EMAIL=IDENTITY_EMAIL,
        GIT_COMMITTER_DATE=FIXED_DATE,
    )
    return env


def git(args: Sequence[str], *, cwd: Path, env: dict[str, str]) -> str:
    """Run git, fail loudly, return its stdout."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SetupError(f"git {' '.join(args)} failed ({done.returncode}):\n{done.stderr.strip()}")
    return done.stdout


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Repository generation
#
# Files are never written one by one: the whole tree goes into a single commit
# through `git fast-import` (blobs inline in the stream), then the main work
# tree is checked out once with parallel checkout. That checkout is paid only
# when a repository is generated, never during the measurement, and keeps the
# main repository an ordinary one (the tool requires a work tree).


class TextMaker:
    """Deterministic, varied, line-oriented text from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        letters = "abcdefghijklmnopqrstuvwxyz"
        words = ["".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(2_000)]
        self.lines = [
            " ".join(rng.choices(words, k=rng.randint(3, 14))) + "\n" for _ in range(5_000)
        ]
        self.mean_line = sum(map(len, self.lines)) / len(self.lines)

    def text(self, header: str, size: int) -> bytes:
        count = int(size / self.mean_line) + 1
        body = header + "".join(self.rng.choices(self.lines, k=count))
        return body[:size].rstrip("\n").encode() + b"\n"


def plan_folders(spec: RepoSpec, rng: random.Random) -> list[str]:
    """Folder paths ('' is the top level), nested up to spec.max_depth."""
    names = ["src", "lib", "docs", "assets", "tests", "core", "util", "data", "api", "pkg"]
    folders = [""]
    parents = [("", 0)]  # folders that may still get a child, with their depth
    for number in range(spec.folders):
        parent, depth = rng.choice(parents)
        folder = f"{parent}{rng.choice(names)}{number:03d}/"
        folders.append(folder)
        if depth + 1 < spec.max_depth:
            parents.append((folder, depth + 1))
    return folders


def binary_sizes(spec: RepoSpec, text_bytes: int, rng: random.Random) -> list[int]:
    if spec.binary_files == 0:
        return []
    remaining = max(spec.total_bytes - text_bytes, spec.binary_files * 1024)
    weights = [rng.uniform(0.5, 1.5) for _ in range(spec.binary_files)]
    return [int(remaining * weight / sum(weights)) for weight in weights]


def repository_files(spec: RepoSpec) -> Iterator[tuple[str, str, bytes]]:
    """Yield (mode, path, contents) for every file of the repository."""
    rng = random.Random(spec.seed)
    maker = TextMaker(rng)
    folders = plan_folders(spec, rng)
    extensions = [".py", ".c", ".h", ".md", ".txt", ".json", ".rs", ".toml"]
    low, high = (math.log(bound) for bound in spec.text_size)

    readme = "Generated by bench/run.py for benchmarking git isopatch.\n"
    yield "100644", EDITED_FILE, maker.text(readme, 1_000)
    text_bytes = 1_000
    for number in range(spec.files - 1 - spec.binary_files):
        path = f"{rng.choice(folders)}file{number:05d}{rng.choice(extensions)}"
        size = int(math.exp(rng.uniform(low, high)))
        mode = "100755" if rng.random() < 0.02 else "100644"
        text_bytes += size
        yield mode, path, maker.text(f"# {path}\n", size)
    for number, size in enumerate(binary_sizes(spec, text_bytes, rng)):
        path = f"{rng.choice(folders)}blob{number:03d}.bin"
        yield "100644", path, rng.randbytes(size)


def fast_import(repo: Path, spec: RepoSpec, env: dict[str, str]) -> tuple[int, int]:
    """Write the repository's single commit on refs/heads/main; return (files, bytes)."""
    importer = subprocess.Popen(
        ["git", "fast-import", "--quiet", "--done"], cwd=repo, env=env, stdin=subprocess.PIPE
    )
    assert importer.stdin is not None
    stream = importer.stdin
    message = f"Generated {spec.name} repository\n".encode()
    stream.write(b"commit refs/heads/main\n")
    stream.write(f"author {IDENTITY_NAME} <{IDENTITY_EMAIL}> {FIXED_DATE}\n".encode())
    stream.write(f"committer {IDENTITY_NAME} <{IDENTITY_EMAIL}> {FIXED_DATE}\n".encode())
    stream.write(b"data %d\n%s" % (len(message), message))
    files = total = 0
    for mode, path, contents in repository_files(spec):
        stream.write(f"M {mode} inline {path}\n".encode())
        stream.write(b"data %d\n" % len(contents))
        stream.write(contents)
        stream.write(b"\n")
        files += 1
        total += len(contents)
    stream.write(b"\ndone\n")
    stream.close()
    if importer.wait() != 0:
        raise SetupError(f"git fast-import failed ({importer.returncode})")
    return files, total


def spec_key(spec: RepoSpec) -> dict[str, object]:
    key = {"generator": GENERATOR_VERSION, **dataclasses.asdict(spec)}
    return json.loads(json.dumps(key))  # tuples become lists, as when read back


def prepare_repository(spec: RepoSpec, workdir: Path, env: dict[str, str]) -> Path:
    """Return the repository for spec, generating it unless a valid cached copy exists."""
    home = workdir / "repos" / spec.name
    repo = home / "repo"
    stamp = home / "params.json"
    if stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("params") == spec_key(spec) and is_pristine(repo, recorded, env):
            return repo
        progress(f"{spec.name}: cached repository is stale or modified; regenerating")
    shutil.rmtree(home, ignore_errors=True)
    repo.mkdir(parents=True)

    progress(f"{spec.name}: generating {spec.files:,} files ...")
    started = time.perf_counter()
    git(["init", "--quiet", "--initial-branch=main"], cwd=repo, env=env)
    git(["config", "gc.auto", "0"], cwd=repo, env=env)  # no automatic gc mid-measurement
    files, total = fast_import(repo, spec, env)
    imported = time.perf_counter()
    # HEAD already names refs/heads/main; populate the index and the main work tree.
    git(["-c", "checkout.workers=0", "reset", "--quiet", "--hard", "HEAD"], cwd=repo, env=env)
    checked_out = time.perf_counter()
    time.sleep(1.1)  # let the index get older than the files, then make it stat-clean
    git(["update-index", "-q", "--really-refresh"], cwd=repo, env=env)
    commit = git(["rev-parse", "HEAD"], cwd=repo, env=env).strip()
    record = {
        "params": spec_key(spec),
        "commit": commit,
        "files": files,
        "bytes": total,
        "fast_import_s": round(imported - started, 2),
        "checkout_s": round(checked_out - imported, 2),
    }
    stamp.write_text(json.dumps(record, indent=2) + "\n")
    progress(
        f"{spec.name}: {files:,} files, {total / MB:.1f} MB; "
        f"fast-import {record['fast_import_s']} s, checkout {record['checkout_s']} s"
    )
    return repo


def is_pristine(repo: Path, recorded: dict[str, object], env: dict[str, str]) -> bool:
    """True if repo is at the recorded commit with a clean work tree and no worktrees."""
    if not (repo / ".git").is_dir():
        return False
    git(["worktree", "prune"], cwd=repo, env=env)  # forget worktrees of interrupted runs
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, env=env, check=False, capture_output=True, text=True
    )
    if head.returncode != 0 or head.stdout.strip() != recorded.get("commit"):
        return False
    return (
        git(["status", "--porcelain"], cwd=repo, env=env) == "" and worktree_count(repo, env) == 1
    )


def worktree_count(repo: Path, env: dict[str, str]) -> int:
    listing = git(["worktree", "list", "--porcelain"], cwd=repo, env=env)
    return sum(1 for line in listing.splitlines() if line.startswith("worktree "))


def repository_summary(spec: RepoSpec, workdir: Path) -> dict[str, object]:
    return json.loads((workdir / "repos" / spec.name / "params.json").read_text())


# --------------------------------------------------------------------------
# Running and measuring


# one timing loop for run.py and compare.py (bench/timing.py)
Measurement = timing.Measurement
measure = timing.measure


class Tool:
    """How to invoke git-isopatch."""

    def __init__(self, executable: Path) -> None:
        self.executable = executable
        self.interpreter = python_interpreter_of(executable)

    def argv(self, args: Sequence[str]) -> list[str]:
        """`git isopatch <args>`, through git as a user types it."""
        if self.executable.name == "git-isopatch":
            return ["git", "isopatch", *args]
        return [str(self.executable), *args]

    def argv_reporting_peak_rss(self, report: Path, args: Sequence[str]) -> list[str]:
        """Run directly (not through git) under RSS_SHIM, which writes the peak
        RSS of the tool's own process to report. Plain argv if not Python."""
        if self.interpreter is None:
            return [str(self.executable), *args]
        return [self.interpreter, "-c", RSS_SHIM, str(report), str(self.executable), *args]

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        env["PATH"] = f"{self.executable.parent}{os.pathsep}{env.get('PATH', '')}"
        return env


def python_interpreter_of(executable: Path) -> str | None:
    """The Python that runs a console script, or None if it is not one."""
    try:
        head = executable.read_bytes()[:1024].decode(errors="replace")
    except OSError:
        return None
    shebang = re.match(r"#!\s*(?:/usr/bin/env\s+)?(\S*python[\w.]*)\s*\n", head)
    if shebang:
        return shebang.group(1)
    # pip's launcher for interpreter paths too long for a shebang line.
    relaunch = re.search(r"'''exec' '?\"?([^\"' ]*python[\w.]*)", head)
    return relaunch.group(1) if relaunch else None


# Runs a Python console script in this very process and, however it exits
# (the tool ends by os._exit, past any finally), reports the peak RSS of this
# process alone: VmHWM, the high-water mark of its own memory map since exec
# (getrusage's ru_maxrss would also count the RSS of the process that spawned
# it, and wait4's that of its git children).
RSS_SHIM = """\
import os, runpy, sys
report, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path[0] = os.path.dirname(script)
def write_peak():
    with open("/proc/self/status") as status:
        peak_kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(report, "w") as out:
        out.write(peak_kb)
exit_now = os._exit
def report_then_exit(status):
    write_peak()
    exit_now(status)
os._exit = report_then_exit
try:
    runpy.run_path(script, run_name="__main__")
finally:
    write_peak()
"""


def reset_peak_rss() -> None:
    """Lower this process's RSS high-water mark to its current RSS (Linux 4.0+).

    A child inherits its parent's high-water mark into ru_maxrss when it execs,
    so this keeps what the bench itself once held (generating a repository)
    out of wait4's figures for its children. Best effort.
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def find_tool(args: argparse.Namespace) -> Path | None:
    venv = args.venv or os.environ.get("ISOPATCH_BENCH_VENV")
    candidates = []
    if args.tool:
        candidates.append(Path(args.tool))
    elif venv:
        candidates.append(Path(venv) / "bin" / "git-isopatch")
    else:
        on_path = shutil.which("git-isopatch")
        if on_path:
            candidates.append(Path(on_path))
        candidates.append(PROJECT_DIR / ".venv" / "bin" / "git-isopatch")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    if args.tool or venv:
        raise SetupError(f"no executable git-isopatch at {candidates[0]}")
    return None


class Bench:
    """The measurements, in one work folder and one hermetic environment."""

    def __init__(
        self,
        workdir: Path,
        tool: Tool | None,
        tool_tmpdir: Path | None = None,
        pool: bool = False,
    ) -> None:
        self.workdir = workdir
        self.tool = tool
        self.home = workdir / "home"
        self.run_tmp = workdir / "tmp"  # $TMPDIR of every measured run, emptied after each
        # --tool-tmpdir: the tool's isopatch.tmpdir (e.g. on a tmpfs), emptied likewise
        self.tool_tmp = tool_tmpdir
        # --pool: the "warm" runs' isopatch.tmpdir, on the same disk as $TMPDIR; the
        # pooled worktree lives there between runs, result folders are removed
        self.pool = pool
        self.pool_tmp = workdir / "pool-tmp"
        if pool:
            shutil.rmtree(self.pool_tmp, ignore_errors=True)
            self.pool_tmp.mkdir(parents=True)
        for folder in (self.home, self.run_tmp, *([tool_tmpdir] if tool_tmpdir else [])):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        self.env = hermetic_env(self.home, self.run_tmp)
        self.failures: list[str] = []
        self.warnings: set[str] = set()
        # the CPU time (user + system of the process tree) of the last capture
        self.last_cpu: float | None = None

    # One capture, either way --------------------------------------------------

    def capture_argv(self, implementation: str, command: Sequence[str]) -> list[str]:
        if implementation in ALTERNATIVES:
            return ["sh", str(ALTERNATIVES[implementation]), "--", *command]
        assert self.tool is not None
        sandboxed = implementation in ("sandbox", "warm-sandbox")
        # -o: a quiet run without it keeps no patch (nobody is told its path);
        # the alternatives write theirs to a file too
        patch = self.run_tmp / "isopatch.patch"
        # the sandbox named either way: isopatch.sandbox=auto would confine "cold" where it can
        sandbox = "--sandbox" if sandboxed else "--no-sandbox"
        options = ["-q", "-o", str(patch), sandbox, "--", *command]
        if implementation in ("warm", "warm-sandbox"):
            return [
                *("git", "-c", "isopatch.pool=1", "-c", f"isopatch.tmpdir={self.pool_tmp}"),
                *("isopatch", *options),
            ]
        if self.tool_tmp is not None:
            return ["git", "-c", f"isopatch.tmpdir={self.tool_tmp}", "isopatch", *options]
        return self.tool.argv(options)

    def env_for(self, implementation: str) -> dict[str, str]:
        return self.env if implementation in ALTERNATIVES else self.tool.env(self.env)

    def capture(self, implementation: str, scenario: str, repo: Path, label: str) -> float | None:
        """Time one capture; check it and clean up after it. None if it failed."""
        command = SCENARIOS[scenario]
        run = measure(
            self.capture_argv(implementation, command), cwd=repo, env=self.env_for(implementation)
        )
        self.last_cpu = run.cpu_seconds
        patch_bytes = sum(
            path.stat().st_size
            for folder in (self.run_tmp, *([self.tool_tmp] if self.tool_tmp else []))
            for path in folder.rglob("*")
            if path.is_file() and (path.name == "patch" or path.name.endswith(".patch"))
        ) + sum(path.stat().st_size for path in self.pool_tmp.glob("git-isopatch-*/*.patch"))
        self.clean_up(repo, label)
        if run.exit_code != 0:
            self.fail(f"{label}: exit {run.exit_code}", run.stderr)
            return None
        if git(["status", "--porcelain", "--ignored"], cwd=repo, env=self.env) or git(
            ["stash", "list"], cwd=repo, env=self.env
        ):
            self.fail(f"{label}: the checkout or the stash is not as it was", "")
            git(["reset", "--quiet", "--hard", "HEAD"], cwd=repo, env=self.env)
            git(["clean", "-q", "-ffdx"], cwd=repo, env=self.env)
            git(["stash", "clear"], cwd=repo, env=self.env)
            return None
        if (patch_bytes > 0) != (scenario == "edit"):
            self.warn(
                f"{label}: expected {'a non-empty' if scenario == 'edit' else 'an empty'}"
                f" patch under $TMPDIR, found {patch_bytes} bytes"
            )
        return run.seconds

    def clean_up(self, repo: Path, label: str) -> None:
        """Remove what a run left: its temporary folder and any worktree it kept."""
        for folder in (self.run_tmp, *([self.tool_tmp] if self.tool_tmp else [])):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
        pooled = set()
        if self.pool:  # result folders go, the folder holding the pooled worktree stays
            for folder in self.pool_tmp.glob("git-isopatch-*"):
                if any((child / ".git").exists() for child in folder.iterdir()):
                    pooled |= {str(child) for child in folder.iterdir()}
                else:
                    shutil.rmtree(folder, ignore_errors=True)
        git(["worktree", "prune"], cwd=repo, env=self.env)
        # the base trees sandboxed runs keep (in the git directory) stay too,
        # and the one of the cold floor (base_trees.FLOOR_CHECKOUT)
        kept = tuple(
            f"worktree {repo / '.git' / folder}{os.sep}"
            for folder in ("isopatch", Path(base_trees.FLOOR_CHECKOUT).parent)
        )
        pooled |= {
            line[len("worktree ") :]
            for line in git(
                ["worktree", "list", "--porcelain"], cwd=repo, env=self.env
            ).splitlines()
            if line.startswith(kept)
        }
        if worktree_count(repo, self.env) != 1 + len(pooled):
            self.warn(f"{label}: a worktree was left behind")
            for line in git(
                ["worktree", "list", "--porcelain"], cwd=repo, env=self.env
            ).splitlines()[1:]:
                if line.startswith("worktree ") and line[len("worktree ") :] not in pooled:
                    git(
                        ["worktree", "remove", "--force", line[len("worktree ") :]],
                        cwd=repo,
                        env=self.env,
                    )

    def fail(self, what: str, stderr: str) -> None:
        tail = "\n".join(stderr.strip().splitlines()[-10:])
        self.failures.append(what)
        progress(f"error: {what}" + (f"\n{tail}" if tail else ""))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.add(message)
            progress(f"warning: {message}")

    # The measurements -----------------------------------------------------------

    def time_captures(
        self, spec: RepoSpec, repo: Path, rounds: int, warmup: int
    ) -> list[dict[str, object]]:
        """Interleaved rounds (:func:`timing.interleaved`): each round runs
        every scenario every way, in an order that rotates from round to
        round, so that drift in the machine hits every way alike."""
        implementations = [*ALTERNATIVES, *(["tool", "sandbox"] if self.tool else [])]
        if self.tool and self.pool:
            implementations += ["warm", "warm-sandbox"]
            # fill the pool first: the first warm run of the timed rounds must claim
            self.capture("warm", "true", repo, f"{spec.name} filling the pool")
        ways = [(scenario, way) for scenario in SCENARIOS for way in implementations]

        def once(key: tuple[str, str]) -> float | None:
            scenario, implementation = key
            return self.capture(
                implementation, scenario, repo, f"{spec.name} {scenario} {implementation}"
            )

        def after_round(index: int, timed: list[tuple[tuple[str, str], float]]) -> None:
            name = "warm-up" if index < 0 else f"round {index + 1}/{rounds}"
            times = ", ".join(
                f"{scenario}/{way} {seconds:.3f}s" for (scenario, way), seconds in timed
            )
            progress(f"{spec.name} {name}: {times}")

        samples = timing.interleaved(ways, rounds, once, warmup=warmup, after_round=after_round)

        if self.tool and self.pool:  # empty the pool: the repository is left as found
            assert self.tool is not None
            prune = measure(self.tool.argv(["prune"]), cwd=repo, env=self.tool.env(self.env))
            if prune.exit_code != 0:
                self.fail(f"{spec.name}: git isopatch prune: exit {prune.exit_code}", prune.stderr)
            shutil.rmtree(self.pool_tmp, ignore_errors=True)
            self.pool_tmp.mkdir()

        results = []
        for scenario in SCENARIOS:
            bare = median_or_none(samples[scenario, "bare"])
            tool = median_or_none(samples.get((scenario, "tool"), []))
            ratio = tool / bare if tool is not None and bare else None
            sandbox = median_or_none(samples.get((scenario, "sandbox"), []))
            warm = median_or_none(samples.get((scenario, "warm"), []))
            warm_ratio = warm / bare if warm is not None and bare else None
            warm_target = WARM_RATIO_TARGETS.get(spec.name) if self.pool else None
            target = RATIO_TARGETS.get(spec.name)
            results.append(
                {
                    "size": spec.name,
                    "files": spec.files,
                    "scenario": scenario,
                    "bare_median_s": bare,
                    "tool_median_s": tool,
                    "ratio": ratio,
                    "target": target,
                    "met": None if target is None or ratio is None else ratio <= target,
                    "sandbox_median_s": sandbox,
                    "sandbox_ratio": sandbox / bare if sandbox is not None and bare else None,
                    "sandbox_samples_s": samples.get((scenario, "sandbox"), []),
                    "warm_median_s": warm,
                    "warm_ratio": warm_ratio,
                    "warm_target": warm_target,
                    "warm_met": None
                    if warm_target is None or warm_ratio is None
                    else warm_ratio <= warm_target,
                    "warm_samples_s": samples.get((scenario, "warm"), []),
                    "bare_samples_s": samples[scenario, "bare"],
                    "tool_samples_s": samples.get((scenario, "tool"), []),
                    "inplace_median_s": median_or_none(samples[scenario, "inplace"]),
                    "clone_median_s": median_or_none(samples[scenario, "clone"]),
                    "warm_sandbox_median_s": median_or_none(
                        samples.get((scenario, "warm-sandbox"), [])
                    ),
                    "samples_s": {
                        implementation: samples[scenario, implementation]
                        for implementation in implementations
                    },
                    "ratios": alternative_ratios(spec.name, scenario, samples),
                }
            )
        return results

    def startup(self, rounds: int) -> dict[str, float | None]:
        """Median wall time of `git isopatch -h` (exit 129) and `--version` (exit 0)."""
        assert self.tool is not None
        results: dict[str, float | None] = {}
        for option, expected_exit in (("-h", 129), ("--version", 0)):
            samples = []
            for _ in range(rounds + 1):  # the first run only warms the caches
                run = measure(
                    self.tool.argv([option]), cwd=self.workdir, env=self.tool.env(self.env)
                )
                if run.exit_code != expected_exit:
                    self.fail(
                        f"git isopatch {option}: exit {run.exit_code}, expected {expected_exit}",
                        run.stderr,
                    )
                    break
                samples.append(run.seconds)
            results[option] = median_or_none(samples[1:])
        return results

    def peak_rss(self, repo: Path, size_mb: int) -> dict[str, float | None]:
        """Peak RSS (MB) while capturing a new file of size_mb random bytes."""
        command = ["sh", "-c", f"head -c {size_mb * MB} /dev/urandom > big.bin"]
        patch = self.workdir / "rss.patch"
        results: dict[str, float | None] = {}
        reset_peak_rss()

        bare = ["sh", str(BARE_SCRIPT), "-o", str(patch), "--", *command]
        run = measure(bare, cwd=repo, env=self.env)
        results["bare_tree_mb"] = self.rss_result("peak RSS bare", run, patch, repo)

        if self.tool is not None:
            report = self.workdir / "rss-self.txt"
            report.unlink(missing_ok=True)
            argv = self.tool.argv_reporting_peak_rss(
                report, ["-q", "-o", str(patch), "--", *command]
            )
            run = measure(argv, cwd=repo, env=self.tool.env(self.env))
            results["tool_tree_mb"] = self.rss_result("peak RSS tool", run, patch, repo)
            if report.exists() and results["tool_tree_mb"] is not None:
                results["tool_self_mb"] = int(report.read_text()) / 1024
                report.unlink()
            else:
                results["tool_self_mb"] = None
        return results

    def rss_result(self, label: str, run: Measurement, patch: Path, repo: Path) -> float | None:
        patch_mb = patch.stat().st_size / MB if patch.exists() else 0.0
        patch.unlink(missing_ok=True)
        self.clean_up(repo, label)
        if run.exit_code != 0:
            self.fail(f"{label}: exit {run.exit_code}", run.stderr)
            return None
        progress(
            f"{label}: {run.max_rss_kb / 1024:.1f} MB, {run.seconds:.2f} s, patch {patch_mb:.1f} MB"
        )
        if patch_mb == 0:
            self.warn(f"{label}: the patch is empty")
        return run.max_rss_kb / 1024


def median_or_none(samples: Sequence[float]) -> float | None:
    return statistics.median(samples) if samples else None


def alternative_ratios(
    size: str, scenario: str, samples: dict[tuple[str, str], list[float]]
) -> dict[str, dict[str, object]]:
    """median(way) / median(alternative) for every way of the tool that ran and
    every alternative, keyed "way/alternative", with the target if there is one."""
    ratios: dict[str, dict[str, object]] = {}
    for way in TOOL_WAYS:
        tool = median_or_none(samples.get((scenario, way), []))
        for alternative in ALTERNATIVES:
            other = median_or_none(samples.get((scenario, alternative), []))
            if tool is None or not other:
                continue
            ratio = tool / other
            target = ALTERNATIVE_TARGETS.get((way, alternative, size))
            ratios[f"{way}/{alternative}"] = {
                "ratio": ratio,
                "target": target,
                "met": None if target is None else ratio <= target,
            }
    return ratios


# --------------------------------------------------------------------------
# Report


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def verdict(met: bool | None) -> str:
    return {True: "met", False: "missed", None: "n/a"}[met]


def print_report(
    results: list[dict[str, object]],
    startup: dict[str, float | None] | None,
    rss: dict[str, float | None] | None,
    rss_size_mb: int,
    pool: bool = False,
) -> None:
    header = [
        "size",
        "files",
        "scenario",
        "bare median s",
        "in place s",
        "clone s",
        "tool median s",
        "ratio tool/bare",
        "--sandbox s",
        "ratio sandbox/bare",
        *(["warm (pool) s", "ratio warm/bare", "warm+sandbox s"] if pool else []),
        "target",
        "result",
    ]
    rows = [
        [
            str(r["size"]),
            f"{r['files']:,}",
            str(r["scenario"]),
            fmt(r["bare_median_s"], ".3f"),
            fmt(r.get("inplace_median_s"), ".3f"),
            fmt(r.get("clone_median_s"), ".3f"),
            fmt(r["tool_median_s"], ".3f"),
            fmt(r["ratio"], ".2f"),
            fmt(r.get("sandbox_median_s"), ".3f"),
            fmt(r.get("sandbox_ratio"), ".2f"),
            *(
                [
                    fmt(r.get("warm_median_s"), ".3f"),
                    fmt(r.get("warm_ratio"), ".2f"),
                    fmt(r.get("warm_sandbox_median_s"), ".3f"),
                ]
                if pool
                else []
            ),
            "-" if r["target"] is None else f"<= {r['target']:.2f}",
            verdict(r["met"]),
        ]
        for r in results
    ]
    print_table(header, rows)
    print_ratio_table(results)

    print()
    if startup is not None:
        print(
            f"startup: git isopatch -h {fmt(ms(startup['-h']), '.1f')} ms, "
            f"git isopatch --version {fmt(ms(startup['--version']), '.1f')} ms (medians)"
        )
    if rss is not None:
        print(
            f"peak RSS capturing a new {rss_size_mb} MB binary file: "
            f"tool process {fmt(rss.get('tool_self_mb'), '.1f')} MB, "
            f"tool with its git children {fmt(rss.get('tool_tree_mb'), '.1f')} MB, "
            f"bare git sequence {fmt(rss.get('bare_tree_mb'), '.1f')} MB"
        )

    print()
    for r in results:
        if r["target"] is not None:
            print(
                f"target {r['size']} {r['scenario']}: ratio {fmt(r['ratio'], '.2f')} "
                f"<= {r['target']:.2f}: {verdict(r['met'])}"
            )
        if r.get("warm_target") is not None:
            print(
                f"target {r['size']} {r['scenario']} warm (isopatch.pool=1): ratio "
                f"{fmt(r['warm_ratio'], '.2f')} <= {r['warm_target']:.2f}: "
                f"{verdict(r['warm_met'])}"
            )
        for key, ratio in r.get("ratios", {}).items():
            if ratio["target"] is not None:
                way, alternative = key.split("/")
                print(
                    f"target {r['size']} {r['scenario']} {TOOL_WAYS[way]}/"
                    f"{ALTERNATIVE_LABELS[alternative]}: ratio {ratio['ratio']:.2f} "
                    f"<= {ratio['target']:.2f}: {verdict(ratio['met'])}"
                )
    if rss is not None:
        tool_mb = rss.get("tool_self_mb")
        met = None if tool_mb is None else tool_mb <= PEAK_RSS_TARGET_MB
        print(
            f"target peak RSS of the tool process: {fmt(tool_mb, '.1f')} MB "
            f"<= {PEAK_RSS_TARGET_MB:.0f} MB: {verdict(met)}"
        )
        tree_mb, bare_mb = rss.get("tool_tree_mb"), rss.get("bare_tree_mb")
        met = None if tree_mb is None or bare_mb is None else tree_mb <= bare_mb
        print(
            f"target peak RSS of the tool with its git children: {fmt(tree_mb, '.1f')} MB "
            f"<= the bare git sequence's {fmt(bare_mb, '.1f')} MB: {verdict(met)}"
        )


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    print()
    for row in [header, ["-" * width for width in widths], *rows]:
        print(
            "  ".join(
                cell.ljust(width) if i in (0, 2) else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )


def print_ratio_table(results: list[dict[str, object]]) -> None:
    """Every way of the tool against every alternative: median / median, from
    the same interleaved rounds."""
    columns = [
        key
        for key in (f"{way}/{alt}" for way in TOOL_WAYS for alt in ALTERNATIVES)
        if any(key in r.get("ratios", {}) for r in results)
    ]
    if not columns:
        return
    header = [
        "size",
        "files",
        "scenario",
        *(
            f"ratio {TOOL_WAYS[way]}/{ALTERNATIVE_LABELS[alt]}"
            for way, alt in (column.split("/") for column in columns)
        ),
    ]
    rows = [
        [
            str(r["size"]),
            f"{r['files']:,}",
            str(r["scenario"]),
            *(fmt(r["ratios"].get(column, {}).get("ratio"), ".2f") for column in columns),
        ]
        for r in results
    ]
    print_table(header, rows)


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# --------------------------------------------------------------------------
# Command line


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description="Benchmark git isopatch against the plain git worktree sequence.",
    )
    parser.add_argument(
        "--sizes",
        default="small,medium,large",
        help="comma-separated repository sizes: small, medium, large (default: all three)",
    )
    parser.add_argument(
        "--rounds", type=int, help="timed rounds per size (default: 5 small/medium, 3 large)"
    )
    parser.add_argument(
        "--warmup", type=int, help="untimed rounds before the timed ones (default: 1, 0 for large)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a few seconds on a tiny repository: checks that the harness runs",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where repositories are generated and reused (default: $TMPDIR/git-isopatch-bench)",
    )
    parser.add_argument(
        "--venv",
        help="virtual environment with git-isopatch installed "
        "(default: $ISOPATCH_BENCH_VENV, then PATH, then .venv)",
    )
    parser.add_argument("--tool", help="path of the git-isopatch executable (overrides --venv)")
    parser.add_argument(
        "--bare-only", action="store_true", help="time only the bare git sequence (no tool needed)"
    )
    parser.add_argument(
        "--rss-mb",
        type=int,
        help="size of the binary change for the peak RSS case (default: 200, 2 with --quick)",
    )
    parser.add_argument(
        "--startup-rounds", type=int, default=10, help="runs of -h and --version (default: 10)"
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON there")
    parser.add_argument(
        "--tool-tmpdir",
        type=Path,
        help="run the tool with `git -c isopatch.tmpdir=DIR` (e.g. a folder on /dev/shm); "
        "the bare sequence keeps $TMPDIR",
    )
    parser.add_argument(
        "--base-trees",
        action="store_true",
        help="time sandboxed captures over base trees on the 1k, 10k and 50k repositories "
        "(warm, cold, one commit later) against in place and bare, and eight at once on 10k",
    )
    parser.add_argument(
        "--pool",
        action="store_true",
        help="also time warm runs (isopatch.pool=1: the worktree claimed from the pool) "
        "beside the cold ones",
    )
    parser.add_argument(
        "--git-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the user's global configuration, e.g. feature.manyFiles=true "
        "(repeatable; the repositories are made under it too)",
    )
    args = parser.parse_args(argv)
    if any("=" not in setting for setting in args.git_config):
        parser.error("--git-config takes KEY=VALUE")

    args.sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    unknown = [size for size in args.sizes if size not in SPECS]
    if unknown:
        parser.error(f"unknown size(s): {', '.join(unknown)}")
    if args.quick:
        args.sizes, args.startup_rounds = ["tiny"], 1
        args.rounds = args.rounds or 1
        args.rss_mb = args.rss_mb or 2
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.rss_mb = args.rss_mb or 200
    if args.workdir is None:
        args.workdir = Path(tempfile.gettempdir()) / "git-isopatch-bench"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run_bench(args)
    except SetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def run_bench(args: argparse.Namespace) -> int:
    if shutil.which("git") is None:
        print("error: git not found on PATH", file=sys.stderr)
        return 2
    tool = None
    if not args.bare_only:
        executable = find_tool(args)
        if executable is None:
            print(
                "error: git-isopatch not found (install it with `python -m venv .venv && "
                ".venv/bin/pip install -e .`, or pass --venv/--tool, or --bare-only)",
                file=sys.stderr,
            )
            return 2
        tool = Tool(executable)
        progress(f"tool: {executable}")

    workdir = args.workdir.absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    bench = Bench(workdir, tool, args.tool_tmpdir, pool=args.pool)
    progress(f"work folder: {workdir}; {git(['--version'], cwd=workdir, env=bench.env).strip()}")
    for setting in args.git_config:  # the user's global configuration
        git(["config", "--global", *setting.split("=", 1)], cwd=workdir, env=bench.env)

    if args.base_trees:
        return run_base_trees(bench, args, workdir)
    startup = bench.startup(args.startup_rounds) if tool else None

    results = []
    repositories = {}
    for size in args.sizes:
        spec = SPECS[size]
        repo = prepare_repository(spec, workdir, bench.env)
        repositories[size] = repository_summary(spec, workdir)
        rounds = args.rounds or DEFAULT_ROUNDS[size]
        warmup = DEFAULT_WARMUP[size] if args.warmup is None else args.warmup
        results += bench.time_captures(spec, repo, rounds, warmup)

    rss_spec = SPECS["tiny" if args.quick else "small"]
    rss = bench.peak_rss(prepare_repository(rss_spec, workdir, bench.env), args.rss_mb)

    print_report(results, startup, rss, args.rss_mb, pool=args.pool)
    for warning in sorted(bench.warnings):
        print(f"warning: {warning}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "tool": str(tool.executable) if tool else None,
                    "repositories": repositories,
                    "captures": results,
                    "startup_s": startup,
                    "peak_rss_mb": rss,
                    "rss_change_mb": args.rss_mb,
                    "failures": bench.failures,
                },
                indent=2,
            )
            + "\n"
        )
    if bench.failures:
        print(f"error: {len(bench.failures)} measured command(s) failed", file=sys.stderr)
        return 1
    return 0


def run_base_trees(bench: Bench, args: argparse.Namespace, workdir: Path) -> int:
    """``--base-trees``: the measurements of :mod:`base_trees`, on the sizes
    asked for among 1k, 10k and 50k (all three by default)."""
    if bench.tool is None:
        raise SetupError("--base-trees needs the tool")
    sizes = [s for s in args.sizes if s in base_trees.SIZES] or list(base_trees.SIZES)
    repos = {size: prepare_repository(SPECS[size], workdir, bench.env) for size in sizes}
    progress(f"load average before: {base_trees.load_average()}")
    results = base_trees.measure_sizes(bench, repos, args.rounds or 5 if not args.quick else 1)
    together = None
    if "10k" in repos:
        together = base_trees.measure_together(bench, repos["10k"], args.rounds or 5)
    for line in base_trees.report(results, together):
        print(line)
    print(f"load average after: {base_trees.load_average()}")
    for repo in repos.values():  # the repositories are left as found
        measure(bench.tool.argv(["prune"]), cwd=repo, env=bench.tool.env(bench.env))
    if args.json:
        args.json.write_text(json.dumps({"base_trees": results, "together": together}) + "\n")
    return 1 if bench.failures else 0


if __name__ == "__main__":
    sys.exit(main())
