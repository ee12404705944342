"""The shape of one run: what the caller asks for, as one frozen value.

A run flows as: flags (``cli.py``) or keyword arguments (the Python API)
-> :class:`CaptureRequest` -> completed from ``isopatch.*`` configuration
(:func:`git_isopatch.settings.complete_request`; flags win) -> the procedure
(:func:`git_isopatch.capture.run`) -> :class:`~git_isopatch.capture.CaptureResult`
-> rendering, which reads nothing but the result and the :class:`OutputMode`.
This is the shape of black's ``Mode`` and git's ``struct diff_options``: adding
an option is adding one field here (and its flag, its configuration key
where one exists, and its documentation).

Combinations that cannot go together are refused in one place,
:func:`conflicts`, in git's usage wording.

Nothing heavy is imported here: the CLI builds a request before pygit2 loads.
Annotations here are evaluated as the module loads (no ``from __future__
import annotations``): ``NamedTuple`` compiles each string annotation as it
makes the class, on every run; only names imported for type checking are
strings.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from .result import OutputMode

#: What a run asks of the sandbox: required (``True``), none, or ``"auto"``
#: (:data:`.settings.AUTO`).
SandboxMode = bool | Literal["auto"]

#: Re-exported: the request and the output mode are parsed together.
__all__ = ["CaptureRequest", "OutputMode", "UsageConflict", "conflicts"]


class UsageConflict(ValueError):
    """A request that contradicts what exists (a base option against the
    base of an existing session): a usage error found once the repository
    is open (129 on the command line)."""


class CaptureRequest(NamedTuple):
    """What to run, where, from which commit, and what to do with the worktree.

    Fields left ``None`` are decided by configuration, then by a default
    (:func:`git_isopatch.settings.complete_request` fills them in; after it,
    none of ``keep``, ``timeout``, ``tmpdir``, ``configured_links``,
    ``configured_copies``, ``max_worktrees``, ``pool``, ``base_trees`` and
    ``recurse_submodules`` is ``None``).

    Attributes:
        command: the program and its arguments (argv; never a shell string).
        base: the revision to start from (``--base``), resolved to a commit id.
        include_uncommitted: start from a snapshot of ``HEAD`` plus the
            staged, unstaged and untracked changes (``--include-uncommitted``);
            needs ``base == "HEAD"``.
        staged: start from a snapshot of ``HEAD`` plus the index only, what
            ``git commit`` would commit (``--staged``); needs ``base ==
            "HEAD"`` and not ``include_uncommitted``.
        repo_path: a folder inside the user's work tree (``-C``); the command
            runs in the worktree folder that mirrors it.
        link: paths relative to ``repo_path`` to bring in as symbolic links
            to the originals (``--link``); writes go through to them.
        copy: paths relative to ``repo_path`` to bring in as copies
            (``--copy``; reflinks where the filesystem can).
        configured_links: the ``isopatch.link`` paths (relative to the top of
            the work tree); ``()`` ignores them (``--no-link``); ``None``: read
            the configuration.
        configured_copies: the ``isopatch.copy`` paths; ``()`` ignores them
            (``--no-copy``); ``None``: read the configuration.
        worktree_include: also copy the ignored files ``.worktreeinclude``
            names (``--no-copy`` turns this off).
        output: write the patch to this file (``-o``; relative to
            ``repo_path``, as every path after git's ``-C``) instead of
            ``<tmpdir>/isopatch.patch``.
        capture_output: send the command's stdout and stderr to files in the
            run's private folder (``--porcelain``/``--json`` do).
        command_stdout: a file descriptor for the command's stdout
            (``--stdout`` sends it to stderr, 2); ignored with ``capture_output``.
        keep: keep the worktree after the run, whatever the command's exit
            status (``--keep``/``--no-keep``,
            ``isopatch.keep``; default no).
        timeout: seconds before the command's process group is stopped (exit
            124; the patch is still captured); 0 for no limit (``--timeout``,
            ``isopatch.timeout``; default no limit).
        tmpdir: the folder to make the run's private folder in
            (``isopatch.tmpdir``, else ``$TMPDIR``, else ``/tmp``); an
            unusable folder is an error, never a silent fall-back.  Set by
            the caller or ``isopatch.tmpdir``, it holds the worktree too;
            else the worktree goes beside the checkout.
        max_worktrees: how many git-isopatch worktrees may stay registered
            (``isopatch.maxWorktrees``, default 25; 0: no limit).
        pool: how many used worktrees to keep warm for later unconfined
            runs of the repository (``isopatch.pool``, default 0: none).
        base_trees: how many base trees sandboxed runs keep for later runs
            of the repository (``isopatch.baseTrees``, default 2; 0: none,
            every run fully ephemeral).
        sandbox: confine the command with the kernel's namespaces
            (:mod:`git_isopatch.sandbox.confinement`): ``True``, or fail
            where the machine cannot (``--sandbox``,
            ``isopatch.sandbox=true``); ``False``: unconfined
            (``--no-sandbox``); ``"auto"``: confined where the machine
            allows it, else unconfined with a warning (the default).
        allow_write: with ``sandbox``, paths the command may write too
            (``--allow-write``, relative to ``repo_path``; else
            ``isopatch.allowWrite``, relative to the top of the work tree:
            given ones replace the configured ones, as git's
            ``--push-option`` does ``push.pushOption``; default none).
        allow_network: with ``sandbox``, keep the network
            (``--allow-network``, ``isopatch.allowNetwork``; default no).
        apply: when the command exited 0 and the patch is not empty, apply it
            to the user's work tree as it is then, all or nothing
            (``--apply``); a patch that does not apply is kept and reported
            (``apply-failed``).
        progress: our standard error (file descriptor 2) is a terminal the
            user watches: git says there what it does and shows its checkout
            progress while the worktree is made (the CLI sets it on a
            terminal, never with ``-q``, ``--porcelain`` or ``--json``).
        diffstat: compute the diffstat of the patch for the human summary
            (:attr:`~git_isopatch.capture.CaptureResult.diffstat`).
        informational_hints: look for the advice that only informs
            (:attr:`~git_isopatch.capture.CaptureResult.informational_hints`);
            ``False`` (the CLI's ``-q`` without ``--porcelain`` or
            ``--json``: nobody would see it) spares a sandboxed run from
            ``HEAD`` that changed nothing its ``git status`` of the user's
            checkout, taken only to say that uncommitted changes were left
            out.
        terminal_columns: the diffstat goes to a terminal this wide: git's
            colour for a terminal (``color.diff``, ``color.ui``), and this
            width; ``None``: git's choice for a pipe, 80 columns.
        recurse_submodules: populate the submodules the user has checked
            out from the user's own submodule repositories, and capture the
            changes inside them (``--recurse-submodules``,
            ``isopatch.recurseSubmodules``; default no).
        max_processes: in the sandbox, how many processes the command may
            have at once (``--max-processes``, ``isopatch.maxProcesses``;
            default 4096; 0: no bound).
        max_memory: in the sandbox, how many bytes of memory it may use
            (``--max-memory``, ``isopatch.maxMemory``; default half the
            machine's memory; 0: no bound).
        cache: in the sandbox, keep what the command writes to the user's
            cache folders for the later sandboxed runs of the repository
            (``--cache``/``--no-cache``, ``isopatch.cache``; default yes).
        cache_limit: past how many bytes that cache layer is cleared
            (``isopatch.cacheLimit``; default 1 GiB; 0: no bound).
        session: run in the session of this name (``--session``): made at
            the base by its first run, run in again, as the earlier runs
            left it, by the later ones (:mod:`.worktrees.sessions`).
    """

    command: tuple[str, ...]
    base: str = "HEAD"
    include_uncommitted: bool = False
    staged: bool = False
    repo_path: str = "."
    link: tuple[str, ...] = ()
    copy: tuple[str, ...] = ()
    configured_links: tuple[str, ...] | None = None
    configured_copies: tuple[str, ...] | None = None
    worktree_include: bool = True
    output: str | None = None
    capture_output: bool = False
    command_stdout: int | None = None
    keep: bool | None = None
    timeout: float | None = None
    tmpdir: str | None = None
    max_worktrees: int | None = None
    pool: int | None = None
    base_trees: int | None = None
    sandbox: SandboxMode | None = None
    allow_write: tuple[str, ...] | None = None
    allow_network: bool | None = None
    apply: bool = False
    progress: bool = False
    diffstat: bool = False
    informational_hints: bool = True
    terminal_columns: int | None = None
    recurse_submodules: bool | None = None
    max_processes: int | None = None
    max_memory: int | None = None
    cache: bool | None = None
    cache_limit: int | None = None
    session: str | None = None

    @property
    def from_head_alone(self) -> bool:
        """The worktree starts from ``HEAD`` itself: no
        ``--include-uncommitted``, no ``--staged``, no other ``--base``, no
        session (whose base is its own); the user's uncommitted changes are
        not in it."""
        plain = not (self.include_uncommitted or self.staged or self.session)
        return plain and self.base == "HEAD"


#: Fields of a sequence type, which the API also takes as lists.
_TUPLE_FIELDS = frozenset(
    {"command", "link", "copy", "configured_links", "configured_copies", "allow_write"}
)


def request_from(command: Sequence[str], options: Mapping[str, Any]) -> CaptureRequest:
    """The request of :func:`.capture.capture`: ``command`` and ``options``
    by field name, lists taken for tuples.

    Raises:
        TypeError: an option that is not a field of the request.
    """
    unknown = sorted(set(options) - set(CaptureRequest._fields))
    if unknown:
        raise TypeError(f"capture() got unexpected keyword arguments: {', '.join(unknown)}")
    options = {
        name: tuple(value) if name in _TUPLE_FIELDS and value is not None else value
        for name, value in options.items()
    }
    return CaptureRequest(command=tuple(command), **options)


def conflicts(request: CaptureRequest, mode: OutputMode | None = None) -> str | None:
    """The first combination of ``request`` and ``mode`` that cannot go
    together, as git's parse-options words it (``options '--porcelain' and
    '--json' cannot be used together``), or ``None`` when there is none.

    The CLI prints it as a usage error (exit 129); the Python API raises
    ``ValueError`` with it.
    """
    if request.session is not None and (why := session_name_refusal(request.session)):
        return why  # first: ``--session --end`` took ``--end`` for the name
    if not request.command:
        return "no command given"
    if not request.command[0]:
        return "the command name is empty"
    if mode is not None:
        if mode.nul and not mode.porcelain:
            return "the option '-z' requires '--porcelain'"
        if mode.porcelain and mode.json:
            return "options '--porcelain' and '--json' cannot be used together"
        if mode.stdout and mode.machine:
            other = "--porcelain" if mode.porcelain else "--json"
            return f"options '--stdout' and '{other}' cannot be used together"
    if request.session is not None and request.keep:
        return "options '--session' and '--keep' cannot be used together"
    if request.output == "":
        return "option 'output' expects a file name"
    if request.output == "-":  # the command line turns it into --stdout
        return "option 'output' '-' means standard output: use command_stdout and patch_path"
    if mode is not None and mode.stdout and request.output is not None:
        # the patch goes to one place (git format-patch refuses the pair too)
        return "options '--stdout' and '--output' cannot be used together"
    if request.staged and request.include_uncommitted:
        return "options '--staged' and '--include-uncommitted' cannot be used together"
    if request.staged and request.base != "HEAD":
        return "options '--staged' and '--base' cannot be used together"
    if request.include_uncommitted and request.base != "HEAD":
        return "options '--include-uncommitted' and '--base' cannot be used together"
    return None


#: Longest session name, in bytes.
LONGEST_SESSION_NAME = 100


def session_name_refusal(name: str) -> str | None:
    """Why ``name`` cannot name a session (``--session``), or ``None``: a
    name is not a path (no ``/``, no ``..``, not ``.``- or ``-``-first),
    holds no control character (C1 too: a terminal takes ``\x9b`` for
    ``ESC [``), is UTF-8 (it is printed, and a JSON string), and is at most
    :data:`LONGEST_SESSION_NAME` bytes."""
    if not name:
        return "option 'session' expects a name"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        return "invalid session name: it holds a control character"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in name):  # a byte that is no UTF-8
        return "invalid session name: it is not UTF-8"
    if name.startswith("-"):  # most often the name left out: ``--session -- cmd``
        return f"option 'session' expects a name, not '{name}' (a name does not start with '-')"
    if "/" in name or "\\" in name or ".." in name or name.startswith("."):
        return f"invalid session name '{name}': a name is not a path"
    if len(name.encode("utf-8", "surrogateescape")) > LONGEST_SESSION_NAME:
        return f"invalid session name: longer than {LONGEST_SESSION_NAME} bytes"
    return None
