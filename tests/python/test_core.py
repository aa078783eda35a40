"""Host tests of the Python binding: run with or without a GPU."""

import os
import re
import subprocess
import sys

import gpudyn
import pytest
from gpudyn import _ffi


def test_version_matches_library():
    assert _ffi.lib.gpudyn_get_version() == _ffi.version_number(gpudyn.__version__)
    header = open(os.path.join(gpudyn.get_include(), "gpudyn", "gpudyn.h")).read()
    parts = [re.search(rf"#define GPUDYN_VERSION_{k} (\d+)", header).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert ".".join(parts) == gpudyn.__version__


def test_cdef_is_derived_from_every_header():
    """Each function declared in the installed headers is callable through cffi."""
    inc = gpudyn.get_include()
    declared = set()
    for name in os.listdir(os.path.join(inc, "gpudyn")):
        if name.endswith(".h"):
            text = open(os.path.join(inc, "gpudyn", name)).read()
            declared |= set(re.findall(r"GPUDYN_API\s+[\w\s\*]+?\b(gpudyn_\w+)\s*\(", text))
    assert "gpudyn_get_version" in declared
    for fn in sorted(declared):
        assert hasattr(_ffi.lib, fn), fn
    code = re.sub(r"/\*.*?\*/", "", _ffi.cdef_source(), flags=re.S)  # comments may mention anything
    assert "GPUDYN_API" not in code and "extern" not in code and "#" not in code


def test_paper_instrumentation_is_only_in_the_experimental_surface():
    """Seeds, CRW's requests per thread, TAS/WAS statistics, pre-filled pools and the
    queue baseline promise no stability: the stable headers declare none of them, and
    gpudyn.h does not pull the experimental ones in."""
    inc = os.path.join(gpudyn.get_include(), "gpudyn")
    for name in os.listdir(inc):
        if name.endswith(".h") and name != "experimental.h":
            text = re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", open(os.path.join(inc, name)).read(), flags=re.S))
            found = re.findall(r"\b(seed|per_thread|\w*occupy\w*|gpudyn_exp_\w+|gpudyn_rw_heap_stats_t)\b", text)
            assert not found, (name, found)
            assert not any("experimental" in i for i in re.findall(r'#\s*include\s+"([^"]+)"', text)), name
    exp = open(os.path.join(inc, "experimental.h")).read()
    for fn in ("gpudyn_exp_rw_heap_get_pages", "gpudyn_exp_rw_heap_malloc", "gpudyn_exp_rw_heap_occupy"):
        assert fn in exp and hasattr(_ffi.lib, fn)
    assert os.path.isfile(os.path.join(inc, "experimental", "page_queue.cuh"))
    assert "page_queue" not in open(os.path.join(inc, "rw_heap.cuh")).read()


def test_status_names_and_exception_mapping():
    expected = {
        1: gpudyn.InvalidArgumentError,
        2: gpudyn.OutOfMemoryError,
        3: gpudyn.NoDeviceError,
        4: gpudyn.CudaError,
        5: gpudyn.NotSupportedError,
        6: gpudyn.InternalError,
    }
    for status, cls in expected.items():
        name = _ffi.ffi.string(_ffi.lib.gpudyn_status_string(status)).decode()
        assert name == cls.status_name
        with pytest.raises(cls) as info:
            _ffi.check(status)
        assert info.value.status == status
        assert isinstance(info.value, gpudyn.GpudynError)
    _ffi.check(0)


def test_invalid_argument_message_names_argument():
    with pytest.raises(gpudyn.InvalidArgumentError, match="'count'"):
        _ffi.check(_ffi.lib.gpudyn_get_device_count(_ffi.ffi.NULL))
    with pytest.raises(gpudyn.InvalidArgumentError, match="'bytes' is 0"):
        _ffi.check(_ffi.lib.gpudyn_device_alloc(_ffi.ffi.new("void**"), 0, _ffi.ffi.NULL))
    with pytest.raises(gpudyn.InvalidArgumentError, match="'value' is 300"):
        _ffi.check(_ffi.lib.gpudyn_memset(_ffi.ffi.cast("void*", 16), 300, 4, _ffi.ffi.NULL))


def test_cuda_versions_without_gpu():
    v = gpudyn.cuda_versions()
    assert v["runtime"] >= 12000


def test_get_include_has_device_headers():
    inc = gpudyn.get_include()
    assert os.path.isfile(os.path.join(inc, "gpudyn", "gpudyn.h"))


def test_cdef_source_follows_includes(tmp_path):
    (tmp_path / "gpudyn").mkdir()
    (tmp_path / "gpudyn" / "gpudyn.h").write_text(
        '#ifndef X\n#define X\n#ifdef __cplusplus\nextern "C" {\n#endif\n'
        "GPUDYN_API int a(void);\n#ifdef __cplusplus\n}\n#endif\n#include \"gpudyn/b.h\"\n#endif\n"
    )
    (tmp_path / "gpudyn" / "b.h").write_text("#pragma once\nGPUDYN_API int b(int x);\n")
    src = _ffi.cdef_source(str(tmp_path / "gpudyn" / "gpudyn.h"))
    assert [line.strip() for line in src.splitlines() if line.strip()] == ["int a(void);", "int b(int x);"]


def test_stream_handle_accepts_common_stream_objects():
    class CupyLike:
        ptr = 1234

    class TorchLike:
        cuda_stream = 5678

    f = _ffi.ffi
    assert int(f.cast("uintptr_t", _ffi.stream_handle(None))) == 0
    assert int(f.cast("uintptr_t", _ffi.stream_handle(42))) == 42
    assert int(f.cast("uintptr_t", _ffi.stream_handle(CupyLike()))) == 1234
    assert int(f.cast("uintptr_t", _ffi.stream_handle(TorchLike()))) == 5678
    with pytest.raises(TypeError):
        _ffi.stream_handle("stream")


def _has_device():
    try:
        gpudyn.device_count()
        return True
    except gpudyn.NoDeviceError:
        return False


@pytest.mark.skipif(_has_device(), reason="checks the no-GPU behaviour; a device is present")
def test_info_without_gpu_prints_versions_and_one_clear_error():
    v = gpudyn.cuda_versions()
    rt, drv = v["runtime"], v["driver"]
    assert rt >= 12000
    r = subprocess.run([sys.executable, "-m", "gpudyn", "info"], capture_output=True, text=True)
    assert r.returncode == 1
    out = r.stdout.splitlines()
    drv_text = f"{drv // 1000}.{drv % 1000 // 10}" if drv else "none"
    assert len(out) == 3 and out[0].startswith(f"gpudyn {gpudyn.__version__} ("), r.stdout
    assert out[1] == f"CUDA runtime {rt // 1000}.{rt % 1000 // 10}, driver {drv_text}", r.stdout
    assert out[2].startswith("built for compute capability "), r.stdout  # the GPUs it runs on (gpudyn.info.built_for)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudyn: no CUDA device: "), r.stderr
    # The cause, with the versions: no driver, a driver older than the runtime's
    # CUDA major version, or (a driver new enough) no device.
    if drv == 0:
        want = [f"no NVIDIA driver found (this library needs one supporting CUDA {rt // 1000}.0 or newer)"]
    elif drv < rt // 1000 * 1000:
        want = [
            f"the NVIDIA driver supports CUDA {drv_text} but this library needs CUDA {rt // 1000}.0 or newer",
            "(update the driver)",
        ]
    else:
        want = ["no CUDA device"]
    for text in want:
        assert text in err[0], r.stderr
    for call in (gpudyn.device_count, gpudyn.device_info, lambda: gpudyn.DeviceBuffer(16)):
        with pytest.raises(gpudyn.NoDeviceError) as exc:
            call()
        assert all(text in str(exc.value) for text in want), str(exc.value)


def test_bench_cli_rejects_unknown_benchmark():
    r = subprocess.run([sys.executable, "-m", "gpudyn", "bench", "no-such-bench"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown benchmark" in r.stderr


def test_cli_version():
    r = subprocess.run([sys.executable, "-m", "gpudyn", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == f"gpudyn {gpudyn.__version__}", (r.stdout, r.stderr)


def test_bench_cli_unwritable_out_dir_is_one_clear_line(tmp_path, monkeypatch, capsys):
    # makedirs under a plain file: NotADirectoryError's traceback before.
    from gpudyn import cli, info
    from gpudyn.bench import _common

    monkeypatch.setattr(info, "device_count", lambda: 1)
    monkeypatch.setattr(_common, "describe_device", lambda ordinal=0: {"name": "NVIDIA Test GPU"})
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "sub"
    assert cli.main(["bench", "heap", "--out-dir", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudyn: ") and str(out) in err[0], err


def test_bench_short_names_resolve_to_installed_benchmarks():
    from gpudyn.bench import ALIASES, available, resolve

    for short, full in ALIASES.items():
        assert resolve(short) == full and full in available()


def test_markdown_table_and_targets(tmp_path):
    from gpudyn.bench._common import Context, gpu_slug, markdown_table

    ctx = Context("x", str(tmp_path), True, {"name": "NVIDIA H200"})
    t = ctx.target("ratio", 1.1, 1.2, "x", higher_is_better=False)
    assert t["met"] is True
    assert ctx.target("speedup", 50, 100, "x", higher_is_better=True)["met"] is False
    table = markdown_table(ctx.targets, ["name", "value", "goal"])
    assert "| ratio | 1.1 | 1.2 |" in table
    assert gpu_slug("NVIDIA H200") == "h200"
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100"


def test_owned_handle_is_destroyed_once():
    import gc

    from gpudyn._handle import OwnedHandle

    calls = []

    class Thing(OwnedHandle):
        def __init__(self):
            self._own(_ffi.ffi.new("int*"), lambda h: calls.append(h) or 0)

    with Thing() as t:
        assert t._h() is not None
    assert len(calls) == 1
    with pytest.raises(ValueError, match="Thing is closed"):
        t._h()
    t.close()  # a second close is a no-op
    del t
    gc.collect()
    assert len(calls) == 1  # the finalizer was detached, not run again
    Thing()  # never closed: the garbage collector destroys it
    gc.collect()
    assert len(calls) == 2


def _thing_class():
    from gpudyn._handle import OwnedHandle

    class Thing(OwnedHandle):
        def __init__(self, destroy):
            self._own(_ffi.ffi.new("int*"), destroy)

        def call(self, inside, release):
            self._h()
            inside.set()
            assert release.wait(5)
            return self.nested()

        def nested(self):  # a nested call on the thread making a call never waits for close()
            return self._h() is not None

    return Thing


def test_owned_handle_close_waits_for_calls_in_flight():
    import threading
    import time

    destroyed, results = [], []
    t = _thing_class()(lambda h: destroyed.append(h) or 0)
    inside, release = threading.Event(), threading.Event()
    caller = threading.Thread(target=lambda: results.append(t.call(inside, release)))
    caller.start()
    assert inside.wait(5)
    closer = threading.Thread(target=t.close)
    closer.start()
    time.sleep(0.1)
    assert closer.is_alive() and not destroyed  # the handle is not destroyed under the call
    release.set()
    caller.join(5)
    closer.join(5)
    assert results == [True] and len(destroyed) == 1
    with pytest.raises(ValueError, match="Thing is closed"):
        t.nested()


def test_owned_handle_with_block_keeps_the_users_exception():
    refuse = [True]
    t = _thing_class()(lambda h: _ffi.lib.GPUDYN_ERROR_INVALID_ARGUMENT if refuse else 0)
    with pytest.raises(KeyError, match="the block's own error") as info:
        with t:
            raise KeyError("the block's own error")
    if sys.version_info >= (3, 11):
        assert any("Thing.close() failed too" in note for note in info.value.__notes__)
    assert t._h() is not None  # the refused close left it open and owned
    refuse.clear()
    t.close()
    assert t._handle is None


def test_owned_handle_destroy_refused_in_a_finalizer_is_retried():
    """A backing (Heap, RWHeap) refuses its destroy while a user lives; when the
    collector finalizes it before its user (both in one cycle), the destroy is
    retried after the user's."""
    import gc

    Thing = _thing_class()
    events, users = [], [True]

    def backing_destroy(h):
        events.append("refused" if users else "backing destroyed")
        return _ffi.lib.GPUDYN_ERROR_INVALID_ARGUMENT if users else 0

    def user_destroy(h):
        users.clear()
        events.append("user destroyed")
        return 0

    backing, user = Thing(backing_destroy), Thing(user_destroy)
    backing.user, user.backing = user, backing  # one reference cycle
    del backing.__dict__["_handle"]  # what the collector does when it clears the backing first
    assert events == ["refused"]
    del backing, user
    gc.collect()
    assert events == ["refused", "user destroyed", "backing destroyed"]
