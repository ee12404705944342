"""Test helpers: hermetic git, real repositories, the installed
``git-isopatch`` executable, and a snapshot of everything in a user's
repository that git-isopatch must never write to.  Fixtures are in
``conftest.py``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN_DIR = Path(sys.executable).parent
ISOPATCH = BIN_DIR / "git-isopatch"

IDENTITY = {
    "GIT_AUTHOR_NAME": "Isopatch Test",
    "GIT_AUTHOR_EMAIL": "test@isopatch.invalid",
    "GIT_COMMITTER_NAME": "Isopatch Test",
    "GIT_COMMITTER_EMAIL": "test@isopatch.invalid",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def hermetic_environ(home: Path, tmpdir: Path) -> dict[str, str]:
    """os.environ without any GIT_* variable, with its own HOME and TMPDIR,
    no system config, fixed identities, and the test venv's bin on PATH.
    ``XDG_CACHE_HOME`` is a folder beside ``home``: git-isopatch keeps the
    sandbox's availability there when there is no ``XDG_RUNTIME_DIR``, and
    the tests that compare every file of ``HOME`` before and after a run
    look for what the command wrote, not for that."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(IDENTITY)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home.parent / "xdg-cache"),
        TMPDIR=str(tmpdir),
        GIT_CONFIG_NOSYSTEM="1",
        LC_ALL="C.UTF-8",
        PATH=f"{BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    env.pop("MANPATH", None)
    return env


