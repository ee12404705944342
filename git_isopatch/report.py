"""Step 7 of the procedure: what the run did beyond its patch, and the result.

The writes the command made to state the worktree shares with the user's
repository (refs, configuration) and to the user's checkout, the hints for
a command that could not run a program, ``--apply``, and the
:class:`~git_isopatch.result.CaptureResult` itself.
"""

from __future__ import annotations

import os
import posixpath
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .extract import Extracted
from .git.repo import UserRepository
from .git.result import Err, GitResult, Ok
from .git.shared_state import SharedWrite
from .git.status import CheckoutState, changed_paths, read_checkout
from .isolation.command import CommandOutcome
from .isolation.errors import IsopatchError
from .isolation.fidelity import Fidelity
from .result import CaptureResult
from .start import Start

#: Folders of installed dependencies that commands commonly need and git
#: does not track: npm, pnpm and yarn's ``node_modules``, a Python virtual
#: environment ``.venv``, Go, PHP and Ruby's ``vendor``.
DEPENDENCY_FOLDERS = ("node_modules", ".venv", "vendor")
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


def sandbox_hint(start: Start, outcome: CommandOutcome) -> tuple[str, ...]:
    """The hint for a command that failed in the default sandbox
    (``isopatch.sandbox=auto``): what the sandbox took away, and the way
    out.  None for one that was signalled, timed out or could not run a
    program (126, 127: the sandbox hides none), nor under ``--sandbox``,
    which the user asked for."""
    failed = outcome.exit_code != 0 and outcome.exit_code not in NOT_RUNNABLE
    ended_otherwise = (
        outcome.timed_out
        or outcome.died_of is not None
        or outcome.received_signal is not None
        or outcome.start_error is not None
    )
    if not start.sandboxed_by_default or not failed or ended_otherwise:
        return ()
    if start.sandbox.allow_network:
        return (
            "the command ran in the sandbox, its writes outside its worktree discarded; "
            "--no-sandbox runs it unconfined",
        )
    return (
        "the command ran in the sandbox, without network and its writes outside its "
        "worktree discarded; --allow-network keeps the network, --no-sandbox runs it "
        "unconfined",
    )


