"""The advice a run gives, one ``hint:`` line each: for a command that
could not run a program (:func:`command_hints`), that failed where git
signs (:func:`signing_hints`), where a local clone hard-links
(:func:`hard_link_hints`) or in the default sandbox
(:func:`sandbox_hint`), that named a path in an empty submodule
(:func:`submodule_hints`) or wrote into the checkout it named
(:func:`checkout_path_hints`), and for a run from ``HEAD`` that left the user's
uncommitted changes out (:data:`UNCOMMITTED_HINT`).  Each is decided on
what the run saw, never on timing."""

from __future__ import annotations

import contextlib
import os
import posixpath
import shlex
from collections.abc import Sequence

from .git.files import HOST_FILES, WorktreeFiles
from .git.result import Ok
from .git.run import run_git
from .sandbox.command import CommandOutcome
from .values import Start

#: Folders of installed dependencies that commands commonly need and git
#: does not track: npm, pnpm and yarn's ``node_modules``, a Python virtual
#: environment ``.venv``, Go, PHP and Ruby's ``vendor``.
DEPENDENCY_FOLDERS = ("node_modules", ".venv", "vendor")
#: Where those folders keep the programs they install.
PROGRAM_FOLDERS = ("node_modules/.bin", ".venv/bin", "vendor/bin")
#: Exit statuses for a program that was not found (127) or could not be
#: executed (126), as POSIX shells report it ("Command Search and
#: Execution") and npm, make and ``sh -c`` pass it on.
NOT_RUNNABLE = frozenset({126, 127})
#: git-isopatch's subcommands, recognised only as its first argument: after
#: an option (``-C <path> list``, git's own order) they name a program.
SUBCOMMANDS = ("list", "prune", "mcp")


def _runs_a_package(command: Sequence[str]) -> bool:
    """``command`` runs a package's tool through ``npx``, ``npm exec`` or
    ``npm x``: without ``node_modules`` these fall back to downloading the
    package, which fails (exit 1, not 127) where there is no network."""
    name = posixpath.basename(command[0]) if command else ""
    if name == "npx":
        return True
    return name == "npm" and len(command) > 1 and command[1] in ("exec", "x")


#: What the network hint says happened; the way out follows it.
NETWORK_REFUSED = "the command failed after trying the network, which the sandbox keeps from it"
#: The hint for a command that failed after the sandbox's network refused it.
NETWORK_HINT = (
    f"{NETWORK_REFUSED}; --allow-network keeps the network, --no-sandbox runs it unconfined"
)


def sandbox_hint(start: Start, outcome: CommandOutcome) -> tuple[str, ...]:
    """The hint for a command that failed in the default sandbox
    (``isopatch.sandbox=auto``) after its network refused something
    (:attr:`~.sandbox.command.CommandOutcome.network_refused`: the kernel's
    count, not the command's words): the network it lacked, and the way
    out.  None for a failure that never touched the network (a linter's
    exit 1 says "issues found"), for one that was signalled, timed out or
    could not run a program (126, 127), nor under ``--sandbox``, which the
    user asked for, or ``--allow-network``."""
    failed = outcome.exit_code != 0 and outcome.exit_code not in NOT_RUNNABLE
    ended_otherwise = (
        outcome.timed_out
        or outcome.died_of is not None
        or outcome.received_signal is not None
        or outcome.start_error is not None
    )
    if not start.sandboxed_by_default or not failed or ended_otherwise:
        return ()
    if start.sandbox.allow_network or not outcome.network_refused:
        return ()
    return (NETWORK_HINT,)


#: The advice for a sandboxed command that failed after it hard-linked a
#: file of a repository's object store outside its worktree (git's local
#: clone: "hardlink different from source").
HARD_LINK_HINT = (
    "a local git clone cannot hard-link a repository's objects through the sandbox's "
    "copy-on-write layer (git: 'hardlink different from source'); clone with "
    "--no-hardlinks or --no-local, or into the worktree"
)


