"""Every relative link of README.md and docs/ (notes included) resolves: the file exists and, with
a `#fragment`, a heading of that file has GitHub's anchor for it."""

import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def prose_lines(path):
    """(line number, line) of `path` outside fenced code blocks."""
    inside = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            yield number, line


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens.

    >>> anchor("Where the loop's time went, and recomputation: measured")
    'where-the-loops-time-went-and-recomputation-measured'
    """
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    for _, line in prose_lines(path):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = anchor(match.group(1))
            name, n = base, 1
            while name in found:  # GitHub numbers repeated headings
                name, n = f"{base}-{n}", n + 1
            found.add(name)
    return found


def broken_links(path, root=REPO):
    broken = []
    for number, line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, fragment = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{where} (no heading with that anchor)")
    return broken


def test_anchor_follows_github():
    assert anchor("Export for TF Serving") == "export-for-tf-serving"
    assert anchor("Raw text in `fit`, `evaluate` and `predict`") == (
        "raw-text-in-fit-evaluate-and-predict"
    )


def test_a_broken_link_is_found(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Top\n\n[ok](#top) [bad](#nowhere) [gone](b.md)\n```\n[x](c.md)\n```\n")
    assert broken_links(doc, root=tmp_path) == [
        "a.md:3: #nowhere (no heading with that anchor)",
        "a.md:3: b.md (no such file)",
    ]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_resolve(path):
    assert broken_links(path) == []
