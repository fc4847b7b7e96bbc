"""The README stays a front page (at most 250 lines: the long tables live in docs/, one link away), and every
relative link in the README, CONTRIBUTING.md and docs/ leads to a file that exists (text moved between pages
keeps its links true)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the long parts into docs/"


PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_files_that_exist(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL or an anchor on the same page
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"