def hard_link_hints(outcome: CommandOutcome, outside_writes: Sequence[str]) -> tuple[str, ...]:
    """:data:`HARD_LINK_HINT` when the sandboxed command failed and the
    copy-on-write layer holds a file of an object store (``objects/``) that
    is still there outside it: a file copied up, not made, which is what a
    hard link to it does.  overlayfs, mounted in a user namespace (its
    ``userxattr`` option), has no inode index: the link gets the upper
    copy's inode, not the source's, and git's local clone, which checks
    that they agree since the fix of CVE-2022-39253 (builtin/clone.c,
    ``copy_or_link_directory``), dies.  A clone into the worktree (another
    mount: ``EXDEV``) copies instead.  Decided on the layer, never on the
    command's output."""
    if outcome.exit_code in (0, *NOT_RUNNABLE) or outcome.died_of is not None:
        return ()
    for path in outside_writes:
        if "/objects/" in path and os.path.isfile(path) and not os.path.islink(path):
            return (HARD_LINK_HINT,)
    return ()


def command_hints(
    command: Sequence[str],
    outcome: CommandOutcome,
    top: str,
    worktree: str,
    prefix: str = "",
    files: WorktreeFiles = HOST_FILES,
    search_path: str = "",
) -> tuple[str, ...]:
    """Advice for a command that could not run a program (exit 126 or
    127; see :data:`NOT_RUNNABLE`), one line each:

    - the command's name is a subcommand (:data:`SUBCOMMANDS`) and it
      failed with any status: given after an option (``-C <path> list``)
      it names a program, none or another (the MCP SDK installs an
      ``mcp``);
    - the command's name holds a space and was not found: it is not run by
      a shell, so ``"ruff format src"`` is one program name;
    - a folder of :data:`DEPENDENCY_FOLDERS` is at the top of the user's
      checkout (``top``) but not in the ``worktree`` (git does not track it,
      and it was neither linked nor copied): ``--link``/``--copy`` it,
      named from the user's folder (``prefix``, ``/``-separated from the
      top, as :attr:`.git.repo.UserRepository.prefix`), since ``--link``
      paths are taken from there.  When the command's own program was not
      found, only the folder its name leads into (``.venv/bin/ruff``), or,
      for a bare name, a relative entry of ``search_path`` (the command's
      ``PATH``: ``node_modules/.bin``) does: a typo is no missing folder.

    A package runner (:func:`_runs_a_package`) that failed with any status
    gets the last one for ``node_modules``: it exits 1, not 127, when the
    package is missing.  Deciding on the exit status, never on timing,
    keeps the advice the same on a slow machine.
    """
    ended_otherwise = outcome.timed_out or outcome.died_of or outcome.received_signal
    failed = outcome.exit_code != 0 and not ended_otherwise
    name = command[0] if command else ""
    if failed and name in SUBCOMMANDS:
        return (
            f"'{name}' is git isopatch's subcommand only as its first argument: "
            f"git isopatch {name} -C <path>",
        )
    runner = failed and _runs_a_package(command)
    if outcome.exit_code not in NOT_RUNNABLE and not runner:
        return ()
    hints = []
    if outcome.start_error is not None and " " in name:
        split = " ".join(shlex.quote(word) for word in name.split())
        hints.append(
            f"the command is run without a shell, so '{name}' is one program name; "
            f"split it (git isopatch -- {split}) or use sh -c {shlex.quote(name)}"
        )
        return tuple(hints)  # the name, not a missing dependency, is the trouble
    folders = ("node_modules",) if runner else DEPENDENCY_FOLDERS
    if outcome.start_error is not None:  # where the name led, from the user's folder
        entries = [name] if "/" in name else search_path.split(":")
        led = {
            posixpath.normpath(posixpath.join(prefix, entry)).split("/")[0]
            for entry in entries
            if entry and not entry.startswith("/")
        }
        folders = tuple(folder for folder in folders if folder in led)
        if "/" not in name:
            hints += _installed_there(name, top, prefix) or _similar_subcommand(name)
    for folder in folders:
        if os.path.isdir(os.path.join(top, folder)) and not files.lexists(
            os.path.join(worktree, folder)
        ):
            path = shlex.quote(posixpath.relpath(folder, prefix or "."))
            hints.append(
                f"'{folder}' of your checkout is not in the worktree; "
                f"bring it in with --link {path} (or --copy {path})"
            )
    return tuple(hints)


