"""acco.atomic: a write that fails part-way leaves the old file as it was and no temporary file;
one that succeeds replaces it whole, with the permissions open() would have given."""

from __future__ import annotations

import os

import pytest

from acco.atomic import atomic_open, atomic_write


class Boom(Exception):
    pass


def _listing(folder) -> list[str]:
    return sorted(os.listdir(folder))


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old content\n")
    return path


def test_text_bytes_and_callback_replace_the_file(old_file):
    atomic_write(old_file, "new ✓\n")
    assert old_file.read_text(encoding="utf-8") == "new ✓\n"
    atomic_write(old_file, b"\x00\x01bytes")
    assert old_file.read_bytes() == b"\x00\x01bytes"
    seen = []

    def write(tmp: str) -> None:
        seen.append(tmp)
        with open(tmp, "w") as f:  # a writer that opens the path itself (torch.save, tokenizer.save)
            f.write("from a callback")

    atomic_write(old_file, write, fsync=True)
    assert old_file.read_text() == "from a callback"
    assert os.path.dirname(seen[0]) == str(old_file.parent)  # same folder: the rename is atomic
    assert seen[0] != str(old_file)
    assert _listing(old_file.parent) == ["summary.json"]


def test_a_new_file_is_created(tmp_path):
    with atomic_open(tmp_path / "metrics.csv", "w", newline="") as f:
        f.write("step\r\n1\r\n")
    assert (tmp_path / "metrics.csv").read_bytes() == b"step\r\n1\r\n"
    assert _listing(tmp_path) == ["metrics.csv"]


def test_failure_mid_stream_keeps_the_old_file_and_leaves_no_temporary(old_file):
    with pytest.raises(Boom):
        with atomic_open(old_file, "w") as f:
            f.write("half of the new con")
            f.flush()
            # the half-written content is on disk, but not under the target's name
            assert old_file.read_text() == "old content\n"
            assert len(_listing(old_file.parent)) == 2
            raise Boom
    assert old_file.read_text() == "old content\n"
    assert _listing(old_file.parent) == ["summary.json"]


def test_failure_in_a_callback_keeps_the_old_file_and_leaves_no_temporary(old_file):
    def half(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(b"partial")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(old_file, half)
    assert old_file.read_text() == "old content\n"
    assert _listing(old_file.parent) == ["summary.json"]


def test_failure_to_encode_keeps_the_old_file(old_file):
    with pytest.raises(UnicodeEncodeError):
        atomic_write(old_file, "not ascii: é", encoding="ascii")
    assert old_file.read_text() == "old content\n"
    assert _listing(old_file.parent) == ["summary.json"]


def test_fsync_before_the_rename_when_asked(old_file, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1])
    atomic_write(old_file, "durable", fsync=True)
    atomic_write(old_file, lambda tmp: open(tmp, "w").close(), fsync=True)
    assert events == ["fsync", "replace", "fsync", "replace"]
    events.clear()
    atomic_write(old_file, "not durable")
    assert events == ["replace"]


def test_permissions_are_those_of_open(tmp_path):
    previous = os.umask(0o022)
    try:
        atomic_write(tmp_path / "a", "x")
        atomic_write(tmp_path / "b", lambda tmp: open(tmp, "w").close())
        with open(tmp_path / "c", "w"):
            pass
    finally:
        os.umask(previous)
    modes = {name: os.stat(tmp_path / name).st_mode & 0o777 for name in "abc"}
    assert modes == {"a": 0o644, "b": 0o644, "c": 0o644}


def test_only_w_modes(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        with atomic_open(tmp_path / "x", "a"):
            pass
    assert _listing(tmp_path) == []
