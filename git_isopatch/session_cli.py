"""``git isopatch --session <name> --end``: ends a session
(:func:`.manage.end_session`), loaded only then."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import usage
from .logger import configure_logging_on_first_use


def end_session(params: Mapping[str, Any]) -> int:
    """``--session <name> --end``: end the session; 0, or 128 with one
    ``fatal:`` line (none of that name: a ``hint:`` names those there
    are; or it could not be removed), 129
    without ``--session``, with a command or with an option of a run."""
    from .errors import IsopatchError
    from .manage import end_session as end
    from .manage import session_names
    from .request import session_name_refusal

    name = params["session"]
    if name is None:
        raise usage.UsageFailure("the option '--end' requires '--session'")
    if params["command"]:
        raise usage.UsageFailure("option '--end' takes no command")
    if (given := run_option_given(params)) is not None:
        raise usage.UsageFailure(f"options '--end' and '{given}' cannot be used together")
    if (why := session_name_refusal(name)) is not None:
        raise usage.UsageFailure(why)
    configure_logging_on_first_use()
    try:
        ended = end(params["repo_path"], name)
    except IsopatchError as failure:
        usage.fatal(failure)
    if not ended:
        usage.stderr_line(f"fatal: no session '{name}'")
        if names := session_names(params["repo_path"]):  # a typo, or -C another repository
            usage.stderr_line(f"hint: the sessions here: {', '.join(names)}")
        return usage.FATAL_STATUS
    return 0


#: The options that go with ``--end`` (its synopsis, and ``-q``, which
#: scripts pass to every call).
END_OPTIONS = frozenset({"session", "end", "repo_path", "quiet"})


def run_option_given(params: Mapping[str, Any]) -> str | None:
    """The first option of a run given with ``--end`` (``--apply``,
    ``--json``, ``--no-sandbox``), as it is spelt, or ``None``: ending
    instead of doing what it asks would lose a change (``--apply``) or
    leave a script nothing to read (``--json``)."""
    import typer.main

    command = typer.main.get_command(usage.command_app("isopatch"))
    for param in command.params:
        value = params.get(param.name or "")
        if param.name in END_OPTIONS or value in (None, (), []) or value == param.default:
            continue
        if value is False and getattr(param, "secondary_opts", None):
            return param.secondary_opts[0]  # --no-sandbox, --no-keep
        return max(param.opts, key=len)
    return None
