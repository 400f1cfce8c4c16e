"""Offline compute nodes (issue 29, point 3): hub ids read from the hub cache as the hub client lays
it out, the checks pass when the prepared cache is there, the token cache survives switching a
config from a hub id to a local copy, and experiments/prepare_data.py fetches what the runs name by
hub id. The hub is unreachable here: it is stood in for by writing its cache layout directly."""

import importlib.util
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from acco.config.experiments import compose
from acco.config.schema import typed
from acco.data import prepare_pretraining as pretrain_mod
from acco.data import sources as sources_mod
from acco.data.sources import DataNotFoundError, load_raw_dataset
from acco.data.stories import generate_stories
from acco.harness.rehearsal.hub_cache import write_hub_repo
from tests.helpers import paths

ROOT = Path(paths.ROOT)
BPE = {"kind": "bpe", "vocab_size": 300}


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No hub, and a hub cache of this test's own (read from HF_HUB_CACHE at each call)."""
    monkeypatch.setattr(sources_mod, "hub_reachable", lambda timeout=3.0: False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path / "hub"


def _parquet(texts: list[str]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": pa.array(texts, type=pa.string())}), sink)
    return sink.getvalue().to_pybytes()


def tinystories_files(n: int = 120) -> dict[str, bytes]:
    stories = generate_stories(n + 20, 4)
    return {
        "data/train-00000-of-00001.parquet": _parquet(stories[:n]),
        "data/validation-00000-of-00001.parquet": _parquet(stories[n:]),
    }


def test_a_hub_id_is_read_from_the_hub_cache_with_the_hub_unreachable(offline, tmp_path):
    from acco.harness.run.preflight import check_source

    with pytest.raises(DataNotFoundError, match="not in the Hugging Face cache"):
        check_source({"hub_id": "roneneldan/TinyStories"}, "data.source.path")
    write_hub_repo(offline, "roneneldan/TinyStories", "dataset", tinystories_files())
    check_source({"hub_id": "roneneldan/TinyStories"}, "data.source.path")  # the prepared cache: passes
    val = load_raw_dataset("roneneldan/TinyStories", None, "validation", cache_dir=tmp_path / "arrow")
    assert len(val) == 20 and val.column_names == ["text"]
    # the LAMBADA layout: the `default` config folder, `test` split
    write_hub_repo(
        offline, "EleutherAI/lambada_openai", "dataset", {"default/test-00000-of-00001.parquet": _parquet(["a b c"])}
    )
    lam = load_raw_dataset("EleutherAI/lambada_openai", None, "test", config_name="default")
    assert lam["text"] == ["a b c"]


def test_switching_from_hub_id_to_a_local_copy_keeps_the_token_cache(offline, tmp_path, monkeypatch):
    files = tinystories_files()
    write_hub_repo(offline, "roneneldan/TinyStories", "dataset", files)
    hub = {"hub_id": "roneneldan/TinyStories", "val_split": "validation"}
    built = pretrain_mod.prepare_pretraining_data(hub, BPE, 32, 0.1, 0, tmp_path / "cache")
    folder = Path(built.tokenizer_path).parent
    # what `hf download --local-dir` leaves: the same files, plus its hidden .cache/ bookkeeping
    copy = tmp_path / "data" / "tinystories"
    for rel, data in files.items():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_bytes(data)
    (copy / ".cache" / "huggingface").mkdir(parents=True)
    (copy / ".cache" / "huggingface" / "download.lock").write_text("x")

    def rebuilt(*a, **k):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(pretrain_mod, "_build", rebuilt)
    local = pretrain_mod.prepare_pretraining_data(dict(hub, path=str(copy)), BPE, 32, 0.1, 0, tmp_path / "cache")
    assert Path(local.tokenizer_path).parent == folder
    # other data under the same hub id (the rehearsal's stand-ins) is another key
    other = tmp_path / "rehearsal" / "tinystories"
    shutil.copytree(copy, other)
    (other / "data" / "validation-00000-of-00001.parquet").write_bytes(_parquet(generate_stories(5, 9)))
    assert (
        pretrain_mod.pretraining_cache_path(dict(hub, path=str(other)), BPE, 32, 0.1, 0, tmp_path / "cache") != folder
    )


def test_a_tokenizer_named_by_hub_id_is_read_from_the_hub_cache(offline, tmp_path):
    from transformers import GPTNeoConfig, PreTrainedTokenizerFast

    from acco.data.tokenizer import load_pretrained_tokenizer, train_bpe_tokenizer

    train_bpe_tokenizer(generate_stories(100, 0), 300, tmp_path / "t.json")
    PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "t.json"), eos_token="<|endoftext|>").save_pretrained(
        str(tmp_path / "saved")
    )
    files = {f.name: f.read_bytes() for f in (tmp_path / "saved").iterdir()}
    files["config.json"] = GPTNeoConfig(vocab_size=300).to_json_string().encode()  # a model repository's
    write_hub_repo(offline, "EleutherAI/gpt-neo-125M", "model", files)
    tok = load_pretrained_tokenizer(None, "EleutherAI/gpt-neo-125M")
    assert len(tok) == 300 and tok.eos_token == "<|endoftext|>"


