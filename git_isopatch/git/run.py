"""The one subprocess wrapper through which git is run (design: Architecture).

Git runs only as an argument list (``shell=False``), bytes in and out, with
``LC_ALL=C`` so that its messages can be classified, and with a timeout.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from .process import STOPPED, Spawn, start
from .result import Err, GitError, GitResult, Ok

#: Seconds any single git invocation may take before it is stopped.
DEFAULT_GIT_TIMEOUT = 3600.0

#: Variables that point git at a repository, index, object store or work
#: tree.  This is git's own ``local_repo_env`` list (environment.c, the list
#: git clears before it runs a command in a submodule), plus
#: ``GIT_QUARANTINE_PATH`` (set for pre-receive hooks) and ``GIT_NAMESPACE``.
LOCAL_REPO_ENV = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
        "GIT_QUARANTINE_PATH",
        "GIT_NAMESPACE",
    }
)

#: ``GIT_*`` variables kept for git-isopatch's own git calls: where git and
#: its configuration live, and tracing.  Every other ``GIT_*`` variable
#: (``GIT_DIFF_OPTS``, ``GIT_EXTERNAL_DIFF``, ``GIT_*_PATHSPECS``, ...) could
#: change the patch or the paths git acts on, so it is dropped; but see
#: :func:`is_config_variable`.
_KEPT_FOR_OWN_CALLS = frozenset(
    {
        "GIT_EXEC_PATH",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CEILING_DIRECTORIES",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "GIT_TRACE",
        "GIT_TRACE2",
        "GIT_TRACE2_EVENT",
        "GIT_TRACE2_PERF",
        "GIT_TRACE_PERFORMANCE",
        "GIT_PROGRESS_DELAY",
    }
)


#: ``GIT_*`` variables that change how a checkout is made, kept for
#: git-isopatch's own git calls as they reach a ``git worktree add`` the
#: user runs: where attributes come from, and what a filter that fetches
#: (git-lfs's smudge, which downloads the objects a checkout needs) uses to
#: reach its remote: ssh, a password prompt program, TLS, HTTP.  git-lfs's
#: own variables (``GIT_LFS_SKIP_SMUDGE``, which git-lfs documents for
#: cloning without the objects) are kept by their prefix,
#: :data:`CHECKOUT_PREFIX`.  None changes the patch: its options are
#: pinned, and content conversion is the user's as in the checkout.
CHECKOUT_VARIABLES = frozenset(
    {
        "GIT_ATTR_NOSYSTEM",
        "GIT_ATTR_SOURCE",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
        "GIT_SSH_VARIANT",
        "GIT_ASKPASS",
        "GIT_SSL_NO_VERIFY",
        "GIT_SSL_CAINFO",
        "GIT_SSL_CAPATH",
        "GIT_SSL_CERT",
        "GIT_SSL_KEY",
        "GIT_SSL_CERT_PASSWORD_PROTECTED",
        "GIT_SSL_VERSION",
        "GIT_SSL_CIPHER_LIST",
        "GIT_HTTP_PROXY_AUTHMETHOD",
        "GIT_PROXY_SSL_CERT",
        "GIT_PROXY_SSL_KEY",
        "GIT_PROXY_SSL_CERT_PASSWORD_PROTECTED",
        "GIT_PROXY_SSL_CAINFO",
        "GIT_HTTP_USER_AGENT",
        "GIT_HTTP_LOW_SPEED_LIMIT",
        "GIT_HTTP_LOW_SPEED_TIME",
        "GIT_HTTP_MAX_REQUESTS",
        "GIT_CURL_VERBOSE",
        "GIT_TRACE_CURL",
        "GIT_TRACE_CURL_NO_DATA",
    }
)
#: The prefix of git-lfs's variables (``GIT_LFS_SKIP_SMUDGE``,
#: ``GIT_LFS_SKIP_DOWNLOAD_ERRORS``, ``GIT_LFS_PROGRESS``...).
CHECKOUT_PREFIX = "GIT_LFS_"


def is_config_variable(name: str) -> bool:
    """True for the variables that carry ``git -c`` settings
    (``GIT_CONFIG_PARAMETERS``) and ``GIT_CONFIG_COUNT`` with its
    ``GIT_CONFIG_KEY_<n>``/``GIT_CONFIG_VALUE_<n>`` (git-config(1)).

    Both git-isopatch's own git calls and the command keep them: they are
    configuration like the files, and git itself passes them on to commands
    it runs in another repository (``prepare_other_repo_env``).  The diff's
    pinned settings still win: ``-c`` on the command line comes after them.
    """
    return name in ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT") or name.startswith(
        ("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
    )


def quoted_path_entry(path: str) -> str:
    """``path`` as one entry of a list of paths git reads from a variable
    (``GIT_ALTERNATE_OBJECT_DIRECTORIES``: entries are ``:``-separated, one
    in double quotes is C-style quoted, git's ``unquote_c_style``)."""
    escaped = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return '"' + "".join(escaped.get(char, char) for char in path) + '"'


def command_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Return ``environ`` without the variables of :data:`LOCAL_REPO_ENV`
    (but with the ``git -c`` settings, see :func:`is_config_variable`).

    This is the environment the user's command runs with, so that a ``git``
    it runs acts on the worktree it stands in, never on the user's index.
    """
    return {k: v for k, v in environ.items() if k not in LOCAL_REPO_ENV or is_config_variable(k)}


def own_git_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the environment for git-isopatch's own git calls.

    Drops every ``GIT_*`` variable but those of ``_KEPT_FOR_OWN_CALLS``,
    those that shape a checkout (:data:`CHECKOUT_VARIABLES`, git-lfs's) and
    the ``git -c`` settings (:func:`is_config_variable`), sets ``LC_ALL=C``
    (messages are parsed), ``GIT_TERMINAL_PROMPT=0`` and
    ``GIT_OPTIONAL_LOCKS=0`` (a status-like read must not rewrite the index).
    """
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith("GIT_")
        or k in _KEPT_FOR_OWN_CALLS
        or k in CHECKOUT_VARIABLES
        or k.startswith(CHECKOUT_PREFIX)
        or is_config_variable(k)
    }
    env["LC_ALL"] = "C"
    env["LANGUAGE"] = "C"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


