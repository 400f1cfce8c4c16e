"""Every commit and every repository file a generated document names exists (issue 49 point 6).

The documents: the Markdown under results/ (REPORT.md and the files beside it, results/sim/,
results/bench/, results/gpu/) and the yaml whose texts the report prints (conf/experiment_info/*.yaml,
conf/experiment/*/*.yaml, analysis/*.yaml; read whole, comments included).

The rule, kept narrow so that what it reports is a broken name, never prose:
- a commit: 7-40 hex digits after the word "commit"/"commits" (backticks allowed), or alone in
  backticks with at least one letter a-f (`abc1234`, a range `abc1234..def5678`); it must be a commit
  of this checkout's history (`git cat-file -e <hash>^{commit}`). Without a git history (a tarball)
  or in a shallow clone, that half of the check is skipped with the reason.
- a path: a token whose first component is a top-level folder the repository tracks (acco/,
  analysis/, conf/, results/, ...: `git ls-files`, or the folder's own entries without git), not
  preceded by a letter, '/', '.' or '-', resolved against the repository root; and the target of a
  Markdown link or image that is not a URL, resolved against the document's folder (as a renderer
  does). Each must exist in the checkout. A `:line` suffix is dropped (the line may be the one at
  the commit a run was made at); a pytest node id's `::name` must be a def or class in its file.
  Left out, as naming no file of this repository: a token holding a placeholder or a pattern
  (<id>, {a,b}, *, …, $); a path git ignores (a run's output folder, results/bench/runs/: the
  document says it is not kept); a path right after the name of another project (FOREIGN:
  "torchtitan docs/performance.md" is torchtitan's file)."""

from __future__ import annotations

import glob
import os
import re
import subprocess
from functools import cache

import pytest

from tests.helpers.paths import ROOT


def documents(root: str = ROOT) -> list[str]:
    found = glob.glob(os.path.join(root, "results", "**", "*.md"), recursive=True)
    found += glob.glob(os.path.join(root, "conf", "experiment_info", "*.yaml"))
    found += glob.glob(os.path.join(root, "conf", "experiment", "*", "*.yaml"))
    found += glob.glob(os.path.join(root, "analysis", "*.yaml"))  # the report's own data (its claims' rows)
    return sorted(set(found))


# -- commits ------------------------------------------------------------------------------------------
HEX = r"[0-9a-f]{7,40}"
AFTER_WORD = re.compile(rf"\bcommits?\s+`?({HEX})\b")
IN_BACKTICKS = re.compile(rf"`({HEX})(?:\.\.\.?({HEX}))?`")


def commits_named(text: str) -> list[str]:
    named = AFTER_WORD.findall(text)
    for m in IN_BACKTICKS.finditer(text):
        named += [h for h in m.groups() if h and re.search("[a-f]", h)]
    return list(dict.fromkeys(named))


def git(*args: str, root: str = ROOT) -> subprocess.CompletedProcess | None:
    """`git -C root args...`; None where no git is installed."""
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None


def git_history(root: str = ROOT) -> str | None:
    """None when the checkout's commits can be looked up, else why not."""
    out = git("rev-parse", "--is-shallow-repository", root=root)
    if out is None:
        return "no git on this machine: the commits named cannot be looked up"
    if out.returncode != 0:
        return f"{root} is not a git checkout (a tarball?): the commits named cannot be looked up"
    if out.stdout.strip() == "true":
        return "a shallow clone: older commits named in the documents are not in it"
    return None


def commit_exists(sha: str, root: str = ROOT) -> bool:
    out = git("cat-file", "-e", f"{sha}^{{commit}}", root=root)
    return out is not None and out.returncode == 0


# -- paths --------------------------------------------------------------------------------------------
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PLACEHOLDER = re.compile(r"[<>{}*…$|]|\.\.\.")
FOREIGN = ("torchtitan",)  # other projects whose own files the documents name (results/sim: published rows)
SUFFIX = re.compile(r"(?:::(?P<node>\w+)|:\d+(?:-\d+)?)$")  # file.py::test_x, file.py:90


