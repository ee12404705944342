"""Start-up: a run imports only what its path uses.  ``-h`` and
``--version`` load nothing beyond the parser; a plain unconfined capture
leaves the sandbox, the snapshot, the sparse checkout, the pool's refresh, rendering
and ``list``/``prune`` unloaded, and imports no module beyond the lists
below: a module that joins a plain run is a choice made here.  Its first
git process waits only for the checks' modules: the later steps, the
sandbox's launch and a plain run's temporary files load once it runs.  Found
with ``python -X importtime``, which names every module a process
imports, and by the modules loaded when the first git starts; no time is
asserted."""

from __future__ import annotations

import pytest
from repo_helpers import isopatch
from startup_helpers import (
    dataclasses_of,
    imported,
    imported_before_the_first_git,
    imported_by_the_libraries,
    named_tuples_of,
)

#: Modules only some paths need.
PATH_ONLY = {
    "git_isopatch.sandbox.namespaces",  # the sandbox (the default; not --no-sandbox)
    "git_isopatch.sandbox.inside",  # git-isopatch's own git inside it
    "ctypes",  # a pooled unconfined run's orphans (the seccomp filter is packed with struct)
    "git_isopatch.git.snapshot",  # --include-uncommitted
    "git_isopatch.git.sparse",  # --include-uncommitted in a sparse checkout
    "git_isopatch.git.refresh",  # isopatch.pool, unconfined
    "git_isopatch.git.sweep",  # isopatch.pool, a claim
    "hashlib",  # a path that differed from the base before the command
    "git_isopatch.render",  # a summary, --porcelain, --json, list
    "git_isopatch.manage",  # list, prune
    "git_isopatch.manage_cli",  # list, prune: their command line
    "git_isopatch.mcp_cli",  # git isopatch mcp
    "git_isopatch.sandbox.caches",  # writes the sandbox discarded
}

#: Every module of the package a plain unconfined run (``-q --no-sandbox --
#: true``, no pool) imports.  Each costs its load, its classes and what it
#: builds as it loads, on every run: one that joins the list says so here.
PLAIN_RUN = {
    "git_isopatch",
    "git_isopatch.capture",
    "git_isopatch.checkout",
    "git_isopatch.cli",
    "git_isopatch.entry",
    "git_isopatch.errors",
    "git_isopatch.execute",
    "git_isopatch.extract",
    "git_isopatch.git",
    "git_isopatch.git.admin_files",
    "git_isopatch.git.attributes",
    "git_isopatch.git.baseline",
    "git_isopatch.git.config",
    "git_isopatch.git.config_read",
    "git_isopatch.git.conversion_key",
    "git_isopatch.git.diff",
    "git_isopatch.git.files",
    "git_isopatch.git.ignored",
    "git_isopatch.git.index_entries",
    "git_isopatch.git.index_flags",
    "git_isopatch.git.intent_to_add",
    "git_isopatch.git.library",  # pygit2 without the certificates of a transport
    "git_isopatch.git.metadata",
    "git_isopatch.git.patch",
    "git_isopatch.git.patch.headers",
    "git_isopatch.git.patch.paths",
    "git_isopatch.git.pinned",
    "git_isopatch.git.process",
    "git_isopatch.git.progress",
    "git_isopatch.git.quote",
    "git_isopatch.git.record",  # the values' typed tuples
    "git_isopatch.git.repo",
    "git_isopatch.git.result",
    "git_isopatch.git.run",
    "git_isopatch.git.shared_state",
    "git_isopatch.git.status",
    "git_isopatch.git.stream",
    "git_isopatch.git.submodule",
    "git_isopatch.git.temporary",  # the run's private folder, its files
    "git_isopatch.git.types",
    "git_isopatch.git.worktree",
    "git_isopatch.hints",
    "git_isopatch.logger",
    "git_isopatch.outcome",
    "git_isopatch.populate",
    "git_isopatch.report",
    "git_isopatch.request",
    "git_isopatch.result",
    "git_isopatch.sandbox",
    "git_isopatch.sandbox.command",
    "git_isopatch.sandbox.command_outcome",
    "git_isopatch.sandbox.confinement",
    "git_isopatch.sandbox.forwarding",
    "git_isopatch.sandbox.launcher",
    "git_isopatch.sandbox.layers",
    "git_isopatch.sandbox.limits",
    "git_isopatch.sandbox.plan",
    "git_isopatch.sandbox.refusal",
    "git_isopatch.sandbox.terminal",
    "git_isopatch.settings",
    "git_isopatch.start",
    "git_isopatch.usage",
    "git_isopatch.values",
    "git_isopatch.worktrees",
    "git_isopatch.worktrees.deletion",
    "git_isopatch.worktrees.diff_index",
    "git_isopatch.worktrees.fidelity",
    "git_isopatch.worktrees.hooks",
    "git_isopatch.worktrees.include",
    "git_isopatch.worktrees.inventory",
    "git_isopatch.worktrees.isolation",
    "git_isopatch.worktrees.kept",
    "git_isopatch.worktrees.lifecycle",
    "git_isopatch.worktrees.lease",
    "git_isopatch.worktrees.lock",
    "git_isopatch.worktrees.mounts",
    "git_isopatch.worktrees.own_top",
    "git_isopatch.worktrees.placement",
    "git_isopatch.worktrees.provider",
    "git_isopatch.worktrees.registration",
    "git_isopatch.worktrees.removal",
    "git_isopatch.worktrees.results",
    "git_isopatch.worktrees.space",
    "git_isopatch.worktrees.store",
    "git_isopatch.worktrees.submodules",
    "git_isopatch.worktrees.worktree_git",
}