def _similar_subcommand(name: str) -> list[str]:
    """For a program not found whose name is close to a subcommand
    (``git isopatch lst``): that subcommand, as git names the most similar
    command; for ``help`` (as ``git help``), the manual."""
    import difflib

    if name == "help":
        return ["'help' is no subcommand; the manual: 'git isopatch --help'"]
    similar = difflib.get_close_matches(name, SUBCOMMANDS, n=1, cutoff=0.8)
    return [f"the most similar subcommand is 'git isopatch {similar[0]}'"] if similar else []


def _installed_there(name: str, top: str, prefix: str) -> list[str]:
    """For a program not found on ``PATH`` that a dependency folder of the
    checkout installs (``node_modules/.bin/prettier``): how to run it
    from there, the paths from the user's folder (``prefix``)."""
    for programs in PROGRAM_FOLDERS:
        if os.access(os.path.join(top, programs, name), os.X_OK):
            folder = shlex.quote(posixpath.relpath(programs.split("/")[0], prefix or "."))
            program = shlex.quote(posixpath.relpath(f"{programs}/{name}", prefix or "."))
            return [
                f"'{name}' is not on PATH but in your checkout: run {program} with --link {folder}"
            ]
    return []


def ran_hints(
    start: Start,
    outcome: CommandOutcome,
    worktree: str,
    stderr: str | None,
    confined: bool,
    files: WorktreeFiles = HOST_FILES,
) -> tuple[str, ...]:
    """The hints of step 5, for the command that ran in ``worktree``:
    :func:`command_hints`, :func:`submodule_hints`, then
    :func:`signing_hints`."""
    repository = start.repository
    found = command_hints(
        start.command,
        outcome,
        repository.top,
        worktree,
        repository.prefix,
        files,
        start.environ.get("PATH", ""),
    )
    return (
        found
        + submodule_hints(start, worktree, files)
        + signing_hints(start, outcome, stderr, confined)
    )


def submodule_hints(start: Start, worktree: str, files: WorktreeFiles) -> tuple[str, ...]:
    """For a run without ``--recurse-submodules`` whose command names a
    path in a submodule the user has checked out (``make -C vendor/lib``,
    ``--manifest-path=vendor/lib/Cargo.toml``): that folder is empty in
    the worktree, which is why the command found nothing there.  An
    argument counts whole, or after the ``=`` of an option; the submodule
    is named from the user's folder.  Decided on the arguments, the
    checkout and the worktree, never on what the command printed."""
    from .git.submodule import user_submodule_git_dir

    top, prefix = start.repository.top, start.repository.prefix
    if start.recurse_submodules or not os.path.isfile(os.path.join(top, ".gitmodules")):
        return ()
    folders = set()
    for value in map(_argument_path, start.command[1:]):
        path = posixpath.normpath(posixpath.join(prefix, value)) if value else ".."
        if not path.startswith(("/", "../")) and path not in ("..", "."):
            parts = path.split("/")
            folders.update("/".join(parts[:end]) for end in range(1, len(parts) + 1))
    for folder in sorted(folders):
        inside = os.path.join(worktree, folder)
        if (
            files.is_real_folder(inside)
            and not files.lexists(os.path.join(inside, ".git"))
            and user_submodule_git_dir(top, folder) is not None
        ):
            named = shlex.quote(posixpath.relpath(folder, prefix or "."))
            return (
                f"'{named}' is a submodule, empty in the worktree; "
                "--recurse-submodules populates it from yours",
            )
    return ()