def without_program_on_path(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """``env`` whose ``PATH`` is the test venv's bin and ``folder`` holding
    only a link to the real ``git``: a program git would find on the
    machine's ``PATH`` (git-lfs, installed where CI installs it) is not
    found, as on a machine without it."""
    folder.mkdir(parents=True, exist_ok=True)
    real_git = shutil.which("git", path=env.get("PATH"))
    assert real_git is not None
    (folder / "git").symlink_to(real_git)
    return {**env, "PATH": f"{BIN_DIR}{os.pathsep}{folder}"}


def git(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> bytes:
    """Run real git; return stdout bytes (raises on failure when ``check``)."""
    done = subprocess.run(
        ["git", *map(os.fspath, args)],
        cwd=cwd,
        env=dict(env or os.environ),
        input=input,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"git {' '.join(map(str, args))} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace')}"
        )
    return done.stdout


def write_tree(top: Path, files: Mapping[str, bytes | str]) -> None:
    """Write ``files`` (relative path -> content) under ``top``.  A value
    starting with ``symlink:`` makes a symbolic link to the rest."""
    for name, content in files.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and content.startswith("symlink:"):
            os.symlink(content[len("symlink:") :], path)
            continue
        data = content.encode() if isinstance(content, str) else content
        path.write_bytes(data)


@dataclass
class Run:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8", "replace")

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def fields(self) -> dict[str, str]:
        """Porcelain v1 records (newline-ended) as a dict."""
        return dict(line.split(" ", 1) for line in self.out.splitlines() if line)


def write_outside_attributes(
    repo: Path, env: Mapping[str, str], where: str, rules: str, folder: Path
) -> None:
    """Write gitattributes ``rules`` where they apply without being tracked
    (gitattributes(5)): ``info`` (``$GIT_DIR/info/attributes``), ``xdg``
    (``$XDG_CONFIG_HOME/git/attributes``) or ``configured`` (a file in
    ``folder`` named by ``core.attributesFile``)."""
    if where == "info":
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "attributes").write_text(rules)
    elif where == "xdg":
        (Path(env["XDG_CONFIG_HOME"]) / "git").mkdir(parents=True)
        (Path(env["XDG_CONFIG_HOME"]) / "git" / "attributes").write_text(rules)
    elif where == "configured":
        (folder / "attributes").write_text(rules)
        git("config", "core.attributesFile", str(folder / "attributes"), cwd=repo, env=env)
    else:
        raise ValueError(where)


def isopatch(
    *args: str | os.PathLike[str],
    cwd: Path,
    env: Mapping[str, str],
    input: bytes | None = None,
    timeout: float = 120,
    via_git: bool = False,
    git_options: tuple[str, ...] = (),
) -> Run:
    """Run the installed ``git-isopatch`` executable (or ``git [<git_options>]
    isopatch``, e.g. ``git_options=("-c", "isopatch.link=x")``); a
    ``--json`` output is checked against its schema
    (:func:`schema_helpers.check_json_output`)."""
    argv = ["git", *git_options, "isopatch"] if via_git or git_options else [str(ISOPATCH)]
    done = subprocess.run(
        [*argv, *map(os.fspath, args)],
        cwd=cwd,
        env=dict(env),
        input=input,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=timeout,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    # every --json output is checked against the schema that ships
    from schema_helpers import check_json_output

    check_json_output([os.fspath(a) for a in args], done.stdout, done.returncode)
    return Run(done.returncode, done.stdout, done.stderr)


def tree_manifest(top: Path, exclude: tuple[str, ...] = (".git",)) -> dict[bytes, tuple]:
    """Every file and symlink under ``top``: path bytes -> ("link", target)
    or ("file", executable, sha256).  Folders are not listed (git does not
    track them); top-level names in ``exclude`` are skipped."""
    manifest: dict[bytes, tuple] = {}
    root = os.fsencode(top)
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        if rel_folder == b".":
            dirs[:] = [d for d in dirs if os.fsdecode(d) not in exclude]
            files = [f for f in files if os.fsdecode(f) not in exclude]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if os.path.islink(path):
                manifest[rel] = ("link", os.readlink(path))
            else:
                with open(path, "rb") as handle:
                    digest = hashlib.sha256(handle.read()).hexdigest()
                manifest[rel] = ("file", bool(os.stat(path).st_mode & 0o100), digest)
    return manifest


def repo_state(top: Path, env: Mapping[str, str]) -> dict[str, object]:
    """Everything git-isopatch must leave bit-identical in the user's
    repository: work tree, index, HEAD, refs, stash, config, worktree list."""
    git_dir = Path(git("rev-parse", "--absolute-git-dir", cwd=top, env=env).decode().strip())
    common = Path(git("rev-parse", "--git-common-dir", cwd=top, env=env).decode().strip())
    common = common if common.is_absolute() else (top / common).resolve()

    def read(path: Path) -> bytes | None:
        return path.read_bytes() if path.exists() else None

    def stat(path: Path) -> tuple[int, int] | None:
        """(inode, mtime in ns): a rewrite or a refresh of the index shows."""
        return (path.stat().st_ino, path.stat().st_mtime_ns) if path.exists() else None

    refs = {
        str(p.relative_to(common)): p.read_bytes()
        for p in sorted((common / "refs").rglob("*"))
        if p.is_file()
    }
    return {
        "work tree": tree_manifest(top),
        "index": read(git_dir / "index"),
        "index stat": stat(git_dir / "index"),
        "HEAD": read(git_dir / "HEAD"),
        "refs": refs,
        "packed-refs": read(common / "packed-refs"),
        "stash": git("stash", "list", cwd=top, env=env),
        "config": read(common / "config"),
        "worktree list": _without_base_trees(
            git("worktree", "list", "--porcelain", cwd=top, env=env)
        ),
        "logs/HEAD": read(git_dir / "logs" / "HEAD"),
    }


def _without_base_trees(listing: bytes) -> bytes:
    """``git worktree list --porcelain`` without git-isopatch's base trees:
    the cache of checkouts sandboxed runs share, kept by design
    (``isopatch.baseTrees``) and visible there, as git lists every
    registered worktree; they are locked with their own reason."""
    blocks = listing.split(b"\n\n")
    return b"\n\n".join(b for b in blocks if b"\nlocked git-isopatch base tree" not in b)


def registered_worktrees(repo: Path, env: Mapping[str, str]) -> list[str]:
    """``worktree <path>`` lines of ``git worktree list --porcelain`` but the
    first (the work tree ``repo`` belongs to) and git-isopatch's base trees
    (:func:`base_trees`)."""
    out = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    listed = [line for line in out.splitlines() if line.startswith("worktree ")][1:]
    ours = {f"worktree {path}" for path in base_trees(repo, env)}
    return [line for line in listed if line not in ours]


def worktree_list(repo: Path, env: Mapping[str, str]) -> bytes:
    """``git worktree list --porcelain`` without git-isopatch's base trees
    (:func:`base_trees`)."""
    return _without_base_trees(git("worktree", "list", "--porcelain", cwd=repo, env=env))


def base_trees(repo: Path, env: Mapping[str, str]) -> list[str]:
    """The base trees git-isopatch keeps for ``repo``'s sandboxed runs (in
    ``$GIT_COMMON_DIR/isopatch/``, or under ``isopatch.tmpdir``), as
    ``git worktree list`` names them: locked with their own reason."""
    out = git("worktree", "list", "--porcelain", cwd=repo, env=env).decode()
    blocks = [block.splitlines() for block in out.split("\n\n") if block]
    return [
        block[0][len("worktree ") :] for block in blocks if "locked git-isopatch base tree" in block
    ]


def started_gits(trace: Path) -> list[list[str]]:
    """The arguments of each git process a ``GIT_TRACE2_EVENT`` file
    ``trace`` saw start (none when no git wrote it)."""
    if not trace.exists():
        return []
    events = map(json.loads, trace.read_text().splitlines())
    return [event["argv"][1:] for event in events if event["event"] == "start"]


def apply_to_clean_checkout(
    repo: Path, base: str, patch: Path, dest: Path, env: Mapping[str, str]
) -> Path:
    """Clone ``repo`` into ``dest``, check out ``base`` detached, and
    ``git apply`` ``patch`` there; return ``dest``."""
    git("clone", "-q", "--no-checkout", "--shared", repo, dest, cwd=repo.parent, env=env)
    git("checkout", "-q", "--detach", base, cwd=dest, env=env)
    if patch.stat().st_size:
        git("apply", "--binary", "--whitespace=nowarn", patch, cwd=dest, env=env)
    return dest


@contextlib.contextmanager
def tmpfs(mountpoint: Path, size: str, *options: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``"256k"``) at ``mountpoint``; we
    run as root, so a full or read-only file system is how writes fail."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", "mode=0777", *options))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount): {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)
