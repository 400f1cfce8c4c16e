"""The offline install of the GPU check (issue 42 point 11): the wheel folder `make wheels` makes,
installed with --no-index --no-deps beside a Python that has only what the GPU machine's image has
(torch, transformers, tokenizers, numpy, pandas, pyarrow, pytest ... and what they need), is enough
for `experiments/gpu_check.py` to import everything it runs (without a GPU it then says so and
exits 0); without the wheels it names what is missing, exit 2.

The image is emulated from this virtual environment: a bare venv (no site packages) whose path
holds links to the image's distributions only. Needs the package index for `make wheels` (CI has it)."""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import subprocess
import sys
import sysconfig

import pytest

from tests.helpers.paths import ROOT

# the Python packages of the GPU machine's image (`nvidia-h200`, read on a machine running it on
# 2026-11-17) that this environment has; what they require is added (closure)
IMAGE = """accelerate aiohttp anyio attrs certifi charset-normalizer click cloudpickle execnet filelock
fsspec h11 hf-xet httpcore httpx huggingface-hub idna iniconfig jinja2 markupsafe matplotlib mpmath networkx
numpy packaging pandas pillow pluggy protobuf psutil pyarrow pygments pytest pytest-timeout pytest-xdist
python-dateutil pyyaml regex requests rich safetensors six sympy tokenizers torch tqdm transformers typer
typing-extensions urllib3 xxhash""".split()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(names: list[str]) -> list[md.Distribution]:
    """The distributions `names` and everything they require (extras left out), as installed here."""
    installed = {_norm(d.metadata["Name"]): d for d in md.distributions()}
    todo, seen = [_norm(n) for n in names], {}
    while todo:
        name = todo.pop()
        if name in seen or name not in installed:
            continue
        seen[name] = installed[name]
        for req in installed[name].requires or []:
            if "extra ==" in req:
                continue
            todo.append(_norm(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]))
    return list(seen.values())


def emulated_image(folder) -> str:
    """A folder of links to the image's distributions' top-level files (a path for PYTHONPATH)."""
    site = sysconfig.get_paths()["purelib"]
    os.makedirs(folder, exist_ok=True)
    for dist in closure(IMAGE):
        for top in {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}:
            src, dst = os.path.join(site, top), os.path.join(folder, top)
            if os.path.exists(src) and not os.path.exists(dst) and top != "__pycache__" and not top.endswith(".pth"):
                os.symlink(src, dst)
    return str(folder)


@pytest.mark.integration
def test_the_wheel_folder_installs_offline_beside_the_gpu_images_packages(tmp_path):
    wheels = tmp_path / "wheels"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    made = subprocess.run(
        ["make", "-s", "wheels", f"WHEELS={wheels}", f"WHEELS_PYTHON={version}", f"PY={sys.executable}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if made.returncode != 0 and re.search(r"(?i)connection|network|resolve|index", made.stderr):
        pytest.skip(f"make wheels needs the package index: {made.stderr.strip().splitlines()[-1]}")
    assert made.returncode == 0, made.stderr[-3000:]
    assert not any(n.lower().startswith(("torch", "nvidia", "triton")) for n in os.listdir(wheels))
    deps = tmp_path / "deps"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(deps)]
        + [str(w) for w in wheels.iterdir()],
        check=True,
        timeout=300,
    )
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    image = emulated_image(tmp_path / "image")
    check = [
        str(bare / "bin" / "python"),
        os.path.join(ROOT, "experiments", "gpu_check.py"),
        "--out",
        str(tmp_path / "g"),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    without = subprocess.run(
        check, cwd=tmp_path, env=dict(env, PYTHONPATH=image), capture_output=True, text=True, timeout=300
    )
    assert without.returncode == 2 and without.stderr.startswith("error: cannot import"), without.stderr[-2000:]
    assert "hydra" in without.stderr and "make wheels" in without.stderr
    with_wheels = subprocess.run(
        check,
        cwd=tmp_path,
        env=dict(env, PYTHONPATH=os.pathsep.join([str(deps), image])),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert with_wheels.returncode == 0, with_wheels.stderr[-3000:]
    assert "skipped: no CUDA GPU visible" in with_wheels.stdout
