"""tools/build_backend/gpudyn_build.py: the wheel rewrite after meson-python (host test).

A wheel laid out as meson-python writes one (dist-info with METADATA, WHEEL, RECORD) is
rewritten; the result is read back with zipfile and checked against the wheel format:
the name and tag, every RECORD hash, the executable bit, and the refusal of a wheel
holding a Python extension module.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import stat
import zipfile

import pytest

BACKEND = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "build_backend", "gpudyn_build.py")


@pytest.fixture(scope="module")
def backend():
    pytest.importorskip("mesonpy", reason="the backend wraps meson-python")
    spec = importlib.util.spec_from_file_location("gpudyn_build", BACKEND)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


METADATA = """Metadata-Version: 2.1
Name: gpudyn
Version: 0.3.1
Requires-Dist: cffi>=1.15
Provides-Extra: numba
Requires-Dist: numba-cuda[cu13]>=0.30; extra == "numba"
"""
ELF_LIBRARY = b"\x7fELF" + b"\0" * 60 + b"gpudyn_get_version\0"


def _meson_python_wheel(path, cuda_version="13.0", extra_files=None):
    files = {
        "gpudyn/__init__.py": b"",
        "gpudyn/_version.py": f'__version__ = "0.3.1"\nCUDA_VERSION = "{cuda_version}"\n'.encode(),
        "gpudyn/libgpudyn.so": ELF_LIBRARY,
        "gpudyn/bin/gpudyn_bench_x": b"\x7fELF" + b"\1" * 60,
        "gpudyn-0.3.1.dist-info/METADATA": METADATA.encode(),
        "gpudyn-0.3.1.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: meson\nRoot-Is-Purelib: false\n"
        b"Tag: cp311-cp311-linux_x86_64\n",
        "gpudyn-0.3.1.dist-info/entry_points.txt": b"[console_scripts]\ngpudyn = gpudyn.cli:main\n",
    }
    files.update(extra_files or {})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name)
            mode = 0o755 if "/bin/" in name else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, data)
        z.writestr("gpudyn-0.3.1.dist-info/RECORD", "stale\n")
    return files


def _check_record(z, distinfo):
    rows = [r.split(",") for r in z.read(f"{distinfo}/RECORD").decode().splitlines()]
    listed = {r[0] for r in rows}
    assert listed == set(z.namelist())
    for name, digest, size in rows:
        if name == f"{distinfo}/RECORD":
            assert digest == size == ""
            continue
        data = z.read(name)
        want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == "sha256=" + want and int(size) == len(data), name


def test_named_for_the_cuda_major_and_tagged_py3_none(backend, tmp_path):
    src = tmp_path / "gpudyn-0.3.1-cp311-cp311-linux_x86_64.whl"
    files = _meson_python_wheel(src)
    name = backend.finish_wheel(str(src))
    assert name == "gpudyn_cu13-0.3.1-py3-none-linux_x86_64.whl"
    assert sorted(os.listdir(tmp_path)) == [name]  # the cp311 wheel is replaced
    with zipfile.ZipFile(tmp_path / name) as z:
        di = "gpudyn_cu13-0.3.1.dist-info"
        meta = z.read(f"{di}/METADATA").decode().splitlines()
        assert "Name: gpudyn-cu13" in meta and "Name: gpudyn" not in meta
        assert 'Requires-Dist: numba-cuda[cu13]>=0.30; extra == "numba"' in meta and "Provides-Extra: numba" in meta
        wheel = z.read(f"{di}/WHEEL").decode().splitlines()
        assert "Tag: py3-none-linux_x86_64" in wheel and "Root-Is-Purelib: false" in wheel
        for f, data in files.items():  # the package's files, unchanged, under the same names
            if ".dist-info/" not in f:
                assert z.read(f) == data, f
        assert (z.getinfo("gpudyn/bin/gpudyn_bench_x").external_attr >> 16) & 0o111
        assert not [n for n in z.namelist() if n.startswith("gpudyn-0.3.1.dist-info/")]
        _check_record(z, di)


def test_other_cuda_major_and_no_suffix(backend, tmp_path):
    src = tmp_path / "a" / "gpudyn-0.3.1-cp311-cp311-linux_x86_64.whl"
    src.parent.mkdir()
    _meson_python_wheel(src, cuda_version="12.9")
    name = backend.finish_wheel(str(src))
    assert name == "gpudyn_cu12-0.3.1-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(src.parent / name) as z:
        meta = z.read("gpudyn_cu12-0.3.1.dist-info/METADATA").decode().splitlines()
        assert 'Requires-Dist: numba-cuda[cu12]>=0.30; extra == "numba"' in meta

    src = tmp_path / "b" / "gpudyn-0.3.1-cp311-cp311-linux_x86_64.whl"
    src.parent.mkdir()
    _meson_python_wheel(src)
    name = backend.finish_wheel(str(src), cuda_suffix=False)  # -Ccuda-suffix=false (conda)
    assert name == "gpudyn-0.3.1-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(src.parent / name) as z:
        assert "Name: gpudyn" in z.read("gpudyn-0.3.1.dist-info/METADATA").decode().splitlines()
        _check_record(z, "gpudyn-0.3.1.dist-info")


@pytest.mark.parametrize(
    "extra",
    [
        {"gpudyn/_native.cpython-311-x86_64-linux-gnu.so": b"not even ELF"},  # suffix of one Python
        {"gpudyn/_native.so": b"\x7fELF" + b"\0" * 60 + b"PyInit__native\0"},  # defines a module
    ],
)
def test_refuses_a_wheel_with_an_extension_module(backend, tmp_path, extra):
    src = tmp_path / "gpudyn-0.3.1-cp311-cp311-linux_x86_64.whl"
    _meson_python_wheel(src, extra_files=extra)
    with pytest.raises(RuntimeError, match="extension module"):
        backend.finish_wheel(str(src))
    assert os.listdir(tmp_path) == [src.name]  # left as it was


def test_settings_of_its_own_are_not_passed_to_meson_python(backend):
    assert backend._split({"cuda-suffix": "false", "build-dir": "b"}) == ({"build-dir": "b"}, False)
    assert backend._split({"setup-args": ["-Dx=1"]}) == ({"setup-args": ["-Dx=1"]}, True)
    assert backend._split(None) == ({}, True)


# ---- what a user build holds: meson.options' defaults --------------------------------
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def test_user_builds_carry_no_benchmarks():
    """`pip install .`, `pip wheel .` and the conda package build without the benchmarks
    (meson.options' default; pyproject.toml does not turn it on); only tools/install.sh
    (bash benchmarks/run.sh, bash tests/run.sh) builds them, and gpudyn.bench (with the
    papers' models) is installed with them only."""
    import re

    options = _read("meson.options")
    m = re.search(r"option\('benchmarks',\s*type:\s*'boolean',\s*value:\s*(\w+)", options)
    assert m and m.group(1) == "false", "meson.options: benchmarks must default to false"
    setup = re.search(r"^setup\s*=\s*\[(.*)\]", _read("pyproject.toml"), re.M).group(1)
    assert "benchmarks" not in setup, setup
    assert "-Dbenchmarks=true" in _read("tools", "install.sh").replace("$benchmarks", "true")
    py_build = _read("python", "meson.build")
    assert "'bench'" in py_build and "if get_option('benchmarks')" in py_build
    assert os.path.isfile(os.path.join(ROOT, "python", "gpudyn", "bench", "theory.py"))
    # the default architectures: 7.5 ... 9.0 as SASS, PTX 9.0 (docs/guides/packaging.md says so)
    assert re.search(r"option\('gpu_archs',\s*type:\s*'array',\s*value:\s*\['75', '80', '86', '89', '90'\]", options)
    assert re.search(r"option\('gpu_ptx',\s*type:\s*'string',\s*value:\s*'90'", options)
    guide = _read("docs", "guides", "packaging.md")
    assert "7.5, 8.0, 8.6, 8.9, 9.0" in guide and "PTX 9.0" in guide