def command_hints(
    command: Sequence[str], outcome: CommandOutcome, top: str, worktree: str, prefix: str = ""
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
      paths are taken from there.

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
    for folder in ("node_modules",) if runner else DEPENDENCY_FOLDERS:
        if os.path.isdir(os.path.join(top, folder)) and not os.path.lexists(
            os.path.join(worktree, folder)
        ):
            path = shlex.quote(posixpath.relpath(folder, prefix or "."))
            hints.append(
                f"'{folder}' of your checkout is not in the worktree; "
                f"bring it in with --link {path} (or --copy {path})"
            )
    return tuple(hints)


#: Said when a run from ``HEAD`` changed nothing while the user's work
#: tree has changes of its own, which the worktree does not hold.
UNCOMMITTED_HINT = (
    "your uncommitted changes are not in the worktree, which starts from HEAD; "
    "--include-uncommitted starts from them"
)


def _left_out_uncommitted(start: Start, checkout: GitResult[CheckoutState] | None) -> bool:
    """The run started from ``HEAD`` (no snapshot) while the user's work
    tree, as the look before the command saw it, had changes (``None``:
    not looked at, in the sandbox, which the checkout's writes cannot
    reach: looked at now; an ``Err``: the look failed)."""
    if not start.from_head_alone:
        return False
    if checkout is None:
        repository = start.repository
        checkout = read_checkout(repository.git_dir, repository.top, env=start.git_env)
    match checkout:
        case Ok(state):
            return bool(state.entries)
    return False


class CheckoutLook:
    """The look at the user's checkout before the command (unconfined
    runs: under the sandbox the command's writes cannot reach it), started
    in a thread as soon as the run is checked, so that its ``git status``
    of the whole checkout overlaps getting the worktree (a claim's three
    git processes, or ``git worktree add``) instead of coming after it.
    Nothing that changes the checkout is git-isopatch's, so an earlier
    look sees what a later one would, and what the user changes meanwhile
    is reported as changed during the run."""

    def __init__(self, start: Start) -> None:
        self._result: GitResult[CheckoutState] | BaseException | None = None
        self._thread = None
        if start.sandbox.confined:
            return
        import threading  # subprocess has imported it already

        repository = start.repository
        args = (repository.git_dir, repository.top, start.git_env)
        self._thread = threading.Thread(target=self._look, args=args, name="checkout-look")
        self._thread.start()

    def _look(self, git_dir: str, top: str, env: Mapping[str, str]) -> None:
        try:
            self._result = read_checkout(git_dir, top, env=env)
        except BaseException as exc:  # handed to the caller of result()
            self._result = exc

    def result(self) -> GitResult[CheckoutState] | None:
        """The look (``None``: not taken, the run is sandboxed); waits for it."""
        if self._thread is None:
            return None
        self._thread.join()
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result


def checkout_changes(
    before: GitResult[CheckoutState] | None,
    repository: UserRepository,
    ours: Sequence[str],
    env: Mapping[str, str],
) -> tuple[str, ...]:
    """The paths of the user's work tree that changed since ``before``
    (:mod:`.git.status`), leaving out git-isopatch's own folders (``ours``) where they
    lie inside it (``isopatch.tmpdir`` inside the work tree); empty when
    either look fails or none was taken (``None``: ``--sandbox``)."""
    match before:
        case Ok(old):
            pass
        case _:
            return ()
    match read_checkout(repository.git_dir, repository.top, env=env):
        case Ok(new):
            pass
        case Err():
            return ()
    top = os.path.realpath(repository.top)
    inside = []
    for folder in ours:
        relative = os.path.relpath(os.path.realpath(folder), top)
        if relative != ".." and not relative.startswith("../"):
            inside.append(os.fsencode(relative))
    return tuple(os.fsdecode(p) for p in changed_paths(old, new, ignore=inside))


@dataclass(frozen=True)
class Ran:
    """What step 5 saw of the command.

    Attributes:
        outcome: how it ended.
        stdout, stderr: the files holding its output, when captured.
        shared_writes: what it changed in the refs and configuration the
            worktree shares with the user's repository.
        checkout_before: the user's checkout before it ran (``None``: not
            looked at, under ``--sandbox``), and ``checkout_changes``:
            the paths of it that changed during the run.
        hints: advice for a command that could not run a program.
        fidelity: the worktree just before it ran, and the settings pinned
            for git there (:mod:`.isolation.fidelity`).
        outside_writes: under the sandbox, what it wrote outside its
            worktree, discarded.
    """

    outcome: CommandOutcome
    stdout: str | None
    stderr: str | None
    shared_writes: tuple[SharedWrite, ...]
    checkout_before: GitResult[CheckoutState] | None
    checkout_changes: tuple[str, ...]
    hints: tuple[str, ...]
    fidelity: Fidelity = field(default_factory=Fidelity)
    outside_writes: tuple[str, ...] = ()


def report(
    start: Start,
    ran: Ran,
    extracted: Extracted | IsopatchError,
    state: dict[str, int | None],
    private_dir: str,
    kept: str | None,
    warn: Callable[[str], None],
) -> CaptureResult:
    """Step 7: the result of the run (``extracted``: the patch, or why
    extraction failed: then the worktree is ``kept`` for inspection), with
    ``--apply`` done when asked and the command exited 0
    (:func:`.bring_home.apply_result`: one apply at a time, a signal in
    ``state`` stops it before it writes, ``warn`` says it waits)."""
    received = state.get("received")
    result = CaptureResult(
        base=start.commit,
        exit_code=128 + received if received is not None else ran.outcome.exit_code,
        patch_path=None,
        files=None,
        stdout=ran.stdout,
        stderr=ran.stderr,
        worktree_path=kept,
        tmpdir=private_dir,
        timed_out=ran.outcome.timed_out,
        signal=received,
        command_error=ran.outcome.start_error,
        timeout=start.timeout,
        shared_writes=ran.shared_writes,
        hints=ran.hints,
        informational_hints=sandbox_hint(start, ran.outcome),
        top=start.repository.top,
        checkout_changes=ran.checkout_changes,
        command=start.command,
        command_signal=received if received is not None else ran.outcome.died_of,
        outside_writes=ran.outside_writes,
        sandboxed=start.sandbox.confined,
        sandbox_unavailable=start.sandbox_unavailable,
    )
    if isinstance(extracted, IsopatchError):
        return replace(result, error=extracted.message, error_code=extracted.code)
    informational = result.informational_hints
    if (
        not extracted.files
        and start.informational_hints
        and _left_out_uncommitted(start, ran.checkout_before)
    ):
        informational = (*informational, UNCOMMITTED_HINT)
    result = replace(
        result,
        patch_path=extracted.patch,
        files=extracted.files,
        diffstat=extracted.diffstat,
        informational_hints=informational,
        paths=extracted.contents.paths,
        insertions=extracted.contents.insertions,
        deletions=extracted.contents.deletions,
    )
    if not start.apply:
        return result
    if extracted.files and result.exit_code == 0:
        from .bring_home import apply_result  # only with --apply: it loads git.apply

        return apply_result(
            result,
            start.repository,
            env=start.git_env,
            environ=start.environ,
            staged=start.staged,
            signal_state=state,
            warn=warn,
        )
    return replace(result, applied=False)
