"""Test helpers for real tools under the sandbox (issue 19, "Real tools"):
one command run sandboxed and unconfined on the same repository, with the
user's repository and ``$HOME`` checked around the sandboxed run.

A tool gives byte for byte the same patch under the sandbox as unconfined,
and the sandboxed run changes nothing of the user's: not the repository
(:func:`repo_helpers.repo_state`, its work tree's ignored files included),
not ``$HOME`` (:func:`home_state`: every entry, its metadata and content).
The sandboxed run goes first, so that it sees only what the test prepared
(a warm cache, made before), never what an unconfined run left.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from repo_helpers import Run, isopatch, repo_state


def home_state(home: Path) -> dict[bytes, tuple]:
    """Every entry under ``home`` (not following links): its type, mode,
    owner, size, modification and change times, and its content (a
    digest) or link target.  A write, a chmod, a touch, a file made and
    removed again (its folder's times) all show."""
    state: dict[bytes, tuple] = {}
    root = os.fsencode(home)
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                content: bytes | str = os.readlink(path)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    content = hashlib.sha256(handle.read()).hexdigest()
            else:
                content = ""
            times = () if stat.S_ISLNK(st.st_mode) else (st.st_mtime_ns, st.st_ctime_ns)
            meta = (st.st_mode, st.st_uid, st.st_gid, st.st_size, *times)
            state[os.path.relpath(path, root)] = (*meta, content)
    return state


@dataclass
class Pair:
    """The sandboxed and the unconfined run of one command (porcelain)."""

    sandboxed: Run
    unconfined: Run

    @staticmethod
    def patch(run: Run) -> bytes:
        return Path(run.fields()["patch"]).read_bytes()

    @staticmethod
    def output(run: Run, stream: str) -> str:
        return Path(run.fields()[stream]).read_text(errors="replace")

    def describe(self) -> str:
        """Both runs' summaries and the command's stderr, for a failure."""
        return "\n".join(
            f"--- {name}: {run.err}{self.output(run, 'stderr') if 'stderr' in run.fields() else ''}"
            for name, run in (("sandboxed", self.sandboxed), ("unconfined", self.unconfined))
        )

    def same_patch(self, exit_code: int = 0) -> bytes:
        """Both exited ``exit_code`` and their patches are the same bytes,
        not empty; returns the patch."""
        for run in (self.sandboxed, self.unconfined):
            assert run.fields().get("exit") == str(exit_code), self.describe()
        patch = self.patch(self.sandboxed)
        assert patch, "the tool changed nothing: " + self.describe()
        assert patch == self.patch(self.unconfined), self.describe()
        return patch


def sandboxed_and_unconfined(
    repo: Path,
    command: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    options: Sequence[str] = (),
    cwd: Path | None = None,
    timeout: float = 180,
) -> Pair:
    """Run ``command`` through ``git isopatch --porcelain`` with ``options``,
    first under the default (``isopatch.sandbox=auto``), which must have
    confined it (``sandbox true``; the repository and ``$HOME`` must be as
    they were after it), then with ``--no-sandbox``."""
    home = Path(env["HOME"])
    repo_before, home_before = repo_state(repo, env), home_state(home)
    runs = []
    for mode in ((), ("--no-sandbox",)):
        runs.append(
            isopatch(
                "--porcelain",
                *mode,
                *options,
                "--",
                *command,
                cwd=cwd or repo,
                env=env,
                timeout=timeout,
            )
        )
        if not mode:
            assert runs[0].returncode != 128, runs[0].err
            assert runs[0].fields()["sandbox"] == "true", runs[0].out
            assert repo_state(repo, env) == repo_before, "the sandboxed run changed the repo"
            assert _changes(home_before, home_state(home)) == [], "the sandboxed run changed HOME"
    return Pair(*runs)


def _changes(before: dict[bytes, tuple], after: dict[bytes, tuple]) -> list[bytes]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def quiet_by_default(
    repo: Path,
    command: Sequence[str | os.PathLike[str]],
    env: Mapping[str, str],
    exit_code: int = 0,
) -> str:
    """Run ``command`` sandboxed with the human summary, then with ``-q``:
    what it writes outside its worktree (its caches, its logs, temporary
    files) is one ``isopatch: discarded ...`` line, no ``warning:`` and no
    ``hint:`` but the next step's; with ``-q``, nothing of git-isopatch's
    at all.  Returns the summary line.  Without the cache layer, which
    keeps the writes to the caches instead (``test_sandbox_cache_layer.py``)."""
    shown = isopatch("--sandbox", "--no-cache", "--", *command, cwd=repo, env=env, timeout=180)
    assert shown.returncode == exit_code, shown.err
    ours = [line for line in shown.err.splitlines() if line.startswith(("warning:", "hint:"))]
    assert [line for line in ours if not line.startswith("hint: to apply it")] == [], shown.err
    (line,) = [line for line in shown.err.splitlines() if line.startswith("isopatch: discarded")]
    assert line.startswith("isopatch: discarded "), line
    quiet = isopatch(
        "--sandbox", "--no-cache", "-q", "--", *command, cwd=repo, env=env, timeout=180
    )
    assert quiet.returncode == exit_code, quiet.err
    said = [
        line
        for line in quiet.err.splitlines()
        if line.startswith(("isopatch:", "warning:", "hint:"))
    ]
    assert said == [], quiet.err
    return line
