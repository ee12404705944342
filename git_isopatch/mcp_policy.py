"""What the MCP server's tool calls may ask for (design: Command line,
"Subcommands"): the operator decides when the server starts, not the
agent that calls its tools.

A call runs in the sandbox with the network kept from it and its writes
outside the worktree discarded, unless the server was started with the
option that lets calls loosen that (``--allow-unconfined`` for ``sandbox:
false``, ``--allow-network`` for ``allow_network``, ``--allow-write <path>``
for an ``allow_write`` path under that path); a call that asks for more is
a tool error naming the option.  git-isopatch's own hints and messages
are told in the terms of a call (:meth:`ServerPolicy.said`).  The
repositories a call may name are those under the folder the server was
started in (``-C <path>``, else where it runs), or under the client's MCP
roots when it sends them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

#: The command line's options git-isopatch's messages name, and what a
#: ``capture`` call gives instead (:meth:`ServerPolicy.said`).
CALL_TERMS = {
    "--include-uncommitted": "include_uncommitted",
    "--staged": "staged",
    "--base": "base",
    "--link": "link",
    "--copy": "copy",
    "--recurse-submodules": "recurse_submodules",
    "--no-sandbox": "sandbox false",
    "--sandbox": "sandbox true",
    "--allow-write": "allow_write",
    "--allow-network": "allow_network",
    "--timeout": "timeout",
    "--keep": "keep",
    "--session": "session",
}
_OPTION = re.compile(
    r"(?<![\w-])(" + "|".join(sorted(CALL_TERMS, key=len, reverse=True)) + r")(?![\w-])"
)
#: How the command line ends a session; a client calls end_session.
_END = re.compile(r"'git isopatch --session (.+?) --end'")
#: How the command line splits a program name that holds a space.
_SPLIT = re.compile(r"split it \(git isopatch -- (.+)\) or use sh -c (.+)")
#: A command named after a subcommand, which the command line runs only
#: as its first argument; a call's command always names a program.
_SUBCOMMAND = re.compile(
    r"'([\w-]+)' is git isopatch's subcommand only as its first argument: "
    r"git isopatch \1 -C <path>"
)
#: The hint naming the subcommand closest to a program not found: no call
#: of this server runs one.
_SIMILAR = re.compile(r"the most similar subcommand is 'git isopatch [\w-]+'")
#: The result's keys whose text is git-isopatch's own words.
_TOLD_KEYS = ("error", "session-broken")


class Refused(Exception):
    """A call asked for what the server does not allow: the text says
    what, and which option of ``git isopatch mcp`` would allow it."""


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class ServerPolicy:
    """What the server lets calls loosen, fixed when it starts.

    Attributes:
        folder: the folder the server was started in (a real path): a
            call without ``repo`` works there, and one with ``repo`` may
            name only a folder inside it (or inside a root of the client).
        unconfined: ``--allow-unconfined``: a call may ask ``sandbox: false``.
        network: ``--allow-network``: a call may ask ``allow_network``.
        writable: ``--allow-write`` paths (real paths): a call's
            ``allow_write`` path must be one of them or inside one.
    """

    folder: str
    unconfined: bool = False
    network: bool = False
    writable: tuple[str, ...] = ()

    @classmethod
    def started(
        cls,
        folder: str,
        *,
        unconfined: bool = False,
        network: bool = False,
        writable: Iterable[str] = (),
    ) -> ServerPolicy:
        """The policy of a server started in ``folder`` with these options."""
        real = tuple(os.path.realpath(path) for path in writable)
        return cls(os.path.realpath(folder), unconfined, network, real)

    def repository(self, repo: str | None, roots: Sequence[str] = ()) -> str:
        """The folder a call with ``repo`` works in: ``repo`` taken from the
        server's folder (the server's folder itself without one).

        Raises:
            Refused: it leads outside the server's folder and the client's
                ``roots``.
        """
        path = os.path.join(self.folder, repo) if repo else self.folder
        real = os.path.realpath(path)
        if any(_inside(real, os.path.realpath(f)) for f in (self.folder, *roots)):
            return path
        raise Refused(
            f"repo '{repo}' is outside the folders this server works in ('{self.folder}'"
            + "".join(f", '{root}'" for root in roots)
            + "): start it there (git isopatch mcp -C <path>), or send that folder "
            "as one of the client's MCP roots"
        )

    def unnamed(self, repo: str | None, error: str) -> str:
        """``error`` (a call's tool error), with a ``hint:`` to name a
        repository when the call named none and the server's folder is in
        none (git's "not a git repository")."""
        if repo or "not a git repository" not in error:
            return error
        return (
            f"{error}\nhint: this server works in '{self.folder}', which is in no git "
            "repository: name one with repo, a path under that folder"
        )

    def told(self, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` with its hints, its error and why its session broke,
        which name the command line's options, told in the terms of this
        server's calls (:meth:`said`); the network hint says
        ``allow_network`` and ``sandbox: false`` where the server lets a
        call ask them, the option of ``git isopatch mcp`` that would where
        it does not; the hint naming the subcommand closest to a program
        not found is left out (no call runs a subcommand)."""
        from .hints import NETWORK_HINT, NETWORK_REFUSED

        network = (
            "a call with allow_network keeps the network"
            if self.network
            else "this server keeps the network from every call "
            "(started with 'git isopatch mcp --allow-network', a call may ask allow_network)"
        )
        unconfined = ", one with sandbox false runs it unconfined" if self.unconfined else ""
        told = {key: self.said(result[key]) for key in _TOLD_KEYS if key in result}
        hints = result.get("hint")
        if isinstance(hints, list):
            told["hint"] = [
                f"{NETWORK_REFUSED}; {network}{unconfined}" if h == NETWORK_HINT else self.said(h)
                for h in hints
                if not _SIMILAR.fullmatch(h)
            ]
        told = {**result, **told}
        if told.get("hint") == []:  # as --json, which gives no empty hint
            del told["hint"]
        return told

    def said(self, text: Any) -> Any:
        """``text``, git-isopatch's own words, with each option of the
        command line it names said as a call gives it (:data:`CALL_TERMS`):
        ``end_session`` for ``--session <name> --end``, and after what this
        server does not let a call ask, the option of ``git isopatch mcp``
        that would; a command named after a subcommand is a program; the
        manual is ``man git-isopatch``, not ``--help``."""
        if not isinstance(text, str):
            return text
        server = {
            "--no-sandbox": (self.unconfined, "--allow-unconfined"),
            "--allow-network": (self.network, "--allow-network"),
            "--allow-write": (bool(self.writable), "--allow-write <path>"),
        }

        def term(match: re.Match[str]) -> str:
            allowed, option = server.get(match[1], (True, ""))
            unless = "" if allowed else f" (on a server started with 'git isopatch mcp {option}')"
            return CALL_TERMS[match[1]] + unless

        def split(match: re.Match[str]) -> str:
            words, sh = shlex.split(match[1]), ["sh", "-c", *shlex.split(match[2])]
            return f"split it (command {json.dumps(words)}) or use command {json.dumps(sh)}"

        text = _END.sub(r"a call of end_session with session \1", text)
        text = _SUBCOMMAND.sub(
            r"""command ["\1"] runs a program of that name, not git isopatch's """
            r"subcommand '\1', which no call of this server runs",
            text,
        ).replace("'git isopatch --help'", "'man git-isopatch'")
        return _OPTION.sub(term, _SPLIT.sub(split, text))

    def check(
        self,
        where: str,
        *,
        sandbox: bool | None,
        allow_network: bool,
        allow_write: Sequence[str],
    ) -> None:
        """Refuse what the call in ``where`` asks beyond the policy.

        Raises:
            Refused: ``sandbox`` false without ``--allow-unconfined``,
                ``allow_network`` without ``--allow-network``, or an
                ``allow_write`` path (taken from ``where``) under no
                ``--allow-write`` path.
        """
        if sandbox is False and not self.unconfined:
            raise Refused(
                "sandbox false: this server runs commands in the sandbox only; "
                "start it with 'git isopatch mcp --allow-unconfined' to allow unconfined runs"
            )
        if allow_network and not self.network:
            raise Refused(
                "allow_network: this server keeps the network from commands; "
                "start it with 'git isopatch mcp --allow-network' to allow it"
            )
        for path in allow_write:
            real = os.path.realpath(os.path.join(where, path))
            if not any(_inside(real, allowed) for allowed in self.writable):
                raise Refused(
                    f"allow_write '{path}': not under a path this server lets commands "
                    "write; start it with 'git isopatch mcp --allow-write <path>' to allow it"
                )


def root_folders(uris: Iterable[str]) -> list[str]:
    """The folders of the client's MCP roots (``file://`` URIs; others are
    left out)."""
    folders = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
            folders.append(unquote(parsed.path))
    return folders
