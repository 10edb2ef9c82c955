"""Where compiled kernels are cached (CPU: no GPU or compiler needed): fp4kit._loader.cache_dir.

A cubin found in the cache is loaded and run, and its .sha256 sidecar checks integrity, not
origin, so a fallback in the shared temporary directory must be one that only this user can
write; a FP4KIT_CACHE_DIR that cannot be used is said, not silently replaced."""
from __future__ import annotations

import os
import stat
import warnings

import pytest

from fp4kit import _loader

POSIX = hasattr(os, "getuid")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A clean temporary directory for the fallbacks and no remembered warnings or private dir."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(_loader.tempfile, "gettempdir", lambda: str(tmp))
    monkeypatch.setattr(_loader.tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(_loader, "_private_cache", None)
    monkeypatch.setattr(_loader, "_warned_cache", set())
    return tmp


def _shared(tmp):
    return tmp / f"fp4kit-cache-{os.getuid() if POSIX else 'user'}"


def test_the_cache_dir_of_the_environment_is_used_as_given(fresh, monkeypatch, tmp_path):
    want = tmp_path / "team" / "cache"
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(want))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _loader.cache_dir() == want and want.is_dir()


def test_an_unusable_cache_dir_warns_once_and_falls_back_to_a_private_one(fresh, monkeypatch, tmp_path):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("")
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(a_file))
    with pytest.warns(RuntimeWarning, match=r"FP4KIT_CACHE_DIR='.*not-a-dir' is not a writable directory"):
        got = _loader.cache_dir()
    assert got == _shared(fresh) and got.is_dir()
    if POSIX:
        st = got.lstat()
        assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # said once per process, not per kernel
        assert _loader.cache_dir() == got


@pytest.mark.skipif(not POSIX, reason="file ownership and modes are POSIX")
@pytest.mark.parametrize("planted", ["world_writable", "symlink", "other_owner"])
def test_a_shared_fallback_another_user_could_write_is_never_used(fresh, monkeypatch, tmp_path, planted):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path / "a-file" / "cache"))   # cannot be created
    shared = _shared(fresh)
    if planted == "world_writable":
        shared.mkdir()
        shared.chmod(0o777)
    elif planted == "symlink":
        (tmp_path / "elsewhere").mkdir()
        shared.symlink_to(tmp_path / "elsewhere")
    else:
        if os.getuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        shared.mkdir(mode=0o700)
        os.chown(shared, 4321, -1)
    with pytest.warns(RuntimeWarning) as rec:
        got = _loader.cache_dir()
    text = " ".join(str(w.message) for w in rec)
    assert "only this user can write" in text and "FP4KIT_CACHE_DIR" in text
    assert got != shared and got.parent == fresh and got.is_dir()
    st = got.lstat()
    assert not stat.S_ISLNK(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077 == 0
    assert _loader.cache_dir() == got                # the same private directory for the process


def test_naming_the_cache_makes_no_directory(fresh, monkeypatch, tmp_path):
    """cache_dir(create=False) (``fp4kit info``) names the directory a compile would use, unmade."""
    want = tmp_path / "team" / "cache"
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(want))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _loader.cache_dir(create=False) == want
    assert not (tmp_path / "team").exists()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path / "a-file" / "cache"))   # cannot be made
    with pytest.warns(RuntimeWarning, match="is not a writable directory"):
        got = _loader.cache_dir(create=False)
    assert got == _shared(fresh) and not got.exists()
    assert _loader.cache_dir() == got and got.is_dir()       # the compile's own choice is the same


@pytest.mark.skipif(not POSIX, reason="file modes are POSIX")
def test_naming_the_cache_when_the_shared_fallback_is_unsafe_makes_no_private_directory(fresh, monkeypatch, tmp_path):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("FP4KIT_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    shared = _shared(fresh)
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(RuntimeWarning, match="private directory for each process"):
        got = _loader.cache_dir(create=False)
    assert got.parent == fresh and not got.exists() and sorted(p.name for p in fresh.iterdir()) == [shared.name]
