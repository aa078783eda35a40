"""A driver too old for the library's CUDA runtime is reported as such, with both versions,
by the C ABI, the Python package and `gpudyn info`.

Host test, no GPU needed: a stand-in libcuda.so.1 (compiled here, found first through
LD_LIBRARY_PATH in a child process) answers cuDriverGetVersion with the version under
test, so the statically linked CUDA runtime sees that driver.  The runtime looks up the
driver's functions with cuGetProcAddress; the stand-in provides only the three it needs
to reach the version check, which is all a too-old driver lets it do.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import gpudyn
import pytest

FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <string.h>
typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_FOUND = 500 };
CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* version) {
    const char* v = getenv("GPUDYN_FAKE_DRIVER_VERSION");
    *version = v ? atoi(v) : 0;
    return CUDA_SUCCESS;
}
CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version, unsigned long long flags, int* status) {
    (void)version; (void)flags;
    *fn = NULL;
    if (!strcmp(symbol, "cuInit")) *fn = (void*)cuInit;
    else if (!strcmp(symbol, "cuDriverGetVersion")) *fn = (void*)cuDriverGetVersion;
    else if (!strcmp(symbol, "cuGetProcAddress")) *fn = (void*)cuGetProcAddress_v2;
    if (status) *status = *fn ? 0 : 1; /* CU_GET_PROC_ADDRESS_SUCCESS / _SYMBOL_NOT_FOUND */
    return *fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
"""

# In the child: the C ABI's status and message, and the Python API, with the stand-in driver.
PROBE = textwrap.dedent("""
    import json, gpudyn
    from gpudyn import _ffi
    n = _ffi.ffi.new("int32_t*")
    status = _ffi.lib.gpudyn_get_device_count(n)
    c_message = _ffi.ffi.string(_ffi.lib.gpudyn_last_error_message()).decode()
    try:
        gpudyn.device_count()
        py_error = None
    except gpudyn.NoDeviceError as e:
        py_error = str(e)
    print(json.dumps({"versions": gpudyn.cuda_versions(), "status": status, "c_message": c_message,
                      "py_error": py_error, "no_device": _ffi.lib.GPUDYN_ERROR_NO_DEVICE}))
""")


def _cuda(version: int) -> str:
    return f"{version // 1000}.{version % 1000 // 10}"


@pytest.fixture(scope="module")
def fake_driver_dir(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda.so.1")
    d = tmp_path_factory.mktemp("fake_libcuda")
    (d / "fake_libcuda.c").write_text(FAKE_LIBCUDA)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "fake_libcuda.c")], check=True)
    return str(d)


def _run(fake_driver_dir, driver_version, args):
    env = dict(
        os.environ,
        GPUDYN_FAKE_DRIVER_VERSION=str(driver_version),
        LD_LIBRARY_PATH=fake_driver_dir + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""),
    )
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("driver", [12080, 11040])
def test_driver_too_old_is_named_with_both_versions(fake_driver_dir, driver):
    runtime = gpudyn.cuda_versions()["runtime"]  # this process: the real driver or none
    needed = runtime // 1000 * 1000  # minor-version compatibility: a driver of the same major
    assert driver < needed, "the cases must be older than this runtime's CUDA major"
    too_old = f"the NVIDIA driver supports CUDA {_cuda(driver)} but this library needs CUDA {_cuda(needed)} or newer"

    probe = _run(fake_driver_dir, driver, ["-c", PROBE])
    assert probe.returncode == 0, probe.stderr
    got = json.loads(probe.stdout.strip().splitlines()[-1])
    assert got["versions"] == {"runtime": runtime, "driver": driver}  # the stand-in was used
    assert got["status"] == got["no_device"]
    for where in ("c_message", "py_error"):
        assert too_old in got[where] and "update the driver" in got[where], (where, got[where])
        assert "no NVIDIA driver found" not in got[where], (where, got[where])

    info = _run(fake_driver_dir, driver, ["-m", "gpudyn", "info"])
    assert info.returncode == 1
    out = info.stdout.splitlines()
    assert out[0].startswith(f"gpudyn {gpudyn.__version__} ("), info.stdout
    assert out[1] == f"CUDA runtime {_cuda(runtime)}, driver {_cuda(driver)}", info.stdout
    err = info.stderr.strip().splitlines()
    assert len(err) == 1 and too_old in err[0] and "(update the driver)" in err[0], info.stderr


def test_driver_of_the_runtime_major_is_not_called_too_old(fake_driver_dir):
    runtime = gpudyn.cuda_versions()["runtime"]
    driver = runtime // 1000 * 1000  # e.g. 13.0 for a 13.x runtime: new enough
    info = _run(fake_driver_dir, driver, ["-m", "gpudyn", "info"])
    # the stand-in has no devices (nor the functions to list them): no device, but the
    # driver version is not blamed
    assert info.returncode == 1
    assert info.stdout.splitlines()[1] == f"CUDA runtime {_cuda(runtime)}, driver {_cuda(driver)}", info.stdout
    assert "no CUDA device" in info.stderr and "update the driver" not in info.stderr, info.stderr