@cache
def top_level(root: str = ROOT) -> frozenset[str]:
    """The repository's top-level entries: those git tracks (so that ignored outputs, data/ or a
    virtual environment, are not taken for repository paths), or the folder's own without git."""
    out = git("ls-files", root=root)
    if out is not None and out.returncode == 0 and out.stdout:
        names = {line.split("/", 1)[0] for line in out.stdout.splitlines()}
    else:
        names = {n for n in os.listdir(root) if not n.startswith(".")}
    return frozenset(n for n in names if os.path.isdir(os.path.join(root, n)))  # conf: a link to acco/conf


def repo_paths_named(text: str, tops: frozenset[str]) -> list[str]:
    """Root-relative paths: a top-level folder, '/', then path characters; trailing punctuation off."""
    alternatives = "|".join(re.escape(t) for t in sorted(tops, key=len, reverse=True))
    token = re.compile(rf"(?<![\w/.\-])(?:{alternatives})/[^\s`'\"()\[\],;]*")
    foreign = re.compile(rf"\b(?:{'|'.join(FOREIGN)})[ /]$")
    named = []
    for m in token.finditer(text):
        path = m.group(0).rstrip(".:*")  # a sentence's end, Markdown's bold
        if PLACEHOLDER.search(path) or foreign.search(text[max(0, m.start() - 40) : m.start()]):
            continue
        named.append(path)
    return list(dict.fromkeys(named))


def ignored(path: str, root: str = ROOT) -> bool:
    """Whether git ignores `path` (a run's output, not a repository file)."""
    out = git("check-ignore", "-q", "--no-index", path, root=root)
    if out is None or out.returncode not in (0, 1):  # no git, or 128: not a git checkout
        return ignored_by_gitignore(path, root)
    return out.returncode == 0


