"""Reading and making sbatch scripts in the tests: experiments/make_sbatch.py run in this process,
and the #SBATCH options of a script."""

from __future__ import annotations

import importlib.util
import os
import shlex

from .paths import ROOT

MAKE_SBATCH = os.path.join(ROOT, "experiments", "make_sbatch.py")


def directives(text: str) -> dict[str, str | None]:
    """--key=value options of the #SBATCH lines (before the first command, as sbatch reads them)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#SBATCH"):
            for token in shlex.split(line[len("#SBATCH") :]):
                key, _, value = token.partition("=")
                out[key] = value if _ else None
        elif line and not line.startswith("#"):
            break
    return out


def make_sbatch_here(capsys, *args) -> tuple[int, str, str]:
    """experiments/make_sbatch.py's main() in this process: (exit code, stdout, stderr)."""
    spec = importlib.util.spec_from_file_location("make_sbatch", MAKE_SBATCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    capsys.readouterr()
    try:
        code = module.main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