# -- what experiments/prepare_data.py fetches ------------------------------------------------------------
def test_hub_needs_of_the_paper_experiments(tmp_path, monkeypatch):
    from acco.data.hub_fetch import MODEL_FILES, hub_needs

    monkeypatch.setenv("ACCO_MODELS", str(tmp_path / "models"))
    fig7 = {(n.what, n.repo_id, n.local_dir) for n in hub_needs(typed(compose(["experiment=fig7/paper"])))}
    assert fig7 == {
        ("dataset", "Skylion007/openwebtext", None),  # None: into the hub cache
        ("dataset", "EleutherAI/lambada_openai", None),
        ("tokenizer", "EleutherAI/gpt-neo-125M", str(tmp_path / "models" / "gpt-neo-125M")),
    }
    fig8 = hub_needs(typed(compose(["experiment=fig8/paper"])))
    # the tokenizer is the model folder's: one download of the model brings both
    assert [(n.what, n.repo_id, n.local_dir) for n in fig8] == [
        ("dataset", "tatsu-lab/alpaca", None),
        ("model", "EleutherAI/gpt-neo-2.7B", str(tmp_path / "models" / "gpt-neo-2.7B")),
    ]
    assert fig8[1].include == MODEL_FILES and fig8[0].include == ("data/*",)
    (tmp_path / "models" / "gpt-neo-2.7B").mkdir(parents=True)  # there: nothing more to fetch
    assert [n.what for n in hub_needs(typed(compose(["experiment=fig8/paper"])))] == ["dataset"]


def _prepare_data_main():
    spec = importlib.util.spec_from_file_location("prepare_data", ROOT / "experiments" / "prepare_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_prepare_data_fetches_hub_ids_where_the_jobs_read_them(offline, tmp_path, monkeypatch, capsys):
    """The login node (hub reachable) fetches the dataset into the hub cache, then builds the token
    cache from it; a job (hub unreachable) then passes its checks and finds the same token cache."""
    import acco.data.hub as hub_mod

    calls = []

    def fake_fetch(repo_id, repo_type="dataset", include=None, local_dir=None):  # the hub, stood in for
        calls.append((repo_id, repo_type, include, local_dir))
        assert (repo_id, repo_type, local_dir) == ("roneneldan/TinyStories", "dataset", None)
        return write_hub_repo(offline, repo_id, repo_type, tinystories_files())

    monkeypatch.setattr(hub_mod, "fetch_snapshot", fake_fetch)
    monkeypatch.setattr(sources_mod, "hub_reachable", lambda timeout=3.0: True)
    monkeypatch.setenv("ACCO_CACHE", str(tmp_path / "cache"))
    args = ["data=tinystories", "data.seq_len=32", "data.tokenizer.vocab_size=300", "data.num_proc=1"]
    assert _prepare_data_main()(args) == 0
    assert calls == [("roneneldan/TinyStories", "dataset", ["data/*"], None)]
    assert "prepare: fetching dataset roneneldan/TinyStories into " + str(offline) in capsys.readouterr().out
    built = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir() and p.name.startswith("pretrain-"))
    assert len(built) == 1
    # the job's side: no hub, the prepared caches there
    monkeypatch.setattr(sources_mod, "hub_reachable", lambda timeout=3.0: False)
    from acco.harness.run.preflight import check_data_present
    from acco.tasks import prepare_task_data

    cfg = typed(compose(args))
    check_data_present(cfg)
    monkeypatch.setattr(pretrain_mod, "_build", lambda *a, **k: pytest.fail("rebuilt on the compute node"))
    assert prepare_task_data(cfg)["tokenizer"].startswith(str(tmp_path / "cache" / built[0]))
    assert _prepare_data_main()(args) == 0 and len(calls) == 1  # found: not fetched again


def test_prepare_data_without_the_hub_fetches_nothing_and_names_what_is_missing(offline, tmp_path, monkeypatch):
    import acco.data.hub as hub_mod

    monkeypatch.setattr(hub_mod, "fetch_snapshot", lambda *a, **k: pytest.fail("fetched without a hub"))
    monkeypatch.setenv("ACCO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SystemExit) as ei:
        _prepare_data_main()(["data=tinystories", "data.seq_len=32"])
    assert ei.value.code == 2
