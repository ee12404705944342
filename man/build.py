"""Build ``man/git-isopatch.1`` from ``man/git-isopatch.rst``.

    python man/build.py          # write man/git-isopatch.1
    python man/build.py --check  # exit 1 if the committed page is stale

Uses docutils' manpage writer (the ``test`` extra pins its
version: the page names it, so another version would make the page differ).
The version in the page's footer is the package's ``__version__``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAN_DIR = Path(__file__).resolve().parent
SOURCE = MAN_DIR / "git-isopatch.rst"
PAGE = MAN_DIR / "git-isopatch.1"
INIT = MAN_DIR.parent / "git_isopatch" / "__init__.py"


def package_version() -> str:
    """``__version__`` of git_isopatch, read without importing it."""
    match = re.search(r'^__version__ = "([^"]+)"$', INIT.read_text(encoding="utf-8"), re.MULTILINE)
    if match is None:
        raise SystemExit(f"fatal: no __version__ in '{INIT}'")
    return match.group(1)


def render(source: str, version: str) -> bytes:
    """The roff page for the reStructuredText ``source``; ``|version|``
    becomes ``git-isopatch <version>``."""
    from docutils.core import publish_string
    from docutils.writers import manpage

    text = f"{source}\n.. |version| replace:: git-isopatch {version}\n"
    page = publish_string(
        text,
        writer=manpage.Writer(),
        settings_overrides={
            "report_level": 2,  # warnings and errors
            "halt_level": 2,  # a warning in the source fails the build
            "input_encoding": "utf-8",
            "output_encoding": "utf-8",
        },
    )
    # As man-pages(7) and git's pages have them: the title in capitals in
    # the header, and the first section called NAME (docutils writes "Name").
    for old, new in (
        (b'.TH "git-isopatch"', b'.TH "GIT-ISOPATCH"'),
        (b".SH Name\n", b".SH NAME\n"),
    ):
        if page.count(old) != 1:
            raise SystemExit(f"fatal: docutils wrote no {old.decode()!r}: update man/build.py")
        page = page.replace(old, new)
    return page


def build() -> bytes:
    return render(SOURCE.read_text(encoding="utf-8"), package_version())


def main(argv: list[str]) -> int:
    page = build()
    if argv == ["--check"]:
        if not PAGE.exists() or PAGE.read_bytes() != page:
            print(f"error: '{PAGE}' is stale; run: python man/build.py", file=sys.stderr)
            return 1
        return 0
    if argv:
        print("usage: python man/build.py [--check]", file=sys.stderr)
        return 129
    PAGE.write_bytes(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
