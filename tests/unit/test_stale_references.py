"""Comments and docstrings that send a reader to a file or a section send them somewhere that
exists: every path under the repository's own folders named in the code's comments and docstrings
(acco/, analysis/, experiments/, hydra_plugins/) exists, `<placeholders>` matching at least one
file; every `README "Title"` / `docs/x.md "Title"` names a heading of that file; and nothing points
at the developers' own notes (SPEC), which a clone does not have. Paths under results/ and
slurm/generated/ are what commands write, and a path after `owner/repo` is another repository's."""

from __future__ import annotations

import glob
import io
import os
import re
import tokenize

import pytest

from tests.helpers.paths import ROOT

CODE = ("acco", "analysis", "experiments", "hydra_plugins")
OWN = ("acco/", "analysis/", "experiments/", "tests/", "docs/", "conf/", "hydra_plugins/", "slurm/", ".ci/")
WRITTEN = ("slurm/generated/",)  # made by commands, not in a clone
# a user's own file, which the comment tells them to make
USERS = {"conf/launcher/mycluster.yaml"}
OWN_PREFIX = "|".join(re.escape(t) for t in OWN)
PATH = re.compile(r"(?<![\w./-])((?:" + OWN_PREFIX + r")[\w./<>*-]*[\w>*])")
SECTION = re.compile(r"\b(README(?:\.md)?|docs/[\w-]+\.md),? [\"“]([^\"”]{3,80})[\"”]")
REPO = re.compile(r"\(?(?:https?://)?(?:github\.com/)?[\w.-]+/[\w.-]+,?")  # owner/repo before its path


def comments_and_docstrings(path: str):
    """(line, text) of each comment and triple-quoted string of a Python file."""
    with open(path) as f:
        src = f.read()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT or (
            tok.type == tokenize.STRING and tok.string.lstrip("rbuRBUfF").startswith(('"""', "'''"))
        ):
            yield tok.start[0], tok.string


def code_files() -> list[str]:
    found = []
    for top in CODE:
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "conf")]
            found += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return sorted(found)


def exists(ref: str) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", ref)  # a placeholder, or a glob as written
    for base in (ROOT, os.path.join(ROOT, "acco")):  # conf/ is acco/conf
        if glob.glob(os.path.join(base, pattern)):
            return True
    return False


def headings(path: str) -> list[str]:
    found, fenced = [], False
    with open(path) as f:
        for line in f:
            fenced ^= line.startswith("```")
            if line.startswith("#") and not fenced:
                found.append(line.lstrip("#").strip().replace("`", ""))
    return found


def references():
    for path in code_files():
        where = os.path.relpath(path, ROOT)
        for line, text in comments_and_docstrings(path):
            for m in PATH.finditer(text):
                before = text[: m.start()].split()
                if before and REPO.fullmatch(before[-1]):
                    continue
                ref = m.group(1).rstrip(".")
                if not ref.startswith(WRITTEN) and ref not in USERS:
                    yield where, line, "path", ref
            for m in SECTION.finditer(text):
                yield where, line, "section", (m.group(1), m.group(2))
            if re.search(r"\bSPEC\b", text):
                yield where, line, "spec", "SPEC"


def test_the_scan_finds_references():
    kinds = [kind for _, _, kind, _ in references()]
    assert kinds.count("path") > 300 and kinds.count("section") >= 1


@pytest.mark.parametrize("kind", ["path", "section", "spec"])
def test_every_reference_points_somewhere(kind):
    stale = []
    for where, line, found, ref in references():
        if found != kind:
            continue
        if kind == "path" and not exists(ref):
            stale.append(f"{where}:{line}: {ref}")
        elif kind == "section":
            doc, title = ref
            file = os.path.join(ROOT, "README.md" if doc.startswith("README") else doc)
            if not os.path.exists(file) or not any(h.startswith(title) for h in headings(file)):
                stale.append(f'{where}:{line}: {doc} "{title}"')
        elif kind == "spec":
            stale.append(f"{where}:{line}: the developers' SPEC is not in a clone; name a doc of docs/")
    assert not stale, "\n".join(stale)
