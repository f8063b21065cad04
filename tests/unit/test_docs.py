"""The documentation against the code: the generated reference pages, the site's
navigation, relative links from the README, and no commit hashes on user pages.

`mkdocs build --strict` (in .ci/run) checks every link and anchor of the site; these
checks are the cheap ones that need no MkDocs, so a plain `pytest` catches them too.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_pages_are_what_the_code_generates():
    gen = _generator()
    for path, page in gen.PAGES.items():
        committed = (ROOT / path).read_text() if (ROOT / path).is_file() else None
        assert committed == page(), f"{path} differs from the code: run `{gen.COMMAND}` and commit it"


def test_the_generator_check_mode_names_a_stale_page(tmp_path):
    gen = _generator()
    for path, page in gen.PAGES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(page())
    stale = Path("docs/reference/options.md")
    (tmp_path / stale).write_text("# Options\n\nedited by hand\n")
    assert gen.stale_pages(tmp_path) == [stale]


def test_the_options_page_names_every_flag_and_ini_option():
    from pytest_llmperf.options import OPTIONS

    page = (DOCS / "reference" / "options.md").read_text()
    for opt in OPTIONS:
        assert all(f"`{flag}" in page for flag in opt.flags), opt.flags
        assert f"`{opt.ini}`" in page, opt.ini
    assert "`llmperf_tolerances`" in page  # ini-only, registered by plugin.py


def test_every_option_that_takes_a_value_names_what_it_takes():
    page = (DOCS / "reference" / "options.md").read_text()
    vague = re.findall(r"`(--llmperf-[a-z-]+) \[?VALUE\]?`", page)
    assert not vague, f"give these a word in scripts/gen_reference.py's METAVARS: {vague}"


def _nav_pages() -> set[str]:
    """The .md paths mkdocs.yml's nav names (one `title: path.md` per line)."""
    text = (ROOT / "mkdocs.yml").read_text()
    nav = text[text.index("\nnav:") :]
    return set(re.findall(r":\s*([\w./-]+\.md)\s*$", nav, re.M))


def test_every_page_under_docs_is_in_the_sites_nav():
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    nav = _nav_pages()
    assert not pages - nav, f"add to mkdocs.yml's nav (mkdocs build --strict fails otherwise): {sorted(pages - nav)}"
    assert not nav - pages, f"mkdocs.yml's nav names pages that do not exist: {sorted(nav - pages)}"


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move detail into docs/ (at most 300)"


def _relative_links(text: str) -> list[str]:
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    return [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


@pytest.mark.parametrize("page", [README, ROOT / "CONTRIBUTING.md"], ids=lambda p: p.name)
def test_relative_links_outside_the_site_point_at_files(page):
    """README.md and CONTRIBUTING.md are read on GitHub, outside the site's link check."""
    missing = [link for link in _relative_links(page.read_text()) if not (page.parent / link.split("#")[0]).exists()]
    assert not missing, f"{page.name} links to files that do not exist: {missing}"


# A commit hash beside "at", "since" or "before" ("fixed at 3f0c9a1"): which commit a
# figure came from belongs in the commit message; a user page says the date and the
# command. The token must mix digits and letters, so plain numbers ("at 1000000") pass.
_HEX = r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
COMMIT_NEAR_WORD = re.compile(
    rf"\b(?:at|since|before)\W{{1,3}}{_HEX}\b|\b{_HEX}\W{{1,3}}(?:at|since|before)\b", re.IGNORECASE
)


def _user_pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def test_the_commit_pattern_catches_what_it_is_for():
    assert COMMIT_NEAR_WORD.search("the power table at b79e64c (5 % drop caught)")
    assert COMMIT_NEAR_WORD.search("slower since `3f0c9a1b`")
    assert COMMIT_NEAR_WORD.search("measured c8b0682 before the change")
    assert not COMMIT_NEAR_WORD.search("at 1000000 requests, since 2026-12-01, before 0.32.0")
    assert not COMMIT_NEAR_WORD.search('"commit":"c8b0682"')  # a record's field, beside no such word


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_pages_name_no_commit_hashes(page):
    hits = [m.group(0) for m in COMMIT_NEAR_WORD.finditer(page.read_text())]
    assert not hits, f"{page.relative_to(ROOT)}: say the date and the command, not the commit: {hits}"


# A private network address (RFC 1918) pasted from a capture: the machine it came from,
# of no use to a reader. Loopback and 0.0.0.0 are what the docs mean to show.
PRIVATE_ADDRESS = re.compile(r"\b(?:10(?:\.\d{1,3}){3}|(?:192\.168|172\.(?:1[6-9]|2\d|3[01]))(?:\.\d{1,3}){2})\b")


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_pages_paste_no_private_network_address(page):
    hits = PRIVATE_ADDRESS.findall(page.read_text())
    assert not hits, f"{page.relative_to(ROOT)}: an address of the machine a capture came from: {hits}"