def glob_match(path: str, pattern: str) -> bool:
    """A .gitignore pattern as git matches it: '*' and '?' stop at '/', '**/' spans folders."""
    out = ""
    for part in re.split(r"(\*\*/|\*|\?)", pattern):
        out += {"**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
    return re.fullmatch(out, path) is not None


def ignored_by_gitignore(path: str, root: str = ROOT) -> bool:
    """The root .gitignore read without git (a tarball): a path is ignored when one of its folders
    or itself is, each by the last pattern that matches it ('*' within a component, '**' across
    them, '!' re-includes)."""
    try:
        lines = open(os.path.join(root, ".gitignore")).read().splitlines()
    except FileNotFoundError:
        return False
    rules = [(ln.startswith("!"), ln.lstrip("!")) for ln in map(str.strip, lines) if ln and not ln.startswith("#")]
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        here, verdict = "/".join(parts[:i]), False
        for negated, pattern in rules:
            pat = pattern.rstrip("/")
            if glob_match(here if "/" in pat else parts[i - 1], pat.lstrip("/")):
                verdict = not negated
        if verdict:
            return True
    return False


def repo_path_exists(path: str, root: str = ROOT) -> bool:
    m = SUFFIX.search(path)
    file = path[: m.start()] if m else path
    if not os.path.exists(os.path.join(root, file)):
        return ignored(file, root)
    if m and m.group("node"):
        return (
            re.search(
                rf"^\s*(?:async\s+)?(?:def|class)\s+{m.group('node')}\b", open(os.path.join(root, file)).read(), re.M
            )
            is not None
        )
    return True


def links_named(text: str) -> list[str]:
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor in the same document
        out.append(target.split("#", 1)[0])
    return [t for t in dict.fromkeys(out) if t and not PLACEHOLDER.search(t)]


def missing(doc: str, root: str = ROOT, check_commits: bool = True) -> list[str]:
    """What `doc` names that does not exist: 'doc: commit X' / 'doc: path P' / 'doc: link L'."""
    text = open(doc, encoding="utf-8").read()
    where = os.path.relpath(doc, root)
    out = []
    if check_commits:
        out += [f"{where}: commit {sha}" for sha in commits_named(text) if not commit_exists(sha, root)]
    out += [f"{where}: path {p}" for p in repo_paths_named(text, top_level(root)) if not repo_path_exists(p, root)]
    if doc.endswith(".md"):
        base = os.path.dirname(doc)
        out += [f"{where}: link {t}" for t in links_named(text) if not os.path.exists(os.path.join(base, t))]
    return out


# -- the tests ----------------------------------------------------------------------------------------
def test_the_documents_are_found():
    docs = [os.path.relpath(d, ROOT) for d in documents()]
    for needed in ("results/cpu/REPORT.md", "conf/experiment_info/fig7.yaml", "conf/experiment/fig7/cpu.yaml"):
        assert needed in docs, needed
    assert any(d.startswith("results/sim/") for d in docs) and any(d.startswith("results/gpu/") for d in docs)


def test_every_path_a_generated_document_names_exists():
    found = [hit for doc in documents() for hit in missing(doc, check_commits=False)]
    assert not found, "named but not in the repository:\n" + "\n".join(found)


def test_every_commit_a_generated_document_names_exists():
    why = git_history()
    if why:
        pytest.skip(why)
    named = {doc: commits_named(open(doc, encoding="utf-8").read()) for doc in documents()}
    found = [
        f"{os.path.relpath(d, ROOT)}: commit {s}" for d, shas in named.items() for s in shas if not commit_exists(s)
    ]
    assert not found, "commits named but not in this history:\n" + "\n".join(found)
    assert sum(map(len, named.values())) >= 1  # the scan reads the commits the documents name


def test_the_check_finds_a_planted_bad_commit_and_path(tmp_path):
    """On a document of its own: real names pass; a made-up commit, path, test and link are each
    reported (the commits only where the checkout has its history)."""
    history = git_history() is None
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "claims.png").write_bytes(b"")
    head = git("rev-parse", "--short", "HEAD").stdout.strip() if history else "abc1234"
    good = (
        f"Made at commit {head} by `analysis/report.py:12` from "
        "conf/experiment/fig7/cpu.yaml (see [the claims](figures/claims.png), results/cpu/REPORT.md., "
        "`conf/experiment_info/<id>.yaml`, tests/unit/test_generated_docs_trace.py::test_the_documents_are_found, "
        "the untracked `results/bench/runs/`, torchtitan docs/performance.md, https://example.org/acco/x.py).\n"
    )
    doc = tmp_path / "REPORT.md"
    doc.write_text(good)
    assert missing(str(doc), check_commits=history) == []
    bad_sha = "0" * 40
    doc.write_text(
        good + f"The calibration of commit {bad_sha} and `deadbeef0123`, read by analysis/no_such_module.py, "
        "tested by tests/unit/test_generated_docs_trace.py::test_no_such_test, "
        "![a figure](figures/nope.png) and [a table](../tables/none.md).\n"
    )
    where = os.path.relpath(str(doc), ROOT)
    commits = [f"{where}: commit {bad_sha}", f"{where}: commit deadbeef0123"] if history else []
    assert missing(str(doc), check_commits=history) == commits + [
        f"{where}: path analysis/no_such_module.py",
        f"{where}: path tests/unit/test_generated_docs_trace.py::test_no_such_test",
        f"{where}: link figures/nope.png",
        f"{where}: link ../tables/none.md",
    ]
    # a yaml text as the report prints it: a path without backticks, no link syntax
    cfg = tmp_path / "fig7.yaml"
    cfg.write_text("if_not_reproduced: >-\n  the calibration in results/cpu/clock/calibration.jsn (commit abcdef0)\n")
    where = os.path.relpath(str(cfg), ROOT)
    commits = [f"{where}: commit abcdef0"] if history else []
    assert missing(str(cfg), check_commits=history) == commits + [f"{where}: path results/cpu/clock/calibration.jsn"]


def test_without_git_the_gitignore_is_read_as_git_reads_it():
    """A tarball has no git to ask: the fallback reader agrees with git on the paths that matter."""
    for path, expect in [
        ("results/bench/runs/", True),
        ("results/bench/runs/x/summary.json", True),
        ("results/bench/grid.csv", False),
        ("results/cpu/REPORT.md", False),
        ("results/cpu/fig7/acco_seed=0/model/", True),
        ("results/cpu/fig7/acco_seed=0/train.log", True),
        ("results/other/x.md", True),
        ("data/rehearsal/alpaca", True),
        ("acco/train/memory.py", False),
    ]:
        assert ignored_by_gitignore(path) is expect, path
        if git_history() is None:
            assert ignored(path) is expect, path
