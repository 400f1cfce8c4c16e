"""No test file imports conftest.py or another test file (issue 44 point 5): what tests share lives
in tests/helpers/, fixtures in conftest.py, which pytest hands to every test by name."""

from __future__ import annotations

import ast
import glob
import os

from tests.helpers.paths import ROOT


def _forbidden(module: str) -> bool:
    """A dotted module name that is conftest or a test file (any part named conftest or test_*)."""
    return any(part == "conftest" or part.startswith("test_") for part in module.split(".") if part)


def imports_of_tests(source: str, filename: str) -> list[str]:
    """`filename:line: what` for every import of conftest or of a test_* module in `source`, at any
    depth (inside functions too): `from .conftest import x`, `from tests import conftest`,
    `import tests.test_x`, `from . import test_x`, `from tests.unit.test_x import y`."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            modules = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        bad = [m for m in modules if _forbidden(m)]
        if bad:
            found.append(f"{filename}:{node.lineno}: imports {bad[0].lstrip('.') or bad[0]}")
    return found


def find_test_files(root: str) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "**", "test_*.py"), recursive=True))


def test_no_test_file_imports_conftest_or_another_test_file():
    files = find_test_files(os.path.join(ROOT, "tests"))
    assert len(files) > 50, files  # the walk found the suite
    found = [hit for path in files for hit in imports_of_tests(open(path).read(), os.path.relpath(path, ROOT))]
    assert not found, "import from tests/helpers/ instead:\n" + "\n".join(found)


def test_the_check_names_each_bad_import_by_file_and_line(tmp_path):
    bad = tmp_path / "tier" / "test_bad.py"
    bad.parent.mkdir()
    bad.write_text(
        "import os\n"
        "from .conftest import ROOT\n"
        "from tests.conftest import SMALL_LM\n"
        "from tests import conftest\n"
        "from .test_gpu import gpu\n"
        "import tests.unit.test_stats\n"
        "from . import test_sbatch\n"
        "from tests.helpers.runs import run_train\n"
        "\n"
        "def test_x():\n"
        "    from ..integration.test_gradient_oracle import oracle_run\n"
    )
    (tmp_path / "tier" / "helper.py").write_text("from .conftest import ROOT\n")  # not a test file
    (files,) = [find_test_files(str(tmp_path))]
    assert files == [str(bad)]
    found = imports_of_tests(bad.read_text(), "tier/test_bad.py")
    assert [hit.split(": ")[0] for hit in found] == [f"tier/test_bad.py:{n}" for n in (2, 3, 4, 5, 6, 7, 11)]
    assert found[0] == "tier/test_bad.py:2: imports conftest"
    assert found[-1] == "tier/test_bad.py:11: imports integration.test_gradient_oracle"
    assert imports_of_tests("from tests.helpers.oracle import Replay\nimport acco.harness.testbed\n", "ok.py") == []
