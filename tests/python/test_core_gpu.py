"""DeviceBuffer on a GPU: NumPy by copy, CuPy and PyTorch without copies."""

import gpudyn
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_device_info_and_cli():
    import subprocess
    import sys

    info = gpudyn.device_info()
    assert info["name"] and info["multiprocessor_count"] > 0
    assert info["compute_capability"] >= (7, 5)
    r = subprocess.run([sys.executable, "-m", "gpudyn", "info"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert info["name"] in r.stdout


def test_numpy_round_trip_by_copy():
    rng = np.random.default_rng(1)
    for dtype in (np.int8, np.uint16, np.int32, np.float32, np.float64, np.uint64):
        host = rng.integers(0, 100, size=(1000, 3)).astype(dtype)
        buf = gpudyn.DeviceBuffer.from_numpy(host)
        assert buf.shape == (1000, 3) and buf.dtype == dtype
        back = buf.to_numpy()
        assert back is not host
        np.testing.assert_array_equal(back, host)
        buf.close()


def test_cupy_zero_copy_both_ways():
    cp = pytest.importorskip("cupy")
    host = np.arange(4096, dtype=np.int32)
    buf = gpudyn.DeviceBuffer.from_numpy(host)
    a = cp.asarray(buf)  # __cuda_array_interface__
    assert a.data.ptr == buf.ptr
    a += 1  # written through CuPy, seen by the buffer
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(buf.to_numpy(), host + 1)
    d = cp.from_dlpack(buf)
    assert d.data.ptr == buf.ptr
    np.testing.assert_array_equal(cp.asnumpy(d), host + 1)


def test_torch_zero_copy_both_ways():
    torch = pytest.importorskip("torch")
    host = np.linspace(0, 1, 1000, dtype=np.float32)
    buf = gpudyn.DeviceBuffer.from_numpy(host)
    t = torch.from_dlpack(buf)
    assert t.data_ptr() == buf.ptr and t.device.type == "cuda"
    t.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_allclose(buf.to_numpy(), host * 2)
    t2 = torch.as_tensor(buf, device="cuda")  # __cuda_array_interface__
    assert t2.data_ptr() == buf.ptr
    del t, t2
    buf.close()


def test_dlpack_capsule_keeps_buffer_alive():
    torch = pytest.importorskip("torch")
    buf = gpudyn.DeviceBuffer.from_numpy(np.arange(10, dtype=np.int64))
    t = torch.from_dlpack(buf)
    ptr = buf.ptr
    del buf  # the exported tensor still owns a reference
    import gc

    gc.collect()
    assert t.data_ptr() == ptr
    assert t.cpu().tolist() == list(range(10))


def test_empty_and_bad_inputs():
    b = gpudyn.DeviceBuffer(0, np.float32)
    assert b.nbytes == 0 and b.to_numpy().shape == (0,)
    with pytest.raises(TypeError):
        gpudyn.DeviceBuffer(4, dtype=object)
    buf = gpudyn.DeviceBuffer(8, np.int32)
    with pytest.raises(ValueError):
        buf.copy_from_host(np.zeros(7, np.int32))


def test_out_of_memory_is_its_own_exception():
    with pytest.raises(gpudyn.OutOfMemoryError):
        gpudyn.DeviceBuffer(1 << 50)


def test_copy_from_host_refuses_lossy_casts_and_keeps_the_buffer():
    buf = gpudyn.DeviceBuffer.from_numpy(np.full(4, 7, dtype=np.uint8))
    with pytest.raises(ValueError, match="holds 300"):  # was stored as 44
        buf.copy_from_host(np.array([300, 1, 2, 3]))
    np.testing.assert_array_equal(buf.to_numpy(), [7, 7, 7, 7])
    buf.copy_from_host([1, 2, 3, 255])  # int64 values uint8 holds: taken
    np.testing.assert_array_equal(buf.to_numpy(), [1, 2, 3, 255])
    ints = gpudyn.DeviceBuffer.from_numpy(np.array([5, 6], dtype=np.int32))
    with pytest.raises(TypeError, match="dtype float64"):  # was stored as [1, 2]
        ints.copy_from_host(np.array([1.7, 2.2]))
    np.testing.assert_array_equal(ints.to_numpy(), [5, 6])
    buf.close()
    ints.close()
