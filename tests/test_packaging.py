"""Packaging: the wheel ships fp4kit.reference and the CUDA sources; `import fp4kit` needs no CuPy.

The wheel is built from a copy of the checkout's source files (tracked, or new and not ignored), so
a stale build/ directory cannot hide a file that the package configuration leaves out.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# top-level source folder -> where its files live inside the wheel / the installed package
SHIPPED = {"reference": "fp4kit/reference", "cuda_src": "fp4kit/cuda_src", "fp4kit": "fp4kit"}
SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", ".venv", ".whl", ".cache"}
SKIP_SUFFIXES = (".pyc", ".pyo", ".egg-info")


def source_files() -> list[str]:
    """Repo-relative paths of the checkout's source files (what git would commit), no caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=REPO, check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist, say)
        files = []
        for root, dirs, names in os.walk(REPO):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(SKIP_SUFFIXES)]
            files += [os.path.relpath(os.path.join(root, n), REPO) for n in names]
    keep = []
    for f in files:
        parts = Path(f).parts
        if any(p in SKIP_DIRS for p in parts) or f.endswith(SKIP_SUFFIXES) or not (REPO / f).is_file():
            continue
        keep.append(Path(f).as_posix())
    return sorted(keep)


def shipped_files() -> dict[str, str]:
    """{repo path: path inside the wheel} for every file of the shipped source folders."""
    out = {}
    for f in source_files():
        top, _, rest = f.partition("/")
        if top in SHIPPED and rest:
            out[f] = f"{SHIPPED[top]}/{rest}"
    return out


def _copy_sources(dst: Path) -> Path:
    for f in source_files():
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dst / f)
    return dst


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (pip install '.[test]')")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy_sources(tmp / "src")
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "-q", "-w", str(tmp / "dist"), str(src)]
    env = {k: v for k, v in os.environ.items() if k != "DIST_EXTRA_CONFIG"}  # build in src/build
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=env)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout}\n{r.stderr}"
    wheels = list((tmp / "dist").glob("fp4kit-*.whl"))
    assert len(wheels) == 1, f"expected one fp4kit wheel, got {wheels}"
    with zipfile.ZipFile(wheels[0]) as z:
        yield z


def test_wheel_ships_reference_and_cuda_sources(wheel):
    names = set(wheel.namelist())
    expected = shipped_files()
    assert any(f.startswith("reference/") for f in expected), "no reference/ files found in the checkout"
    missing = sorted(f"{src} -> {dst}" for src, dst in expected.items() if dst not in names)
    assert not missing, f"{len(missing)} source files missing from the wheel:\n" + "\n".join(missing[:30])
    for src, dst in expected.items():
        assert wheel.read(dst) == (REPO / src).read_bytes(), f"{dst} in the wheel differs from {src}"


