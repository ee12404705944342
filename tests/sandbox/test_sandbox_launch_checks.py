"""The sandbox's availability checks, kept between runs
(``git_isopatch.sandbox.availability``): a run checks once per boot,
user and context that bubblewrap makes the namespaces, the next runs
launch the command straight away; a kept answer that turns out wrong is
forgotten and the run fails as an unavailable sandbox does.

A ``bwrap`` on ``PATH`` (preferred to the wheel's) that logs each call and
runs the real one, then one that fails as where the kernel refuses user
namespaces.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from repo_helpers import isopatch, repo_state

from git_isopatch.sandbox import namespaces

#: Logs its arguments' first word, then is the real bubblewrap.
LOGGING = """\
#!/bin/sh
echo "${{1:-none}}" >> {log}
exec {real} "$@"
"""

#: Fails as bubblewrap does where the kernel refuses user namespaces.
REFUSED = """\
#!/bin/sh
if [ "$1" = --version ]; then exec {real} --version; fi
echo "bwrap: No permissions to create a new namespace" >&2
exit 1
"""


@pytest.fixture
def setting(env, tmp_path: Path):
    """The environment of a user with ``$XDG_RUNTIME_DIR`` and a logging
    ``bwrap`` first on ``PATH``; the log's path; the folder of the bwrap."""
    found = namespaces.find_bwrap()
    assert not isinstance(found, str), found
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "bwrap.log"
    (bin_dir / "bwrap").write_text(_sized(LOGGING.format(log=log, real=found.path)))
    (bin_dir / "bwrap").chmod(0o755)
    user = {**env, "XDG_RUNTIME_DIR": str(runtime), "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}
    return user, log, bin_dir, found.path


def _sized(script: str) -> str:
    """``script`` padded to one size: a wrapper rewritten stays the same
    file as far as its size and times tell."""
    assert len(script) < 2048
    return script + "#" * (2048 - len(script)) + "\n"


def _calls(log: Path) -> list[str]:
    calls = log.read_text().split() if log.exists() else []
    log.unlink(missing_ok=True)
    return calls


def _launches_alone(log: Path) -> bool:
    """Bubblewrap was called to launch the command, and for nothing else:
    no check.  A launch may come again when a mount moved under a
    copy-on-write folder as it was set up (other tests mount under
    ``/tmp``: the confinement's relaunch), never as a check."""
    calls = _calls(log)
    return bool(calls) and set(calls) == {LAUNCH}


#: The first word of the command's launch (the launcher is the namespace's
#: init), and of the check's (bubblewrap's own init runs ``true``).
LAUNCH, CHECK = "--as-pid-1", "--die-with-parent"


def test_the_second_run_launches_without_checking(setting, make_repo, no_leftovers) -> None:
    user, log, _, _ = setting
    repo = make_repo()
    first = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", "echo x > f", cwd=repo, env=user)
    assert first.returncode == 0, first.err
    calls = _calls(log)
    assert sorted(calls) == sorted(["--version", CHECK, LAUNCH]), calls
    kept = Path(user["XDG_RUNTIME_DIR"]) / "git-isopatch" / "sandbox-checks.json"
    assert kept.is_file() and os.stat(kept.parent).st_mode & 0o777 == 0o700
    for _ in range(2):
        again = isopatch(
            "--porcelain", "--sandbox", "--", "sh", "-c", "echo x > f", cwd=repo, env=user
        )
        assert again.returncode == 0, again.err
        assert again.fields()["files"] == "1"
        assert _launches_alone(log)


def test_a_changed_bwrap_is_checked_again(setting, make_repo, no_leftovers) -> None:
    user, log, bin_dir, _ = setting
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    _calls(log)
    wrapper = bin_dir / "bwrap"
    wrapper.write_text(wrapper.read_text() + "# changed\n")
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    assert "--version" in _calls(log)


def test_a_kept_answer_proved_wrong_is_forgotten(setting, make_repo, tmp_path: Path) -> None:
    """bubblewrap fails where it was kept as working (the same file, made
    to fail: as a sysctl changed without a reboot would): the run is
    ``sandbox-unavailable`` and the command does not run; the next run
    checks again and stops before anything is made."""
    user, log, bin_dir, real = setting
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    wrapper = bin_dir / "bwrap"
    stat = wrapper.stat()
    wrapper.write_text(_sized(REFUSED.format(real=real)))
    os.utime(wrapper, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same file, as far as kept
    marker = tmp_path / "ran"
    before = repo_state(repo, env=user)
    run = isopatch("--porcelain", "--sandbox", "--", "touch", marker, cwd=repo, env=user)
    assert run.returncode == 128, run.err
    assert run.fields()["error-code"] == "sandbox-unavailable"
    assert "No permissions to create a new namespace" in run.err
    assert not marker.exists()
    assert not (Path(user["XDG_RUNTIME_DIR"]) / "git-isopatch" / "sandbox-checks.json").exists()
    again = isopatch("--porcelain", "--sandbox", "--", "touch", marker, cwd=repo, env=user)
    assert again.returncode == 128
    assert again.err.startswith(
        "fatal: --sandbox is not available: bubblewrap cannot make the namespaces here "
        "(No permissions to create a new namespace"
    ), again.err
    assert not marker.exists()
    assert repo_state(repo, env=user) == before


def test_a_refusal_is_kept_too(setting, make_repo) -> None:
    """Where bubblewrap cannot make namespaces, the next run knows it
    without asking, and says what is missing in the same words."""
    user, log, bin_dir, real = setting
    (bin_dir / "bwrap").write_text(REFUSED.format(real=real))
    repo = make_repo()
    said = []
    for _ in range(2):
        run = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user)
        assert run.returncode == 128
        said.append(run.err.splitlines()[0])
    assert said[0] == said[1] and "No permissions to create a new namespace" in said[0]


@pytest.mark.parametrize("mode", [0o755, None], ids=["not-private", "unset"])
def test_without_a_private_runtime_folder_the_cache_keeps_it(
    setting, make_repo, no_leftovers, mode
) -> None:
    """As in CI jobs and containers, where no login session made
    ``$XDG_RUNTIME_DIR``: the answer goes to ``~/.cache/git-isopatch``,
    made private, and the next run launches without checking."""
    user, log, _, _ = setting
    runtime = Path(user["XDG_RUNTIME_DIR"])
    del user["XDG_CACHE_HOME"]  # the default, ~/.cache
    if mode is None:
        del user["XDG_RUNTIME_DIR"]
    else:
        runtime.chmod(mode)
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    assert "--version" in _calls(log)
    kept = Path(user["HOME"]) / ".cache" / "git-isopatch" / "sandbox-checks.json"
    assert kept.is_file() and os.stat(kept.parent).st_mode & 0o777 == 0o700
    assert not (runtime / "git-isopatch").exists()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    assert _launches_alone(log)


@pytest.mark.parametrize("cache", ["not-private", "link", "relative"])
def test_nothing_is_kept_without_a_private_folder(
    setting, make_repo, no_leftovers, tmp_path: Path, cache
) -> None:
    """Neither folder the user's own of mode 0700 (``$XDG_CACHE_HOME``'s
    ``git-isopatch`` open to others, reached through a symbolic link, or
    ``$XDG_CACHE_HOME`` and ``$HOME`` relative, which the XDG
    specification says to ignore): every run checks, nothing is written."""
    user, log, _, _ = setting
    del user["XDG_RUNTIME_DIR"]
    home_cache = Path(user["HOME"]) / ".cache"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if cache == "relative":
        user["XDG_CACHE_HOME"] = "cache"
        user["HOME"] = "home"
        folder = home_cache / "git-isopatch"
    else:
        user["XDG_CACHE_HOME"] = str(tmp_path / "xdg-cache")
        folder = tmp_path / "xdg-cache" / "git-isopatch"
        folder.parent.mkdir()
        if cache == "link":
            folder.symlink_to(elsewhere, target_is_directory=True)
        else:
            folder.mkdir()
            folder.chmod(0o755)
    repo = make_repo()
    for _ in range(2):
        assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
        assert "--version" in _calls(log)
    assert not (folder / "sandbox-checks.json").exists()
    assert not (elsewhere / "sandbox-checks.json").exists()
    assert not (home_cache / "git-isopatch").exists()


def test_nothing_is_kept_in_the_work_tree_of_the_run(setting, make_repo, no_leftovers) -> None:
    """A repository of dotfiles, whose work tree is ``$HOME``: the cache
    folder would be in it, and git-isopatch never writes the user's work
    tree.  Every run checks, and the checkout stays as it was."""
    user, log, _, _ = setting
    del user["XDG_RUNTIME_DIR"]
    del user["XDG_CACHE_HOME"]
    repo = make_repo({".profile": "export EDITOR=vi\n"}, name="dotfiles")
    user["HOME"] = str(repo)
    before = repo_state(repo, env=user)
    for _ in range(2):
        assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
        assert "--version" in _calls(log)
    assert not (repo / ".cache").exists()
    assert repo_state(repo, env=user) == before


#: Rewrites the kept answers ``argv[1]`` to name ``argv[2]``, a program
#: of its own written with ``argv[3]``, for bubblewrap.
POISON = """\
import json, os, sys
kept_path, fake = sys.argv[1], sys.argv[2]
with open(fake, "w") as handle:
    handle.write(sys.argv[3])
os.chmod(fake, 0o755)
st = os.stat(fake)
with open(kept_path) as handle:
    kept = json.load(handle)
for check, value in kept.items():
    if check.startswith("bwrap-"):
        value["answer"]["path"] = fake
        value["answer"]["file"] = [fake, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
with open(kept_path, "w") as handle:
    json.dump(kept, handle)
"""

#: A "bwrap" that leaves a mark, then runs the command unconfined.
UNCONFINED = """\
#!/bin/sh
touch {mark}
while [ "$1" != -- ]; do shift; done
shift
exec "$@"
"""


def _poison(user: dict[str, str], tmp_path: Path) -> tuple[list[str], Path, Path]:
    """The argument list of :data:`POISON` for the kept answers of ``user``
    (in ``$XDG_CACHE_HOME``), the kept file and the mark its bwrap leaves."""
    cache = Path(user["XDG_CACHE_HOME"])
    kept = cache / "git-isopatch" / "sandbox-checks.json"
    script, mark = tmp_path / "poison.py", tmp_path / "fake-bwrap-ran"
    script.write_text(POISON)
    argv = ["python3", str(script), str(kept), str(cache / "bwrap"), UNCONFINED.format(mark=mark)]
    return argv, kept, mark


def test_a_kept_answer_cannot_name_another_bwrap(setting, make_repo, tmp_path: Path) -> None:
    """Whoever can write the cache folder (a command allowed to write a
    folder above it can move it away and put its own) rewrites the kept
    answer to name a program of its own for bubblewrap: the next
    ``--sandbox`` run does not start it (it would run the command
    unconfined), it uses the bwrap it would find, and the command stays
    confined."""
    user, log, _, _ = setting
    del user["XDG_RUNTIME_DIR"]
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    argv, kept, mark = _poison(user, tmp_path)
    subprocess.run(argv, check=True)
    assert "bwrap" in kept.read_text()
    outside = tmp_path / "outside"
    run = isopatch("--sandbox", "--", "touch", outside, cwd=repo, env=user)
    assert not mark.exists(), "the command's own program ran as bwrap"
    assert not outside.exists(), "the command ran unconfined"
    assert run.returncode == 0 and "outside its worktree, discarded" in run.err, run.err
    assert LAUNCH in _calls(log)


@pytest.mark.parametrize("allowed", ["cache", "file"])
def test_a_command_allowed_to_write_the_cache_cannot_rewrite_the_answers(
    setting, make_repo, no_leftovers, allowed
) -> None:
    """``--allow-write`` of the folder holding the kept answers' (as for a
    package manager's cache in ``~/.cache``), or of their file itself: the
    answers' folder stays read-only for the command, whose rewrite fails;
    the rest of the cache is the command's to write."""
    user, log, _, _ = setting
    del user["XDG_RUNTIME_DIR"]
    cache = Path(user["XDG_CACHE_HOME"])
    kept = cache / "git-isopatch" / "sandbox-checks.json"
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    before = kept.read_bytes()
    (cache / "pip").mkdir()
    script = f"echo '{{}}' > {kept}; touch {cache / 'pip' / 'wheel'}"
    allow = cache if allowed == "cache" else kept
    run = isopatch(
        "--sandbox", "-q", "--allow-write", allow, "--allow-write", cache / "pip",
        "--", "sh", "-c", script, cwd=repo, env=user,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert "Read-only file system" in run.err
    assert kept.read_bytes() == before
    assert (cache / "pip" / "wheel").exists()


def test_a_kept_answer_that_is_a_fifo_does_not_hang_the_run(
    setting, make_repo, no_leftovers
) -> None:
    """A command allowed to write the cache folder leaves a FIFO for the
    kept answer: the next runs do not wait on it for ever, they check
    again and keep their answer in a file."""
    user, log, _, _ = setting
    del user["XDG_RUNTIME_DIR"]
    kept = Path(user["XDG_CACHE_HOME"]) / "git-isopatch" / "sandbox-checks.json"
    repo = make_repo()
    assert isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user).returncode == 0
    kept.unlink()
    os.mkfifo(kept)
    _calls(log)
    run = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user, timeout=30)
    assert run.returncode == 0, run.err
    assert "--version" in _calls(log)
    assert kept.is_file()


