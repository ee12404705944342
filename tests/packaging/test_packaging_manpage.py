"""The manual page is built from man/git-isopatch.rst, is not stale, and
documents every option; -h, the README and the page stay in step (issue 3)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

from git_isopatch import cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "man" / "git-isopatch.1"
SECTIONS = [
    "NAME",
    "SYNOPSIS",
    "DESCRIPTION",
    "OPTIONS",
    "OUTPUT",
    "EXIT STATUS",
    "CONFIGURATION",
    "ENVIRONMENT",
    "FILES",
    "EXAMPLES",
    "SEE ALSO",
]


def _load_build():
    spec = importlib.util.spec_from_file_location("man_build", ROOT / "man" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain(roff: str) -> str:
    """The roff source with font changes and escapes made plain text."""
    text = re.sub(r"\\f[BIRP]", "", roff).replace("\\-", "-").replace("\\(aq", "'")
    return text.replace("\\&", "")


def _sections(roff: str) -> dict[str, str]:
    parts = re.split(r"^\.SH (.+)$", roff, flags=re.MULTILINE)
    return {name.strip('"'): body for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def _all_option_names() -> list[str]:
    import typer.main

    command = typer.main.get_command(cli.app)
    names = []
    for param in command.params:
        if param.param_type_name == "option":
            names += [*param.opts, *param.secondary_opts]
    return names


def test_committed_page_is_built_from_its_source() -> None:
    build = _load_build()
    assert PAGE.read_bytes() == build.build(), "stale: run python man/build.py and commit"


def test_build_check_fails_on_a_stale_page(tmp_path: Path, monkeypatch) -> None:
    build = _load_build()
    stale = tmp_path / "git-isopatch.1"
    stale.write_bytes(PAGE.read_bytes().replace(b"\\-\\-porcelain", b"\\-\\-porcelian", 1))
    monkeypatch.setattr(build, "PAGE", stale)
    assert build.main(["--check"]) == 1
    stale.write_bytes(PAGE.read_bytes())
    assert build.main(["--check"]) == 0


def test_page_footer_carries_the_package_version() -> None:
    import git_isopatch

    header = next(line for line in PAGE.read_text().splitlines() if line.startswith(".TH "))
    assert header.startswith('.TH "GIT-ISOPATCH" "1" ')
    assert f'"git-isopatch {git_isopatch.__version__}"' in header


def test_page_has_every_section_in_order() -> None:
    names = list(_sections(PAGE.read_text()))
    assert names == SECTIONS


def test_every_option_is_in_options_section_and_short_help() -> None:
    """The page's OPTIONS is the one table of options (the README links to
    it rather than repeat it)."""
    options = _plain(_sections(PAGE.read_text())["OPTIONS"])
    terms = "\n".join(re.findall(r"^\.TP\n(?:\.B )?(.*)$", options, flags=re.MULTILINE))
    usage = "".join(cli.short_usage().replace("--[no-]", f) for f in ("--", "--no-"))
    names = _all_option_names()
    assert {"--base", "-C", "--output", "--keep", "--no-keep", "--timeout", "-z"} <= set(names)
    for name in names:
        word = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        assert re.search(word, terms), f"{name} is not an entry of OPTIONS in the page"
        assert re.search(word, usage), f"{name} is not in -h"


def test_examples_the_issue_asks_for() -> None:
    examples = _plain(_sections(PAGE.read_text())["EXAMPLES"])
    assert "git isopatch -- npm run lint:fix" in examples
    assert "git isopatch --stdout -- ruff format . | git apply" in examples
    assert "--porcelain -z" in examples and "read -r -d ''" in examples


def test_porcelain_script_example_works(env, make_repo) -> None:
    """The script that reads `--porcelain -z` does what it says, as printed."""
    text = _plain(_sections(PAGE.read_text())["EXAMPLES"])
    start = text.index("while IFS= read -r -d '' record; do")
    script = text[start : text.index("make fmt)", start) + len("make fmt)")]
    script = re.sub(r"^\s{0,6}(?=\S)", "", script, flags=re.MULTILINE)
    repo = make_repo({"Makefile": "fmt:\n\techo formatted > out.txt\n"})
    script += '\nprintf "%s|%s" "$status" "$patch"\n'
    done = subprocess.run(
        ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    status, patch = done.stdout.split("|")
    assert status == "0"
    assert b"+formatted" in Path(patch).read_bytes()


def test_no_inline_markup_leaks_into_the_page() -> None:
    """An asterisk meant as text (a glob such as ``isopatch-apply-*``) must be
    escaped in the source: unescaped, reStructuredText pairs it with the
    next one, sets the words between in italics and prints the rest of the
    markup as text (``Under *--staged**``)."""
    text = _plain(PAGE.read_text())
    assert "**" not in text
    assert "isopatch-apply-*;" in text