#: The standard library's modules a plain run imports beyond those that
#: ``import typer, pygit2`` imports, each with what needs it.
STDLIB_OF_A_PLAIN_RUN = {
    "runpy",  # python -m git_isopatch (the test's way in; not the executable's)
    "gc",  # the entry point: no collection while the modules load
    "atexit",  # the entry point's end runs the handlers the teardown would
    "json",  # the worktree records
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "_json",
    "shlex",  # the hooks a worktree must not run, quoted
    "termios",  # progress on a terminal
}

#: What a run's first git process does not wait for: the steps after the
#: checks (loaded beside an unconfined run's look at the checkout, when it
#: comes to them in a sandboxed run), ``list`` and ``prune``.
NOT_BEFORE_THE_FIRST_GIT = {
    "git_isopatch.execute",
    "git_isopatch.report",
    "git_isopatch.extract",
    "git_isopatch.manage_cli",
}

#: What a warm sandboxed run (its base tree kept) never loads: the pool
#: and what it keeps, and the checkouts of a base tree made or moved.
NOT_IN_A_WARM_SANDBOXED_RUN = {
    "git_isopatch.worktrees.pool",  # isopatch.pool: unconfined runs
    "git_isopatch.worktrees.conversions",  # a claimed worktree's kept answer
    "git_isopatch.git.checkouts",  # a base tree made or moved, a run layer at another commit
    "git_isopatch.git.progress",  # a checkout's progress on a terminal
    "ctypes",  # a pooled unconfined run's orphans
    "hashlib",  # OpenSSL's: the cache layer's names are the interpreter's SHA-256
    "socket",  # its enums: the launcher's socket pair and the host's name without them
    "termios",  # a terminal handed to the command (none here)
    "tempfile",  # its names are git.temporary's, without random's generator
    "random",
}

#: ``git -c`` for a sandboxed run with a checkout of its own.
NO_BASE_TREES = "'isopatch.baseTrees=0'"

#: What -h and --version must not load: anything beyond the parser.
BEYOND_THE_PARSER = PATH_ONLY | {
    "pygit2",
    "git_isopatch.capture",
    "git_isopatch.settings",
    "git_isopatch.git",
    "git_isopatch.worktrees",
    "git_isopatch.sandbox",
    "git_isopatch.worktrees.provider",
    "git_isopatch.worktrees.registration",
    "git_isopatch.errors",
}


@pytest.mark.parametrize("option", ["-h", "--version"])
def test_help_and_version_load_nothing_beyond_the_parser(env, make_repo, option) -> None:
    loaded = imported([option], make_repo(), env)
    assert loaded & BEYOND_THE_PARSER == set()


def test_a_plain_run_loads_only_what_it_uses(env, make_repo) -> None:
    loaded = imported(["-q", "--no-sandbox", "--", "true"], make_repo(), env)
    assert "pygit2" in loaded and "git_isopatch.capture" in loaded
    assert loaded & PATH_ONLY == set()
    assert "socket" not in loaded  # pygit2 without a transport's certificates loads none


def test_a_plain_run_imports_nothing_beyond_its_lists(env, make_repo) -> None:
    """By module name, not by time: the package's modules of a plain run
    are :data:`PLAIN_RUN`, and what it adds of the standard library to the
    floor of typer and pygit2 is :data:`STDLIB_OF_A_PLAIN_RUN`."""
    repo = make_repo()
    loaded = imported(["-q", "--no-sandbox", "--", "true"], repo, env)
    ours = {name for name in loaded if name.split(".")[0] == "git_isopatch"}
    assert ours - PLAIN_RUN == set(), "a plain run imports more of the package"
    others = loaded - ours - imported_by_the_libraries(repo, env)
    assert others - STDLIB_OF_A_PLAIN_RUN == set(), "a plain run imports more"
    assert "pygit2" in loaded and "typer" in loaded