def _argument_path(word: str) -> str:
    """The path a command's argument may name: the whole word, or what
    follows the ``=`` of an option (``--manifest-path=vendor/Cargo.toml``)."""
    return word.partition("=")[2] if word.startswith("-") else word


def checkout_path_hints(
    command: Sequence[str], top: str, outside_writes: Sequence[str], checkout_changes: Sequence[str]
) -> tuple[str, ...]:
    """For a command given an absolute path into the user's checkout
    (``ruff format "$PWD/src"``, lint-staged's paths), whole or after an
    option's ``=``, that wrote there (a discarded write in the sandbox,
    ``checkout_changes`` unconfined): it worked on the checkout, not on the
    worktree.  Decided on the arguments and the writes, never on what the
    command printed."""
    real_top = os.path.realpath(top)
    inside = real_top.rstrip("/") + "/"
    written = [path for path in outside_writes if path.startswith(inside)]
    written += [os.path.join(real_top, path) for path in checkout_changes]
    for value in map(_argument_path, command[1:] if written else ()):
        led = os.path.realpath(value) if value.startswith("/") else ""
        if (led + "/").startswith(inside) and any(
            path == led or path.startswith(led.rstrip("/") + "/") for path in written
        ):
            return (
                f"'{value}' leads into your checkout, not the worktree, and the command "
                "wrote there: pass paths relative to the current folder",
            )
    return ()


#: Said when a run from ``HEAD`` changed nothing while the user's work
#: tree has changes of its own, which the worktree does not hold.
def left_out_edits_hint(paths: Sequence[str]) -> str:
    """The hint after ``--apply`` of a run from ``HEAD`` alone whose patch
    touches ``paths`` that held uncommitted edits: the command never saw
    them, so a formatter left them as they were."""
    from .git.quote import quoted

    names = ", ".join(quoted(p) for p in paths[:5])
    more = f" and {len(paths) - 5} more" if len(paths) > 5 else ""
    return (
        f"the command started from HEAD, without your uncommitted edits to {names}{more}; "
        "--include-uncommitted starts from your work tree as it is"
    )


UNCOMMITTED_HINT = (
    "your uncommitted changes are not in the worktree, which starts from HEAD; "
    "--include-uncommitted starts from them"
)


#: The advice for a sandboxed command that failed where git signs.
SIGNING_HINT = (
    "signing needs your gpg or ssh agent, a credential the sandbox keeps from "
    "the command: commit unsigned inside (git -c commit.gpgSign=false), sign "
    "after applying the patch, or use --no-sandbox"
)

#: What git (or the signing program it runs) says when signing fails.
SIGNING_FAILURES = (b"failed to sign", b"No private key found", b"gpg failed", b"signing failed")

#: The settings that make git sign on its own.
SIGNING_KEYS = ("commit.gpgSign", "tag.gpgSign")


def signing_hints(
    start: Start, outcome: CommandOutcome, stderr: str | None, confined: bool
) -> tuple[str, ...]:
    """:data:`SIGNING_HINT` when the sandboxed command failed and signing
    is why it may have: the repository's configuration signs, or its
    captured stderr says signing failed (decided on these, never on
    timing)."""
    if not confined or outcome.exit_code == 0 or outcome.start_error is not None:
        return ()
    if stderr is not None:
        with contextlib.suppress(OSError), open(stderr, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 65536))
            tail = handle.read()
            if any(failure in tail for failure in SIGNING_FAILURES):
                return (SIGNING_HINT,)
    top = start.repository.top
    for key in SIGNING_KEYS:
        said = run_git(["-C", top, "config", "--type=bool", "--get", key], env=start.git_env)
        if isinstance(said, Ok) and said.value.strip() == b"true":
            return (SIGNING_HINT,)
    return ()
