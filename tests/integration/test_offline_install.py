"""The offline install of the GPU check (issue 42 point 11): the wheel folder `make wheels` makes,
installed with --no-index --no-deps beside a Python that has only what the GPU machine's image has
(torch, transformers, tokenizers, numpy, pandas, pyarrow, pytest ... and what they need), is enough
for `experiments/gpu_check.py` to import everything it runs (without a GPU it then says so and
exits 0); without the wheels it names what is missing, exit 2.

The image is emulated from this virtual environment: a bare venv (no site packages) whose path
holds links to the image's distributions only. Needs the package index for `make wheels` (CI has it).

And the library without the clone (issue 44 point 1): acco built as a wheel (not editable) and
installed beside its dependencies only, a plain PyTorch loop calling `acco.Overlapped` with its
defaults runs under torchrun from a folder outside the clone."""

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


def emulated_image(folder, names: list[str] = IMAGE) -> str:
    """A folder of links to the image's distributions' top-level files (a path for PYTHONPATH);
    `names`: other distributions (and what they need) instead of the image's."""
    site = sysconfig.get_paths()["purelib"]
    os.makedirs(folder, exist_ok=True)
    for dist in closure(names):
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


# A plain PyTorch loop: its own model, loss and data; acco.Overlapped with its defaults (method acco,
# adaptive, the optimizer's and the method's settings read from the conf/ the package carries).
PLAIN_LOOP = """
import torch
import torch.distributed as dist
from torch import nn

import acco

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)  # the same initial weights on every rank
model = nn.Sequential(nn.Embedding(64, 32), nn.Linear(32, 64))


def loss_fn(model, ids):
    logits = model(ids[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, 64), ids[:, 1:].reshape(-1))


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    while True:
        yield torch.randint(0, 64, (4, 16), generator=g)


with acco.Overlapped(model, loss_fn, batches(rank), steps=6) as trainer:
    for step in range(1, 7):
        out = trainer.step()
        if rank == 0:
            print(f"step {step} loss {out.loss_mean:.4f}", flush=True)
if rank == 0:
    from acco.config.location import conf_dir

    print("acco at", acco.__file__, "conf at", conf_dir(), flush=True)
dist.destroy_process_group()
"""


@pytest.mark.integration
def test_the_library_installed_from_a_wheel_trains_in_a_plain_loop_outside_the_clone(tmp_path):
    import shutil

    try:
        import setuptools  # noqa: F401  (the wheel is built with this environment's, offline)
    except ImportError:
        pytest.skip("building acco's wheel offline needs setuptools in this environment (pip install setuptools)")
    # the source as a distribution carries it (no .venv, results or build leftovers), copied so the
    # build writes nothing into the clone
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), src)
    for package in ("acco", "analysis", "hydra_plugins"):
        shutil.copytree(os.path.join(ROOT, package), src / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
        + ["-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").iterdir()
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    assert (site / "acco" / "conf" / "config.yaml").is_file()  # the config and its defaults ship with it
    assert (site / "acco" / "conf" / "method" / "acco.yaml").is_file()
    # a bare venv: the wheel's acco, and acco's dependencies linked from this environment (not acco)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    try:  # acco's requirements (pyproject.toml's dependencies), as this environment installed them
        requires = [r for r in md.requires("acco") or [] if "extra ==" not in r]
    except md.PackageNotFoundError:
        pytest.skip("acco is not installed in this environment (make install): its dependencies are linked from it")
    deps = emulated_image(tmp_path / "deps", [re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0] for r in requires])
    assert not os.path.exists(os.path.join(deps, "acco"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "loop.py").write_text(PLAIN_LOOP)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=os.pathsep.join([str(site), deps]), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [str(bare / "bin" / "python"), "-m", "torch.distributed.run", "--nproc_per_node", "2", "loop.py"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    losses = [float(line.split()[-1]) for line in run.stdout.splitlines() if line.startswith("step ")]
    assert len(losses) == 6 and all(0 < x < 10 for x in losses), run.stdout
    where = next(line for line in run.stdout.splitlines() if line.startswith("acco at"))
    assert str(site) in where and ROOT not in where, where  # the installed copy, not the clone's