def test_a_warm_sandboxed_run_loads_only_what_it_uses(env, make_repo) -> None:
    """A sandboxed run over a kept base tree leaves
    :data:`NOT_IN_A_WARM_SANDBOXED_RUN` unloaded; the run that makes the
    base tree checks it out (the check can fail)."""
    repo = make_repo()
    args = ["-q", "--sandbox", "--", "true"]
    assert "git_isopatch.git.checkouts" in imported(args, repo, env)
    assert imported(args, repo, env) & NOT_IN_A_WARM_SANDBOXED_RUN == set()


@pytest.mark.parametrize("names", ["BEFORE_THE_COMMAND", "AFTER_THE_COMMAND"])
def test_what_a_run_loads_beside_its_worktree_s_git_are_modules_of_the_package(names) -> None:
    """The modules a sandboxed run loads while its worktree's ``git
    worktree add`` runs, and while its command runs
    (:func:`git_isopatch.capture.load`), exist: a name that no longer does
    would fail there silently, and the run would load the rest after the
    wait again."""
    from importlib import import_module
    from importlib.util import find_spec

    procedure = import_module("git_isopatch.capture")  # the package exports capture()
    listed = getattr(procedure, names)
    assert listed and all(find_spec(name) is not None for name in listed)


def test_what_a_run_loads_beside_its_git_is_out_of_the_collector_s_reach(env, make_repo) -> None:
    """The modules :func:`git_isopatch.capture.load` loads are moved out of
    the collector's reach (``gc.freeze``), as the command line's are, and
    collection goes on after them."""
    import subprocess
    import sys

    script = (
        "import gc, importlib; capture = importlib.import_module('git_isopatch.capture'); "
        "gc.enable(); "
        "before = gc.get_freeze_count(); capture.load(['git_isopatch.extract']); "
        "print(gc.get_freeze_count() > before, gc.isenabled())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=make_repo(), env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_a_run_with_nothing_to_warn_of_never_loads_logging(env, make_repo) -> None:
    """The package's logger is made on its first use (:mod:`git_isopatch.logger`):
    a run that warns of nothing, sandboxed or not, never imports ``logging``."""
    repo = make_repo()
    for mode in ("--sandbox", "--no-sandbox"):
        assert "logging" not in imported(["-q", mode, "--", "true"], repo, env)


def test_a_warning_loads_logging_and_reads_as_git_s(env, make_repo) -> None:
    """The check above can fail: a run that warns loads it, and its
    warning still reads ``warning: ...`` (the command line's handler is
    set up as the logger is made)."""
    repo = make_repo()
    args = ["-q", "--no-sandbox", "--allow-network", "--", "true"]
    assert "logging" in imported(args, repo, env)
    done = isopatch(*args, cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"warning: --allow-network has no effect without --sandbox\n"


#: The dataclasses a run loads before its first git: each compiles its
#: methods as its module loads (2-5 M instructions each, more than a
#: NamedTuple or a plain class), on every run.  None: the worktree record
#: (mutable, 12 fields) is a plain class.
DATACLASSES_BEFORE_THE_FIRST_GIT: set[str] = set()


def test_the_modules_of_a_run_build_no_dataclass_beyond_the_list(env, make_repo) -> None:
    """By class, in the modules a plain and a sandboxed run (its sandbox
    check's answer kept; a checkout of its own, as a run over a kept base
    tree starts no git before its command) load before their first git: no
    dataclass joins them unlisted."""
    repo = make_repo()
    sandboxed = ["-q", "--sandbox", "--", "true"]
    imported_before_the_first_git(sandboxed, repo, env, config=NO_BASE_TREES)  # the check's answer
    loaded = imported_before_the_first_git(sandboxed, repo, env, config=NO_BASE_TREES)
    loaded |= imported_before_the_first_git(sandboxed, repo, env)  # its base tree made
    loaded |= imported_before_the_first_git(["-q", "--no-sandbox", "--", "true"], repo, env)
    ours = sorted(name for name in loaded if name.split(".")[0] == "git_isopatch")
    found = dataclasses_of(ours, repo, env)
    assert found - DATACLASSES_BEFORE_THE_FIRST_GIT == set(), "a dataclass joins a run's start"
    assert dataclasses_of(["git_isopatch.worktrees.sessions"], repo, env) == {
        "git_isopatch.worktrees.sessions.SessionRecord"
    }, "the check can fail"


def test_a_sandboxed_run_builds_no_dataclass_beyond_the_list(env, make_repo) -> None:
    """By class, in every module a sandboxed run that adds a file loads,
    through its extraction and its sandbox's end: no dataclass but those
    listed (the steps after the first git are on every run's way too)."""
    repo = make_repo()
    loaded = imported(["-q", "--sandbox", "--", "sh", "-c", "echo new > new.txt"], repo, env)
    ours = sorted(name for name in loaded if name.split(".")[0] == "git_isopatch")
    assert {"git_isopatch.extract", "git_isopatch.sandbox.confinement"} <= set(ours)
    found = dataclasses_of(ours, repo, env)
    assert found - DATACLASSES_BEFORE_THE_FIRST_GIT == set(), "a dataclass joins a run"


#: The named tuples a run loads (``typing.NamedTuple``: a ``compile`` of each
#: string annotation and an ``eval`` of its own ``__new__``, 0.2-1 ms each, on
#: every run): only those ``-h`` loads too, which may not load the git layer
#: where :class:`git_isopatch.git.record.Record` lives.
NAMED_TUPLES_OF_A_RUN = {
    "git_isopatch.request.CaptureRequest",
    "git_isopatch.result.CaptureResult",
    "git_isopatch.result.OutputMode",
    "git_isopatch.outcome.Rendering",
}


def test_the_modules_of_a_run_make_no_named_tuple_beyond_the_list(env, make_repo) -> None:
    """By class, in the modules a plain and a sandboxed run load (the
    sandboxed one over a kept base tree): their values are records."""
    repo = make_repo()
    sandboxed = ["-q", "--sandbox", "--", "true"]
    imported(sandboxed, repo, env)  # makes the base tree
    loaded = imported(sandboxed, repo, env) | imported(
        ["-q", "--no-sandbox", "--", "true"], repo, env
    )
    ours = sorted(name for name in loaded if name.split(".")[0] == "git_isopatch")
    found = named_tuples_of(ours, repo, env)
    assert NAMED_TUPLES_OF_A_RUN <= found, "the check can fail"
    assert found - NAMED_TUPLES_OF_A_RUN == set(), "a named tuple joins a run"


def test_the_paths_that_need_them_load_them(env, make_repo) -> None:
    """The check above can fail: the same probe sees the modules when the
    path needs them."""
    repo = make_repo()
    assert "git_isopatch.git.snapshot" in imported(
        ["-q", "--include-uncommitted", "--", "true"], repo, env
    )
    assert "git_isopatch.render" in imported(["--porcelain", "--", "true"], repo, env)
    sandboxed = imported(["-q", "--", "true"], repo, env)
    assert {"git_isopatch.sandbox.namespaces", "git_isopatch.sandbox.inside"} <= sandboxed
    # the pool serves unconfined runs (sandboxed ones go over base trees)
    unconfined = ["-q", "--no-sandbox", "--", "true"]
    imported(unconfined, repo, env, config="'isopatch.pool=1'")
    assert "git_isopatch.git.refresh" in imported(unconfined, repo, env, config="'isopatch.pool=1'")
    assert "git_isopatch.manage" in imported(["list"], repo, env)
    assert "git_isopatch.mcp_cli" in imported(["mcp", "-h"], repo, env)


def test_a_plain_runs_first_git_waits_only_for_its_checks(env, make_repo) -> None:
    loaded = imported_before_the_first_git(["-q", "--no-sandbox", "--", "true"], make_repo(), env)
    assert {"git_isopatch.start", "pygit2"} <= loaded
    # the run's temporary files and progress on a terminal come after it
    assert loaded & (NOT_BEFORE_THE_FIRST_GIT | {"tempfile", "termios"}) == set()


def test_a_sandboxed_runs_first_git_waits_for_no_launch(env, make_repo) -> None:
    """With the sandbox check's answer kept (the run before keeps it), the
    check loads nothing of the launch (the namespaces module) and a run
    with a checkout of its own its later steps only after its worktree's
    first git; a run over the kept base tree starts no git before its
    command (git takes its worktree as its top without being asked,
    :func:`git_isopatch.git.config_read.linked_top_may_move`)."""
    repo = make_repo()
    args = ["-q", "--sandbox", "--", "true"]
    imported_before_the_first_git(args, repo, env, config=NO_BASE_TREES)
    loaded = imported_before_the_first_git(args, repo, env, config=NO_BASE_TREES)
    assert "git_isopatch.sandbox.namespaces_check" in loaded
    assert loaded & (NOT_BEFORE_THE_FIRST_GIT | {"git_isopatch.sandbox.namespaces"}) == set()
    assert imported_before_the_first_git(args, repo, env)  # the base tree made
    assert imported_before_the_first_git(args, repo, env) == set()
