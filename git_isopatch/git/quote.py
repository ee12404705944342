"""Names quoted as git quotes them (git's ``quote.c``), for the porcelain
and for every message a person reads: a path or a name from the command's
world (a file it wrote, a ref, a worktree it added) may hold a carriage
return or an escape sequence that would rewrite the terminal's line.
"""

from __future__ import annotations

import os

_C_ESCAPES = {
    0x07: b"\\a",
    0x08: b"\\b",
    0x09: b"\\t",
    0x0A: b"\\n",
    0x0B: b"\\v",
    0x0C: b"\\f",
    0x0D: b"\\r",
    0x22: b'\\"',
    0x5C: b"\\\\",
}


def quote_c_style(path: bytes) -> bytes:
    """Quote ``path`` the way git quotes paths with ``core.quotePath=true``.

    A path is quoted only when it has to be: when it holds a control byte,
    ``"``, ``\\`` or a byte of 0x80 and above.  Then it is put in double
    quotes with C escapes (``\\t``, ``\\n``, ``\\"``, ``\\\\``, ...) and octal
    ``\\ooo`` for other bytes (git's quote.c, ``quote_c_style``).
    """
    if not any(b < 0x20 or b >= 0x7F or b in (0x22, 0x5C) for b in path):
        return path
    out = bytearray(b'"')
    for b in path:
        if b in _C_ESCAPES:
            out += _C_ESCAPES[b]
        elif b < 0x20 or b >= 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    out += b'"'
    return bytes(out)


def quoted(name: str | bytes) -> str:
    """``name`` as a message names it: ``'name'``, or C-quoted
    (``"a\\rb"``, :func:`quote_c_style`) when it holds a byte that needs it,
    so that nothing of it reaches the terminal raw."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    text = quote_c_style(raw).decode("ascii")
    return text if text.startswith('"') else f"'{text}'"


#: The characters a terminal acts on (the C0 controls, DEL and the C1
#: controls), each to its escape (``\\r``, ``\\033``, ``\\302\\233``).
_ESCAPED = {
    code: quote_c_style(os.fsencode(chr(code)))[1:-1].decode()
    for code in (*range(0x20), *range(0x7F, 0xA0))
}


def terminal_safe(line: str) -> str:
    """``line`` with every control character escaped (``\\r``, ``\\033``),
    the last defence of a message: a name that reached it unquoted still
    cannot move the cursor, erase the line or set the terminal's title."""
    return line.translate(_ESCAPED)


def shell_quoted(word: str) -> str:
    """``word`` for a POSIX shell (:func:`shlex.quote`); one holding a
    control character in the ``$'...'`` form (POSIX.1-2024, bash, zsh,
    ksh), its controls escaped, so that the command can be shown and
    typed."""
    import shlex

    if word == terminal_safe(word):
        return shlex.quote(word)
    escaped = word.replace("\\", "\\\\").replace("'", "\\'")
    return "$'" + terminal_safe(escaped) + "'"
