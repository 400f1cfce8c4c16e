"""The commands the docs quote, run as written, and every command's `--help` (issue 50).

Every command quoted in a code block of README.md or docs/*.md that runs on a CPU in seconds (it
has `--help`, `--plan`, `--dry-run` or `--cfg job`) is run from the repository root with this
interpreter: it must exit 0 and write nothing into results/. Every command file (experiments/*.py,
the analysis commands analysis/__init__.py lists, and the modules under acco/ run as `python -m`)
must answer `--help` with exit 0 and a whole description: each of its prose paragraphs ends a
sentence (a description cut after its first line, as `__doc__.splitlines()[0]` gives, does not).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

pytestmark = pytest.mark.integration  # every test here starts a process

DOCS = ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))]
QUICK_FLAGS = ("--help", "--plan", "--dry-run", "--cfg")  # `--cfg job`: Hydra prints the config, runs nothing
HAS_MAIN = re.compile(r"^if __name__ == .__main__.:", re.M)
RESULTS = os.path.join(ROOT, "results")


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)


def command_lines(block: str) -> list[str]:
    """The block's lines with continuations (a trailing backslash) joined."""
    lines, pending = [], ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


ENV_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command line's leading VAR=value words (as a dict) and the command after them."""
    env: dict[str, str] = {}
    while words and ENV_WORD.match(words[0]):
        name, _, value = words[0].partition("=")
        env[name] = value
        words = words[1:]
    return env, words


def quoted_commands() -> list[tuple[str, list[str]]]:
    """(where, argv as the shell would split it, comment dropped) of every python command in the docs'
    code blocks with a quick flag among its arguments, each command once."""
    found: dict[tuple[str, ...], str] = {}
    for doc in DOCS:
        with open(os.path.join(ROOT, doc)) as f:
            text = f.read()
        for block in code_blocks(text):
            for line in command_lines(block):
                try:
                    words = shlex.split(line, comments=True)
                except ValueError:  # not shell (a tree, YAML, Python)
                    continue
                _, argv = split_env(words)
                if not argv or os.path.basename(argv[0]) not in ("python", "python3"):
                    continue
                if any(w in QUICK_FLAGS for w in argv) and tuple(words) not in found:
                    found[tuple(words)] = doc
    return [(doc, list(words)) for words, doc in found.items()]


def why_skipped(words: list[str]) -> str | None:
    """Why a quoted command cannot run here (a CPU machine, no Slurm, the checkout as it is), or None."""
    if any("<" in w and ">" in w for w in words):
        return "holds a placeholder (<...>) for the reader to fill in"
    if "experiments/gpu_check.py" in words and "--help" not in words:
        return "needs a CUDA GPU (make gpu-check)"
    for w in words:
        if w.startswith("launcher=") and not os.path.exists(os.path.join(ROOT, "conf", "launcher", f"{w[9:]}.yaml")):
            return f"names the reader's own launcher profile conf/launcher/{w[9:]}.yaml (docs/cluster.md)"
    if "--launcher" in words and "slurm" in words and not {"--plan", "--dry-run"} & set(words):
        return "submits to Slurm"
    return None


def results_snapshot() -> dict[str, tuple[int, int]]:
    """Every file under results/ with its size and modification time."""
    out = {}
    for folder, _, files in os.walk(RESULTS):
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:  # removed while we walked
                continue
            out[path] = (st.st_size, st.st_mtime_ns)
    return out


def as_run(words: list[str]) -> tuple[list[str], dict[str, str]]:
    """argv with the docs' `python` (or .venv/bin/python) as this interpreter, and the environment
    with the line's VAR=value prefixes."""
    env, argv = split_env(words)
    return [sys.executable, *argv[1:]], {**os.environ, **env}


QUOTED = quoted_commands()


def test_the_docs_quote_quick_commands():
    """The extraction finds the commands it is here for (a change in the docs' format would make the
    test below pass on nothing)."""
    lines = [" ".join(words) for _, words in QUOTED]
    assert any("--cfg job" in line for line in lines), lines
    assert any("--plan" in line for line in lines), lines
    assert any("--dry-run" in line for line in lines), lines


@pytest.mark.parametrize("doc, words", QUOTED, ids=[" ".join(w) for _, w in QUOTED])
def test_quoted_command_runs(doc, words):
    reason = why_skipped(words)
    if reason:
        pytest.skip(reason)
    argv, env = as_run(words)
    before = results_snapshot()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{doc}: {' '.join(words)}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    after = results_snapshot()
    changed = sorted(p for p in after if before.get(p) != after[p])
    assert not changed, f"{doc}: {' '.join(words)} wrote into results/: {changed[:10]}"


# -- every command's --help ---------------------------------------------------------------------------


def analysis_commands() -> list[str]:
    """The commands analysis/__init__.py lists (the one place that says which analysis files are)."""
    import analysis

    doc = " ".join((analysis.__doc__ or "").split())
    listed = re.search(r"the commands are exactly (.*?)\. Each", doc)
    assert listed, "analysis/__init__.py no longer says which files are commands"
    return sorted(re.findall(r"(\w+)\.py", listed.group(1)))


def files_with_main(folder: str) -> list[str]:
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.py"))):
        with open(path) as f:
            if HAS_MAIN.search(f.read()):
                out.append(os.path.splitext(os.path.basename(path))[0])
    return out


def module_commands() -> list[str]:
    """acco's modules that run as `python -m` (those with a __main__ block)."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "acco", "**", "*.py"), recursive=True)):
        with open(path) as f:
            if HAS_MAIN.search(f.read()):
                out.append(os.path.relpath(path, ROOT)[:-3].replace(os.sep, "."))
    return out


def test_analysis_commands_are_the_listed_ones():
    """An analysis module is a command (a __main__ block, --help) or a library module (neither), and
    analysis/__init__.py says which: a library module run as a script would print nothing."""
    assert files_with_main("analysis") == analysis_commands()


EXPERIMENTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "experiments", "*.py")))
COMMANDS = (
    [["experiments/" + name] for name in EXPERIMENTS]
    + [[f"analysis/{name}.py"] for name in analysis_commands()]
    + [["-m", module] for module in module_commands()]
)
HELP_SECTIONS = ("positional arguments:", "options:", "optional arguments:", "== Configuration groups ==")


def description(text: str) -> str:
    """The help's description: argparse's text between the usage and the arguments (Hydra's before
    its groups; the whole text of a command that prints its docstring)."""
    lines = text.strip("\n").splitlines()
    start = 0
    if lines and lines[0].startswith("usage:"):
        while start < len(lines) and lines[start].strip():
            start += 1
    out = []
    for line in lines[start:]:
        if line.strip() in HELP_SECTIONS:
            break
        out.append(line)
    return "\n".join(out).strip()


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_command_answers_help_with_a_whole_description(command):
    proc = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    text = description(proc.stdout)
    assert len(text) >= 40, f"no description in:\n{proc.stdout[:2000]}"
    paragraphs = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    prose = [" ".join(p.split()) for p in paragraphs if not p.startswith(" ")]  # examples are indented
    assert prose, text
    for paragraph in prose:  # ":" introduces the examples or a list, ")" closes a note in brackets
        assert paragraph.endswith((".", ":", ")")), f"a sentence cut short: ...{paragraph[-120:]!r}"
    script = command[0]
    if script.startswith("experiments/") and script != "experiments/simulate.py":  # simulate's help is the simulator's
        assert script in proc.stdout or "make " in proc.stdout, proc.stdout[:2000]  # an example
