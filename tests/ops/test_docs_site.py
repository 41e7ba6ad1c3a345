"""The manual in docs/ builds with `mkdocs build --strict` (mkdocs.yml: every page in the
nav, every link and anchor found, the bench notebooks included), and every relative link
of README.md points at a file of the checkout and, with a #fragment, at one of its
headings. Both fail on what a reader would meet as a dead link."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(120)

# [text](target) and ![alt](target); a target up to whitespace or ")" (no titles here)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.M)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' toc both make it for the headings here:
    lowercased, punctuation but `-` and `_` dropped, spaces as `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())
    return {slug(h) for h in _HEADING.findall(text)}


def relative_links(path: Path) -> list[str]:
    text = _FENCE.sub("", path.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    return [t for t in _LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_slug_matches_the_anchors_mkdocs_makes() -> None:
    assert slug("Data safety and limits") == "data-safety-and-limits"
    assert slug("`kbroker serve`") == "kbroker-serve"
    assert slug("Installing kbroker into another project") == "installing-kbroker-into-another-project"


def test_every_relative_link_of_the_readme_resolves() -> None:
    readme = ROOT / "README.md"
    links = relative_links(readme)
    # the README links into docs/: a parser that found none is broken
    assert sum(link.startswith("docs/") for link in links) >= 5, links
    broken = []
    for link in links:
        target, _, fragment = link.partition("#")
        path = (readme.parent / target).resolve() if target else readme
        if not path.exists():
            broken.append(f"{link}: no {path.relative_to(ROOT)}")
        elif fragment and (path.suffix != ".md" or fragment not in anchors(path)):
            broken.append(f"{link}: no heading #{fragment} in {path.relative_to(ROOT)}")
    assert broken == []


def test_a_dead_link_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[there](missing.md) [here](#title) `[not](a-link.md)`\n"
                    "```\n[nor](this.md)\n```\n[site](https://example.org/x.md)\n")
    assert relative_links(page) == ["missing.md", "#title"]
    assert anchors(page) == {"title"}


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about MkDocs 2
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)


def test_the_manual_builds_strictly(tmp_path: Path) -> None:
    done = mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert [line for line in output.splitlines() if "WARNING" in line] == []
    site = tmp_path / "site"
    # every page of docs/ is built, the bench notebooks with their text included
    pages = {p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")}
    # a page is built as <page>/index.html; index.md and README.md as their folder's
    expected = {p.parent if p.name in ("index", "README") else p for p in pages}
    built = {p.parent.relative_to(site) for p in site.rglob("index.html")}
    assert expected <= built
    # bench/README.md and RESULTS.md included whole (pymdownx.snippets), not left as markers
    for notebook, source in ((site / "bench", "README.md"), (site / "bench" / "RESULTS", "RESULTS.md")):
        html = (notebook / "index.html").read_text()
        assert "--8&lt;--" not in html and "--8<--" not in html
        first = (ROOT / "bench" / source).read_text().splitlines()[0].lstrip("# ")
        assert f">{first}<" in html.replace("\n", "")


def test_the_strict_build_fails_on_what_a_reader_would_trip_over(tmp_path: Path) -> None:
    """mkdocs.yml's settings, on pages of a dead anchor, a missing page and a page left
    out of the nav: the build fails naming each."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[a](other.md#nowhere) [b](missing.md)\n")
    (docs / "other.md").write_text("# Other\n")
    (docs / "stray.md").write_text("# Stray\n")
    config.update(docs_dir=str(docs), nav=[{"Home": "index.md"}, {"Other": "other.md"}])
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "'#nowhere'" in output and "'missing.md'" in output and "stray.md" in output, output