def run_git(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    config: Sequence[tuple[str, str]] = (),
    cwd: str | None = None,
    input: bytes | None = None,
    timeout: float | None = DEFAULT_GIT_TIMEOUT,
    warnings: list[str] | None = None,
    spawn: Spawn | None = None,
) -> GitResult[bytes]:
    """Run ``git [-c k=v ...] <args>`` and return its stdout.

    Args:
        args: git's arguments after the global options, e.g.
            ``["-C", wt, "diff", "--binary", commit]``.
        env: the full environment (see :func:`own_git_environment`).
        config: ``(key, value)`` pairs passed as ``-c key=value`` ahead of
            ``args``; they win over every configuration file.
        cwd: working directory, or ``None`` for the current one.
        input: bytes for git's stdin; stdin is ``/dev/null`` when ``None``.
        timeout: seconds before git is killed; ``None`` waits for ever.
        warnings: when given, the ``warning:`` lines git printed on a
            successful run are appended to it, without the prefix (git goes
            on after them, e.g. "could not open directory 'x/': File name
            too long").
        spawn: where git runs (:class:`.process.Spawn`); here when ``None``.  A git
            run elsewhere (inside the sandbox, on what a command left) is
            stopped by :func:`stop_streams` as a stream is: it writes only
            what is the run's own.

    Git runs in a process group of its own, so that a Ctrl-C on the
    terminal (which signals the whole foreground group) reaches
    git-isopatch, which decides what to stop, and never kills a ``git
    worktree add`` or ``git diff`` half-way.  To stream git's stdout into
    a file instead: :func:`.stream.stream_git`.

    Returns:
        ``Ok(stdout_bytes)`` on exit status 0; otherwise ``Err(GitError)``
        carrying the exit status and stderr, the ``errno`` when git could not
        be started, or ``timed_out=True``.

    Raises:
        subprocess.SubprocessError: ``spawn`` could not have git run.
    """
    return start_git(
        args,
        env=env,
        config=config,
        cwd=cwd,
        input=input,
        timeout=timeout,
        warnings=warnings,
        spawn=spawn,
    )()


def start_git(
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    config: Sequence[tuple[str, str]] = (),
    cwd: str | None = None,
    input: bytes | None = None,
    timeout: float | None = DEFAULT_GIT_TIMEOUT,
    warnings: list[str] | None = None,
    spawn: Spawn | None = None,
) -> Callable[[], GitResult[bytes]]:
    """:func:`run_git` started now and finished later: git runs while the
    caller goes on (loads the rest of the run, checks), and the function
    returned reads it to its end and gives what :func:`run_git` gives
    (the timeout counts from then).  Call it exactly once.

    Raises:
        subprocess.SubprocessError: ``spawn`` could not have git run.
    """
    argv = argv_of(config, args)
    chunks: list[bytes] = []
    try:
        finish = start(argv, env, cwd, input, timeout, spawn, chunks.append, spawn is not None)
    except OSError as exc:
        failed = cannot_run(argv, exc)
        return lambda: failed

    def result() -> GitResult[bytes]:
        ended = finish()
        if ended.stopped:
            return Err(GitError(args=tuple(argv), stderr=ended.stderr, reason=STOPPED))
        if ended.timed_out:
            return timeout_error(argv, ended.stderr, timeout)
        if ended.returncode != 0:
            return Err(GitError(args=tuple(argv), returncode=ended.returncode, stderr=ended.stderr))
        if warnings is not None:
            warnings.extend(_warning_lines(ended.stderr))
        return Ok(b"".join(chunks))

    return result


def argv_of(config: Sequence[tuple[str, str]], args: Sequence[str]) -> list[str]:
    """``git -c k=v ... <args>``."""
    argv = ["git"]
    for key, value in config:
        argv += ["-c", f"{key}={value}"]
    return argv + list(args)


def _warning_lines(stderr: bytes) -> list[str]:
    """git's ``warning:`` lines, without the prefix."""
    return [
        line[len("warning: ") :]
        for line in stderr.decode("utf-8", "replace").splitlines()
        if line.startswith("warning: ")
    ]


def timeout_error(argv: list[str], stderr: bytes, timeout: float | None) -> Err:
    """Git was stopped after ``timeout`` seconds."""
    return Err(
        GitError(
            args=tuple(argv),
            stderr=stderr,
            reason=f"git timed out after {timeout:g} seconds",
            timed_out=True,
        )
    )


def cannot_run(argv: list[str], exc: OSError) -> Err:
    """Git could not be started (not found, not executable)."""
    return Err(
        GitError(
            args=tuple(argv),
            reason=f"cannot run git: {os.strerror(exc.errno) if exc.errno else exc}",
            errno=exc.errno,
        )
    )
