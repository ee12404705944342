"""The command's confinement as one value the procedure enters.

:func:`plan` checks, before anything exists, what the run asks for and
that the machine can give it (a :class:`ConfinementPlan`; :data:`UNCONFINED`
without ``--sandbox``).  :func:`confine` enters the plan for one worktree and
yields a :class:`Confinement`: the null object :data:`NONE` when
unconfined, else the mechanism's own (:class:`Namespaced`: the command in
bubblewrap's namespaces, :mod:`.namespaces`; git-isopatch's own git calls
in the worktree under a Landlock ruleset, :mod:`.landlock`).  Everything
that runs in the worktree goes through it: the command
(:meth:`Confinement.run_command`) and git-isopatch's own git calls
(:class:`..worktrees.worktree_git.WorktreeGit`, which passes :attr:`Confinement.hook`
down to the git layer as an opaque ``preexec_fn``).

A new mechanism is one more ``mechanism`` name in :func:`plan`, one
subclass of :class:`Confinement` (its ``command_sandbox`` and ``hook``) and one
branch in :func:`confine`; nothing else changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from ..errors import IsopatchError, known_os_failure
from ..git.result import Err, GitResult, Ok
from ..git.shared_state import SharedState, SharedWrite, describe_changes, read_shared_state
from .command import CommandOutcome, run_command
from .limits import NONE as NO_LIMITS
from .limits import Limits, bound
from .refusal import SANDBOX_VARIABLE

if TYPE_CHECKING:  # loaded only by the runs that need it: a plain run starts faster
    from ..git.repo import UserRepository
    from .landlock import Sandbox, SandboxPolicy
    from .namespaces import Bwrap, Namespaces

#: The mechanisms a plan names.
NO_MECHANISM = "none"
#: The command in bubblewrap's namespaces (:mod:`.namespaces`); git-isopatch's
#: own git calls in the worktree under the Landlock ruleset (:mod:`.landlock`).
NAMESPACES = "namespaces"


class ConfinementPlan(NamedTuple):
    """The confinement of one run, checked before anything is made.

    Attributes:
        mechanism: :data:`NO_MECHANISM` or :data:`NAMESPACES`.
        allow_write: absolute paths, each existing, the command may write.
        allow_network: keep the network.
        abi: the Landlock ABI :func:`.landlock.check_available` found.
        bwrap: the bubblewrap of :data:`NAMESPACES`.
        limits: the bounds on the command's processes and memory (:mod:`.limits`).
    """

    mechanism: str = NO_MECHANISM
    allow_write: tuple[str, ...] = ()
    allow_network: bool = False
    abi: int = 0
    bwrap: Bwrap | None = None
    limits: Limits = NO_LIMITS

    @property
    def confined(self) -> bool:
        return self.mechanism != NO_MECHANISM


UNCONFINED = ConfinementPlan()


def plan(
    sandbox: bool,
    allow_write: Sequence[str],
    allow_network: bool,
    work_tree: str | None = None,
) -> ConfinementPlan:
    """:data:`UNCONFINED` without ``sandbox``; otherwise check, before
    anything is made, that every path of ``allow_write`` exists and that
    the kernel can enforce the sandbox (the checks' answers are kept for
    later runs, never in ``work_tree``: the user's).

    Raises:
        IsopatchError: ``no-such-file`` (and the like) for a path,
            ``sandbox-unavailable``.
    """
    if not sandbox:
        return UNCONFINED
    for path in allow_write:
        try:
            os.stat(path)
        except OSError as exc:
            raise known_os_failure(f"cannot allow writes to '{path}'", exc) from exc
    from . import namespaces_check
    from .landlock import check_available

    try:
        abi = check_available(allow_network=allow_network, work_tree=work_tree)
        bwrap = namespaces_check.check_available(allow_network=allow_network, work_tree=work_tree)
    except IsopatchError as failure:
        from .bwrap import find_bwrap
        from .refusal import explained

        # what refuses the namespaces, where bubblewrap itself is there
        about = "namespace" in failure.message and not isinstance(find_bwrap(), str)
        raise (explained(failure) if about else failure) from None
    return ConfinementPlan(NAMESPACES, tuple(allow_write), allow_network, abi, bwrap)


class Confinement:
    """The null object: the command and git run with the user's rights."""

    #: True when the command runs confined.
    confined = False
    #: The worktree may go back to the pool after the run: nothing the
    #: command started can still write in it.
    poolable = True

    @property
    def hook(self) -> Callable[[], None] | None:
        """What a child runs between fork and exec to be confined (an
        opaque ``preexec_fn`` for the git layer); ``None`` unconfined."""
        return None

    def run_command(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        stdout: int | IO[bytes] | None,
        stderr: IO[bytes] | None,
        timeout: float | None,
        signal_state: dict[str, Any],
    ) -> CommandOutcome:
        """:func:`.command.run_command`, confined as this value says
        (:attr:`command_sandbox`)."""
        return run_command(
            argv,
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            timeout=timeout,
            signal_state=signal_state,
            sandbox=self.command_sandbox,
        )

    @property
    def command_sandbox(self) -> Namespaces | None:
        """What :func:`.command.run_command` confines the command in
        (its ``sandbox``); ``None`` unconfined."""
        return None

    def git_environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """The environment of git-isopatch's own git calls in the worktree
        after the command (``env`` unconfined)."""
        return env

    def shared_writes(
        self, before: GitResult[SharedState], repository: UserRepository, env: Mapping[str, str]
    ) -> tuple[SharedWrite, ...]:
        """What changed in the refs and configuration the worktree shares
        with the user's repository since ``before`` (empty when either look
        fails)."""
        match before:
            case Ok(old):
                pass
            case Err():
                return ()
        match read_shared_state(repository.git_dir, repository.common_dir, env=env):
            case Ok(new):
                return tuple(describe_changes(old, new))
            case Err():
                return ()

    def outside_writes(self, common_dir: str) -> tuple[str, ...]:
        """The paths outside the worktree (and the git directory) the
        command wrote and that were discarded: none unconfined."""
        return ()


#: The confinement of an unconfined run.
NONE = Confinement()


class Watched(Confinement):
    """Unconfined, in a run whose worktree may go back to the pool: what
    the command leaves running out of its process group is this process's
    to see (:mod:`.orphans`), and while any of it runs the worktree is not
    pooled (it could write in the next run's worktree)."""

    def __init__(self, adopted: bool) -> None:
        self.adopted = adopted

    @property
    def poolable(self) -> bool:  # type: ignore[override]
        from .orphans import running

        return self.adopted and not running()


@contextlib.contextmanager
def watched() -> Iterator[Watched]:
    """An unconfined run's :class:`Watched` confinement: this process the
    subreaper of what the command starts, for as long as it lasts."""
    from . import orphans

    try:
        yield Watched(orphans.adopt())
    finally:
        orphans.release()


class Namespaced(Confinement):
    """The command in bubblewrap's namespaces (:mod:`.namespaces`): a
    read-only system, copy-on-write home, temporary folders, checkout and
    git directory, its own PID, IPC and network namespaces; git-isopatch's
    own git calls in the worktree stay under the Landlock ruleset
    (:attr:`hook`), since the git layer takes a ``preexec_fn``."""

    #: Its PID namespace ended every process the command started before
    #: git-isopatch looks at the worktree again: the worktree may be pooled
    #: (the pool puts back HEAD and the index as made, on the base's
    #: objects: what the command committed lived in its discarded layer).
    poolable = True

    confined = True

    def __init__(self, box: Sandbox, namespaces: Namespaces, common_dir: str) -> None:
        self.box = box
        self.namespaces = namespaces
        self.common_dir = common_dir

    @property
    def hook(self) -> Callable[[], None] | None:
        """The Landlock ruleset, entered by each of git-isopatch's own git
        calls in the worktree (they run what the command planted there: a
        nested repository's filter)."""
        return self.box.confine

    @property
    def command_sandbox(self) -> Namespaces:
        return self.namespaces

    def git_environment(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """``env`` with the objects the command added (in its layer of the
        object store) as an alternate: what it committed is read there."""
        layer = self.namespaces.layer_of(os.path.join(self.common_dir, "objects"))
        if layer is None or not os.path.isdir(layer):
            return env
        return {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": layer}

    def shared_writes(
        self, before: GitResult[SharedState], repository: UserRepository, env: Mapping[str, str]
    ) -> tuple[SharedWrite, ...]:
        """What the command changed in its copy-on-write view of the refs,
        configuration and watched files, each marked discarded."""
        match before:
            case Ok(old):
                pass
            case Err():
                return ()
        from .layer_state import shared_state_in

        after = shared_state_in(self.namespaces, repository, old, env)
        if after is None:
            return ()
        return tuple(w._replace(discarded=True) for w in describe_changes(old, after))

    def outside_writes(self, common_dir: str) -> tuple[str, ...]:
        inside = os.path.realpath(common_dir).rstrip("/") + "/"
        return tuple(
            p for p in self.namespaces.outside_writes() if not (p + "/").startswith(inside)
        )


def _fileno(stream: int | IO[bytes] | None, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


@contextlib.contextmanager
def confine(
    plan: ConfinementPlan,
    *,
    worktree: str,
    admin_dir: str,
    common_dir: str,
    private_dir: str,
    env: dict[str, str],
    streams: tuple[int | IO[bytes] | None, IO[bytes] | None],
    top: str | None = None,
) -> Iterator[Confinement]:
    """Enter ``plan`` for the worktree of the checkout whose top folder is
    ``top``: :data:`NONE` unconfined; else a
    private ``TMPDIR`` (set in ``env``, removed afterwards) in the run's
    ``private_dir`` and the ruleset, the files behind the command's
    ``streams`` (stdout, stderr) staying writable.

    Raises:
        IsopatchError: ``sandbox-unavailable``.
        OSError: the private ``TMPDIR`` cannot be made.
    """
    if not plan.confined:
        yield NONE
        return
    from .landlock import SandboxPolicy, prepare

    private_tmp = tempfile.mkdtemp(prefix="tmp-", dir=private_dir)
    layers = os.path.join(private_dir, "layers")
    try:
        temporary = env.get("TMPDIR")
        env["TMPDIR"] = private_tmp
        policy = SandboxPolicy(
            worktree=worktree,
            admin_dir=admin_dir,
            common_dir=common_dir,
            tmpdir=private_tmp,
            allow_write=plan.allow_write,
            allow_network=plan.allow_network,
        )
        stdout, stderr = streams
        fds = [_fileno(stdout, 1), _fileno(stderr, 2)]
        box = prepare(policy, abi=plan.abi, streams=fds)
        try:
            top = top or os.path.dirname(common_dir)
            with bound(plan.limits) as bounds:
                spaces = _namespaced(plan, box, policy, top, env, temporary, fds, layers)
                spaces.namespaces = spaces.namespaces.bounded(bounds)
                yield spaces
        finally:
            box.close()
    finally:
        shutil.rmtree(private_tmp, ignore_errors=True)
        shutil.rmtree(layers, ignore_errors=True)


def _namespaced(
    plan: ConfinementPlan,
    box: Sandbox,
    own: SandboxPolicy,
    top: str,
    env: dict[str, str],
    temporary: str | None,
    fds: Sequence[int],
    layers: str,
) -> Namespaced:
    """The namespaces of :func:`.namespaces.run_policy` for the worktree of
    ``own``, their layers made in ``layers``; the session's socket
    variables leave ``env``."""
    from . import availability, namespaces
    from .landlock import seccomp_filter

    for name in namespaces.SESSION_VARIABLES:
        env.pop(name, None)
    env[SANDBOX_VARIABLE] = "1"  # a run inside says why it has no sandbox of its own
    assert plan.bwrap is not None
    places = namespaces.RunPlaces(
        worktree=own.worktree,
        admin_dir=own.admin_dir,
        common_dir=own.common_dir,
        top=top,
        tmpdir=own.tmpdir,
        home=env.get("HOME"),
        temporary=(temporary,) if temporary and os.path.isabs(temporary) else (),
        runtime_dir=env.get("XDG_RUNTIME_DIR"),
        kept_answers=availability.kept_folder(work_tree=top),
    )
    policy = namespaces.run_policy(
        places,
        allow_write=plan.allow_write,
        allow_network=plan.allow_network,
        streams=_stream_files(fds),
    )
    spaces = namespaces.Namespaces(plan.bwrap, policy, layers, seccomp_filter())
    spaces.prepare()
    return Namespaced(box, spaces, own.common_dir)


def _stream_files(fds: Sequence[int]) -> tuple[str, ...]:
    """The regular files behind ``fds`` (the command's output), by path."""
    import stat

    found = []
    for fd in fds:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.fstat(fd).st_mode):
                path = os.readlink(f"/proc/self/fd/{fd}")
                if os.path.isabs(path) and os.path.isfile(path):
                    found.append(path)
    return tuple(found)