def test_wheel_has_nothing_else(wheel):
    names = wheel.namelist()
    caches = [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo"))]
    assert not caches, f"caches in the wheel: {caches[:10]}"
    tops = {n.split("/")[0] for n in names}
    stray = sorted(t for t in tops if t != "fp4kit" and not t.endswith(".dist-info"))
    assert not stray, f"unexpected top-level entries in the wheel: {stray}"


def test_wheel_metadata_and_console_script(wheel):
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    text = wheel.read(meta).decode()
    # one version: pyproject.toml's (the wheel's) is fp4kit.__version__ (--version, check's header)
    init = (REPO / "fp4kit" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"', init, re.M).group(1)
    assert f"\nVersion: {version}\n" in text, f"the wheel's version is not fp4kit.__version__ {version!r}"
    for req in ("numpy", "ml_dtypes"):
        assert f"Requires-Dist: {req}" in text, f"{req} is not a dependency"
    for extra in ("cuda12", "cuda13", "test", "plot"):
        assert f"Provides-Extra: {extra}" in text, f"extra {extra!r} missing"
    eps = next(n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt"))
    assert "fp4kit = fp4kit.__main__:main" in wheel.read(eps).decode()


def test_sdist_holds_the_package_sources_and_no_partial_test_suite(tmp_path):
    """The sdist has every file the wheel is built from, and no tests/ (setuptools adds
    tests/test*.py by default: without conftest.py, tests/gpu, docs/ and examples/ they cannot run)."""
    pytest.importorskip("setuptools", reason="building the sdist needs setuptools (pip install '.[test]')")
    src = _copy_sources(tmp_path / "src")
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    env = {k: v for k, v in os.environ.items() if k != "DIST_EXTRA_CONFIG"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dist")], cwd=src, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"build_sdist failed:\n{r.stdout}\n{r.stderr}"
    with tarfile.open(tmp_path / "dist" / r.stdout.split()[-1]) as tar:
        names = {n.partition("/")[2] for n in tar.getnames()}
    expected = [f for f in shipped_files()] + ["pyproject.toml", "README.md"]
    missing = sorted(f for f in expected if f not in names)
    assert not missing, f"{len(missing)} files missing from the sdist: {missing[:20]}"
    stray = sorted(n for n in names if n.split("/")[0] in ("tests", "scripts", "docs", "examples", ".ci", ".prof"))
    assert not stray, f"unexpected files in the sdist: {stray[:20]}"


def _cli_usage(args: list[str], tmp_path: Path) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_fp4kit_parent()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{args} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout.splitlines()[0]


def test_console_script_and_dash_m_name_themselves_in_usage(tmp_path):
    """`fp4kit --help` (the console script, fp4kit.__main__:main) says `usage: fp4kit`;
    `python -m fp4kit --help` says `usage: python -m fp4kit`."""
    assert _cli_usage([sys.executable, "-m", "fp4kit", "--help"], tmp_path).startswith("usage: python -m fp4kit [-h]")
    script = "import sys; sys.argv[0] = 'fp4kit'; from fp4kit.__main__ import main; sys.exit(main(['--help']))"
    assert _cli_usage([sys.executable, "-c", script], tmp_path).startswith("usage: fp4kit [-h]")
    # the installed script itself, when these tests run against an installed fp4kit (.ci/run)
    exe = shutil.which("fp4kit", path=str(Path(sys.executable).parent))
    if exe and Path(_fp4kit_parent()) != REPO:
        assert _cli_usage([exe, "check", "--help"], tmp_path).startswith("usage: fp4kit check [-h]")


def _fp4kit_parent() -> str:
    """The sys.path entry this test session imports fp4kit from (source tree or site-packages)."""
    spec = importlib.util.find_spec("fp4kit")
    assert spec is not None and spec.submodule_search_locations, "fp4kit is not importable"
    return str(Path(list(spec.submodule_search_locations)[0]).resolve().parent)


def test_installed_package_has_data_files():
    """When the tests run against an installed fp4kit (as .ci/run does), the package data is there."""
    parent = Path(_fp4kit_parent())
    if parent == REPO:
        pytest.skip("fp4kit is imported from the source tree; the wheel tests cover the package data")
    missing = [dst for dst in shipped_files().values() if not (parent / dst).is_file()]
    assert not missing, f"{len(missing)} files missing from the installed package {parent}/fp4kit: {missing[:20]}"


def _python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_fp4kit_parent()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("PYTHONSTARTUP", None)
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)


BLOCK_CUPY = """
import sys
class _NoCupy:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('cupy', 'cupyx', 'cupy_backends'):
            raise ImportError(f'{name} is blocked by this test')
        return None
sys.meta_path.insert(0, _NoCupy())
"""


def test_import_without_cupy(tmp_path):
    code = BLOCK_CUPY + """
import fp4kit, fp4kit.cli
import fp4kit.reference
print('ok', fp4kit.__name__)
"""
    r = _python(code, tmp_path)
    assert r.returncode == 0 and "ok fp4kit" in r.stdout, f"import fp4kit failed with CuPy unavailable:\n{r.stderr}"


def test_import_does_not_load_array_libraries(tmp_path):
    code = """
import sys
import fp4kit
loaded = sorted(m for m in ('cupy', 'cupyx', 'torch', 'jax') if m in sys.modules)
print('loaded:', ','.join(loaded))
"""
    r = _python(code, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "loaded: \n" in r.stdout or r.stdout.rstrip().endswith("loaded:"), \
        f"`import fp4kit` imported array libraries: {r.stdout.strip()}"


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _declared_bounds() -> tuple[str, dict[str, str]]:
    """pyproject.toml's dependencies line, and its `name>=X` bounds {name: X}."""
    deps = re.search(r"^dependencies = \[([^\]]*)\]", (REPO / "pyproject.toml").read_text(), re.M).group(1)
    return deps, dict(re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9.]+)"', deps))


def test_ci_tests_the_declared_lower_bounds():
    """pyproject.toml's `name>=X` dependencies are what .ci/run's second test run installs: the
    constraints file pins each to an X.* release (for the Pythons that X has wheels for) and pins
    nothing that is not a dependency; so a lower bound that cannot work (ml_dtypes 0.4, which lacks
    the FP6 types) fails CI instead of a user's install."""
    deps, bounds = _declared_bounds()
    assert set(bounds) == {"numpy", "ml_dtypes"}, f"dependencies without a lower bound: {deps}"
    pins: dict[str, list[tuple[str, str]]] = {}
    for line in (REPO / ".ci" / "min-versions.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9.]+)\s*(?:;\s*(.+))?", line)
            assert m, f".ci/min-versions.txt: {line!r} is not 'name==version[; marker]'"
            pins.setdefault(m.group(1), []).append((m.group(2), m.group(3) or ""))
    assert set(pins) == set(bounds), f"pinned {sorted(pins)}, declared {sorted(bounds)}"
    for name, lo in bounds.items():
        versions = [_version(v) for v, _ in pins[name]]
        assert min(versions) >= _version(lo), f"{name}: a pin below the declared >= {lo}"
        first = min(pins[name], key=lambda p: _version(p[0]))
        assert _version(first[0])[:len(_version(lo))] == _version(lo), (
            f"{name}: the lowest pin {first[0]} is not a {lo}.* release, so >= {lo} is untested")
        assert not first[1] or "<" in first[1], f"{name}: the lowest pin must cover the oldest Pythons"
    assert ".ci/min-versions.txt" in (REPO / ".ci" / "run").read_text(), ".ci/run does not install the pins"


def test_installed_numpy_and_ml_dtypes_meet_the_declared_bounds():
    """The versions these tests run with are within what pyproject.toml declares (both CI runs)."""
    import ml_dtypes
    import numpy

    _, bounds = _declared_bounds()
    for name, mod in (("numpy", numpy), ("ml_dtypes", ml_dtypes)):
        have = _version(re.match(r"[0-9.]+", mod.__version__).group(0).rstrip("."))
        assert have >= _version(bounds[name]), f"{name} {mod.__version__} is below the declared >= {bounds[name]}"