class _SwapAfterLook:
    """Replaces the folder of the kept answers with a symbolic link to
    ``target`` at the worst moment for the reader: right after it opened
    the folder itself, or right before it reaches into the folder by its
    path (after every look at it by name).  Wraps ``os`` functions of this
    process for paths of that folder only."""

    def __init__(self, folder: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.folder, self.target, self.swapped = str(folder), target, False
        for name in ("open", "lstat", "stat", "mkdir", "unlink", "replace"):
            monkeypatch.setattr(os, name, self._wrap(getattr(os, name), name == "open"))

    def _swap(self) -> None:
        if not self.swapped:
            self.swapped = True
            os.rename(self.folder, self.folder + ".moved")
            os.symlink(self.target, self.folder)

    def _wrap(self, real, opens: bool):
        def wrapped(path, *args, **kwargs):
            if isinstance(path, (str, Path)) and str(path).startswith(self.folder + "/"):
                self._swap()
            result = real(path, *args, **kwargs)
            if opens and isinstance(path, (str, Path)) and str(path) == self.folder:
                self._swap()
            return result

        return wrapped


@pytest.mark.hostile
@pytest.mark.parametrize("use", ["recall", "remember"])
def test_the_folder_swapped_for_a_link_after_a_look_is_not_followed(
    make_repo, env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use
) -> None:
    """Whoever can write the folder above the kept answers' swaps that
    folder for a link between git-isopatch's look at it and its use: the
    answers are read from the folder looked at, never a forged one where
    the link leads, and written there, never into where it leads (the
    user's work tree)."""
    from git_isopatch.sandbox import availability

    repo = make_repo()
    before = repo_state(repo, env)
    cache = tmp_path / "xdg"
    folder = cache / "git-isopatch"
    folder.mkdir(parents=True, mode=0o700)
    user = {"XDG_CACHE_HOME": str(cache), "HOME": env["HOME"], "PATH": env["PATH"]}
    kept = {"probe": {"context": availability.context(user), "answer": "as looked at"}}
    (folder / availability.FILE_NAME).write_text(json.dumps(kept))
    forged = tmp_path / "forged"
    forged.mkdir(mode=0o700)
    kept["probe"]["answer"] = "forged"
    (forged / availability.FILE_NAME).write_text(json.dumps(kept))
    monkeypatch.setattr(availability, "_loaded", None)
    swap = _SwapAfterLook(folder, forged if use == "recall" else repo, monkeypatch)
    if use == "recall":
        answer = availability.recall("probe", user, work_tree=str(tmp_path / "elsewhere"))
        assert answer == "as looked at"
    else:
        availability.remember("probe", "new", user, work_tree=str(tmp_path / "elsewhere"))
        monkeypatch.undo()
        assert repo_state(repo, env) == before
        assert sorted(os.listdir(repo)) == [".git", "README"]
    assert swap.swapped


@pytest.mark.parametrize("where", ["runtime-link", "file", "proc-cwd", "in-work-tree", "git-dir"])
def test_odd_folders_for_the_answers_keep_nothing(
    setting, make_repo, no_leftovers, tmp_path: Path, where
) -> None:
    """``$XDG_RUNTIME_DIR/git-isopatch`` a link to another folder,
    ``$XDG_CACHE_HOME`` a file, ``/proc/self/cwd`` (the checkout, where
    git isopatch stands), a folder of the work tree or the repository's
    ``.git``: the runs work, check each time, and write neither there nor
    where a link leads."""
    user, log, _, _ = setting
    repo = make_repo()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if where == "runtime-link":
        (Path(user["XDG_RUNTIME_DIR"]) / "git-isopatch").symlink_to(elsewhere)
    else:
        del user["XDG_RUNTIME_DIR"]
        user["XDG_CACHE_HOME"] = {
            "file": str(repo / "README"),
            "proc-cwd": "/proc/self/cwd",
            "in-work-tree": str(repo / "cache"),
            "git-dir": str(repo / ".git"),
        }[where]
    before = repo_state(repo, user)
    for _ in range(2):
        run = isopatch("--sandbox", "-q", "--", "true", cwd=repo, env=user)
        assert run.returncode == 0, run.err
        assert "--version" in _calls(log)
    assert os.listdir(elsewhere) == []
    assert sorted(os.listdir(repo)) == [".git", "README"]
    assert not (repo / ".git" / "git-isopatch").exists()
    assert repo_state(repo, user) == before
