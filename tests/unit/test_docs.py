"""The README is a quickstart that fits a few screens, the depth is in docs/, every link resolves,
and no number the suite measures is copied into them by hand: those live in the generated
results/*/REPORT.md, results/sim/, results/bench/ (issue 41)."""

from __future__ import annotations

import glob
import os
import re

from tests.helpers.paths import ROOT

README = os.path.join(ROOT, "README.md")
DOCS = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
# the report's own way of writing a measured gap: "+0.1 % [+0.0, +0.1]", "−26.6 pp [−36.3, −16.8]"
MEASURED = re.compile(r"[+−-]?\d+(?:\.\d+)?\s*(?:%|pp)\s*\[[+−-]?\d|\[[+−-]\d+(?:\.\d+)?, [+−-]\d+(?:\.\d+)?\]")


def prose(path: str) -> str:
    """The file without its code blocks (commands and their sample output)."""
    return re.sub(r"```.*?```", "", open(path).read(), flags=re.S)


def test_the_readme_is_a_quickstart():
    lines = open(README).read().splitlines()
    assert len(lines) <= 400, len(lines)
    first_screen = "\n".join(lines[:60])
    for needed in ("## Quickstart", "make install", "make train-cpu", "make test"):
        assert needed in first_screen, needed
    text = "\n".join(lines)
    for step in ("reproduce", "Slurm", "-m experiment=", "make figures", "docs/"):
        assert step in text, step
    headings = [ln for ln in lines if ln.startswith("## ")]
    assert headings[0] == "## Quickstart", headings


def test_every_topic_has_its_file_and_every_link_resolves():
    names = {os.path.basename(p) for p in DOCS}
    for topic in ("rounds", "api", "local-methods", "experiments", "virtual-clock", "cluster", "fault-tolerance"):
        assert f"{topic}.md" in names, topic
    assert {"outputs.md", "testing.md", "architecture.md"} <= names
    readme = open(README).read()
    assert all(f"docs/{n}" in readme for n in names), "the README's index names every docs/ file"
    for path in [README, *DOCS]:
        for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose(path)):
            if link.startswith(("http://", "https://")):
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(path), link))
            assert os.path.exists(target), f"{os.path.relpath(path, ROOT)}: {link}"


def test_no_measured_number_is_copied_by_hand():
    for path in [README, *DOCS]:
        found = [m.group(0) for m in MEASURED.finditer(prose(path))]
        assert not found, f"{os.path.relpath(path, ROOT)} copies measured gaps {found[:3]}: link the generated report"


def test_every_test_file_the_docs_name_exists():
    """A path under tests/ named in the README, docs/ or a README beside the code (the suite's
    folders move: issue 44 point 5) is a file that exists."""
    readmes = [README, *DOCS, *glob.glob(os.path.join(ROOT, "*", "README.md"))]
    readmes += glob.glob(os.path.join(ROOT, "results", "*", "README.md"))
    readmes += glob.glob(os.path.join(ROOT, "slurm", "*", "README.md"))
    named = 0
    for path in readmes:
        for name in re.findall(r"\btests/[\w/.-]*\w\.py\b", open(path).read()):
            named += 1
            assert os.path.exists(os.path.join(ROOT, name)), f"{os.path.relpath(path, ROOT)} names {name}"
    assert named >= 5, named  # the check reads the documents that name test files
