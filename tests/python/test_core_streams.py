"""Streams (issue 13, items 1 and 2), on a GPU.

Every test queues ~20 ms of work on a non-blocking side stream first: work on
the legacy default stream does not wait for such a stream, so reading too
early, or freeing a temporary before the kernel that reads it has run, shows
up as wrong values.  Side streams come from the driver API (libcuda, always
present with a GPU) so the tests need neither CuPy nor PyTorch; the CuPy and
PyTorch variants run where those are installed."""

import ctypes
import gc

import gpudyn
import numpy as np
import pytest
from gpudyn import _ffi

pytestmark = pytest.mark.gpu

N = 1 << 16
BUSY_BYTES = 1 << 30
BUSY_ROUNDS = 64  # 64 GiB of memset: ~20 ms on an H200, far longer than queueing the call under test


class CudaStream:
    """A stream spelled the cuda.core way (``__cuda_stream__``)."""

    def __init__(self, handle):
        self.handle_value = handle

    def __cuda_stream__(self):
        return (0, self.handle_value)


@pytest.fixture
def side_streams():
    """Factory of non-blocking driver streams (CU_STREAM_NON_BLOCKING = 1), destroyed at the end."""
    gpudyn.DeviceBuffer(16).close()  # the runtime makes the primary context current on this thread
    cu = ctypes.CDLL("libcuda.so.1")
    made = []

    def make():
        s = ctypes.c_void_p()
        assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0
        made.append(s)
        return s.value

    yield make
    for s in made:
        cu.cuStreamSynchronize(s)
        cu.cuStreamDestroy_v2(s)


def _keep_busy(stream):
    """Queues BUSY_ROUNDS large memsets on `stream`; returns the buffer (keep it alive)."""
    big = gpudyn.DeviceBuffer(BUSY_BYTES, np.uint8, stream=stream)
    for _ in range(BUSY_ROUNDS):
        big.fill_bytes(0)
    return big


def _copy_on(stream, dst, src):
    _ffi.check(
        _ffi.lib.gpudyn_memcpy(
            dst._ptr, src._ptr, src.nbytes, _ffi.lib.GPUDYN_MEMCPY_DEVICE_TO_DEVICE, _ffi.stream_handle(stream)
        )
    )


def _sync_all():
    _ffi.check(_ffi.lib.gpudyn_stream_synchronize(_ffi.ffi.NULL))


class Produced:
    """A device array whose writes were queued on `stream`, said so in CAI v3 (what CuPy and
    Numba export); wraps `buf`, whose own interface names another stream."""

    def __init__(self, buf, stream):
        self.buf, self.stream = buf, stream

    @property
    def __cuda_array_interface__(self):
        return {**self.buf.__cuda_array_interface__, "stream": self.stream}


# ---- item 1: device inputs are read after their producer's stream ------------------
def _staged(dtype, values, side):
    """(src, finish): src (legacy stream) holds zeros now; finish() queues, behind ~20 ms of
    work on `side`, the copy of `values` into src."""
    src = gpudyn.DeviceBuffer(len(values), dtype)
    src.fill_bytes(0)
    vals = gpudyn.DeviceBuffer.from_numpy(np.asarray(values, dtype=dtype))
    _sync_all()

    def finish():
        busy = _keep_busy(side)
        _copy_on(side, src, vals)
        return busy, vals

    return src, finish


@pytest.mark.parametrize("consumer", ["static_array", "ggarray", "page_heap_free_pages", "warp_heap_alloc"])
@pytest.mark.parametrize("spelling", ["cai_stream", "device_buffer_stream"])
def test_device_input_waits_for_its_producer_stream(side_streams, consumer, spelling):
    side = side_streams()
    # Structures are made (and set up) before the side stream gets busy: nothing below may
    # wait for the side stream except the fix itself.
    if consumer == "static_array":
        s = gpudyn.StaticArray(N, np.int32)
        values = np.arange(N, dtype=np.int32) * 3 + 1
    elif consumer == "ggarray":
        s = gpudyn.GGArray(np.int32, num_lfvectors=64)
        s.reserve(N)
        values = np.arange(N, dtype=np.int32) * 3 + 1
    elif consumer == "page_heap_free_pages":
        s = gpudyn.RWHeap(page_count=N)
        values = s.get_pages(N).to_numpy()  # every page taken; the input frees them all
        assert s.free_page_count == 0
    else:
        s = gpudyn.WarpHeap()
        values = np.full(N // 16, 64, dtype=np.uint64)
    dtype = values.dtype
    if spelling == "cai_stream":
        src, finish = _staged(dtype, values, side)
        arg = Produced(src, side)
    else:
        # A DeviceBuffer written on its own stream: its __cuda_array_interface__ names it.
        src = gpudyn.DeviceBuffer(len(values), dtype, stream=side)
        src.fill_bytes(0)
        vals = gpudyn.DeviceBuffer.from_numpy(values)
        _ffi.check(_ffi.lib.gpudyn_stream_synchronize(_ffi.stream_handle(side)))
        _sync_all()
        arg = src

        def finish():
            busy = _keep_busy(side)
            _copy_on(side, src, vals)
            return busy, vals

    keep = finish()
    with s:
        if consumer in ("static_array", "ggarray"):
            s.extend(arg)
            got = s.to_numpy()
            assert np.array_equal(np.sort(got), np.sort(values)), "extend read its input before the producer wrote it"
        elif consumer == "page_heap_free_pages":
            s.free_pages(arg)
            assert s.free_page_count == N, "free_pages read its input before the producer wrote it"
            assert s.stats()["bad_frees"] == 0
        else:
            ptrs = s.malloc(arg).to_numpy()
            assert (ptrs != 0).all(), "alloc read zero sizes: its input was read before the producer wrote it"
            assert s.stats()["bytes_requested"] == int(values.sum())
            s.clear()
    del keep


def test_structure_stream_as_cuda_stream_object_and_exports_name_it(side_streams):
    side, producer = side_streams(), side_streams()
    proto = CudaStream(side)
    with gpudyn.StaticArray(N, np.int32, stream=proto) as a:
        assert a.__cuda_array_interface__["stream"] == side  # our stream, for consumers to wait on
        src = gpudyn.DeviceBuffer(N, np.int32, stream=producer)
        src.fill_bytes(0)
        _ffi.check(_ffi.lib.gpudyn_stream_synchronize(_ffi.stream_handle(producer)))
        busy = _keep_busy(producer)
        src.fill_bytes(7)  # on `producer`, behind the busy work
        a.extend(src)  # on `side`, which must wait for `producer`
        assert (a.to_numpy() == 0x07070707).all()
        flat = a.flatten()
        assert flat.__cuda_array_interface__["stream"] == side
        assert a.as_buffer().__cuda_array_interface__["stream"] == side
        del busy
    with gpudyn.StaticArray(4, np.int32) as a:
        assert a.__cuda_array_interface__["stream"] == 1  # the legacy default stream, CAI's spelling


def test_dlpack_export_orders_the_consumer_stream(side_streams):
    side, consumer = side_streams(), side_streams()
    buf = gpudyn.DeviceBuffer(N, np.int32, stream=side)
    buf.fill_bytes(0)
    _ffi.check(_ffi.lib.gpudyn_stream_synchronize(_ffi.stream_handle(side)))
    busy = _keep_busy(side)
    buf.fill_bytes(9)  # on `side`, behind the busy work
    buf.__dlpack__(stream=consumer)  # the consumer's stream now waits for ours
    out = gpudyn.DeviceBuffer(N, np.int32, stream=consumer)
    _copy_on(consumer, out, buf)
    assert (out.to_numpy() == 0x09090909).all()
    del busy


def test_torch_tensor_filled_on_its_own_stream():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    with gpudyn.StaticArray(N, np.int32) as a:
        t = torch.zeros(N, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(100_000_000)  # ~50 ms of GPU cycles on s
            t.fill_(7)
            a.extend(t)  # PyTorch's convention: t's writes are on the current stream, s
        assert (a.to_numpy() == 7).all(), "the tensor was read before its stream wrote it"


def test_cupy_array_filled_on_its_own_stream():
    cp = pytest.importorskip("cupy")
    spin = cp.RawKernel(
        r'''
    extern "C" __global__ void spin(long long cycles) {
        long long t0 = clock64();
        while (clock64() - t0 < cycles) {}
    }''',
        "spin",
    )
    with gpudyn.StaticArray(N, np.int32) as a:
        x = cp.zeros(N, dtype=cp.int32)
        cp.cuda.Device().synchronize()
        with cp.cuda.Stream(non_blocking=True):
            spin((1,), (1,), (np.int64(100_000_000),))
            x.fill(7)
            a.extend(x)  # CuPy names its current stream in CAI v3
        assert (a.to_numpy() == 7).all(), "the array was read before its stream wrote it"


# ---- item 2: NumPy temporaries live until the kernel that reads them has run ---------
def _reuse_freed_memory(nbytes, byte):
    """Allocations on the legacy default stream, filled at once: memory freed there too
    early is handed out again here and overwritten before a queued kernel reads it."""
    junk = [gpudyn.DeviceBuffer(nbytes, np.uint8) for _ in range(4)]
    for j in junk:
        j.fill_bytes(byte)
    return junk


def _still_running(stream) -> bool:
    """True while work queued on `stream` has not finished (cuStreamQuery: CUDA_ERROR_NOT_READY)."""
    return ctypes.CDLL("libcuda.so.1").cuStreamQuery(ctypes.c_void_p(stream)) == 600


def test_numpy_inputs_on_a_raw_handle_do_not_wait_for_other_streams(side_streams):
    """A call copies NumPy input to a temporary on the structure's stream (waiting for
    that stream) and frees it there, stream-ordered, when it returns; it never waits
    for the whole device (what a temporary left to the garbage collector would do on
    a raw handle), so ~20 ms of work queued on another stream is still running.  The
    result buffer of a call that fails is closed the same way.  Every call runs once
    before the checked round, so only the inputs are under test here (first calls:
    test_first_calls_do_not_wait_for_other_streams)."""
    side, other = side_streams(), side_streams()
    with (
        gpudyn.Heap(initial_bytes=64 << 20, stream=side) as heap,
        gpudyn.RWHeap(page_count=4096, stream=side) as pages,
        gpudyn.WarpHeap(stream=side) as warp,
        gpudyn.StaticArray(4096, np.int32, stream=side) as arr,
    ):
        heap_ptrs = [heap.malloc(np.full(100, 100, dtype=np.uint64)).to_numpy() for _ in range(2)]
        page_ids = [pages.get_pages(64).to_numpy() for _ in range(2)]
        page_ptrs = [pages.malloc(np.full(64, 256, dtype=np.uint64)).to_numpy() for _ in range(2)]
        x = np.arange(1000, dtype=np.int32)

        def failed_malloc():  # the result buffer of a failed call is closed, not collected
            with pytest.raises(gpudyn.OutOfMemoryError):
                heap.malloc([1 << 30])

        kept = []
        for checked in (False, True):
            r = int(checked)
            calls = {
                "Heap.malloc (out of memory)": failed_malloc,
                "Heap.free": lambda: heap.free(heap_ptrs[r]),
                "Heap.malloc": lambda: heap.malloc([16] * 8),
                "RWHeap.free_pages": lambda: pages.free_pages(page_ids[r]),
                "RWHeap.free": lambda: pages.free(page_ptrs[r]),
                "WarpHeap.malloc": lambda: warp.malloc([48] * 64),
                "StaticArray.extend": lambda: arr.extend(x, mask=x % 2 == 0),
            }
            for name, call in calls.items():
                busy = _keep_busy(other) if checked else None
                kept.append(call())  # a result buffer on a raw handle, dropped, would wait for the device
                if checked:
                    assert _still_running(other), f"{name} with NumPy input waited for the whole device"
                    busy.close()  # stream-ordered on `other`
        _sync_all()
        st = heap.stats()
        assert (st["allocations"], st["failed_allocations"], st["bad_frees"]) == (16, 2, 0)
        assert pages.free_page_count == pages.page_count and pages.stats()["bad_frees"] == 0
        assert np.array_equal(np.sort(arr.to_numpy()), np.sort(np.concatenate([x[x % 2 == 0]] * 2)))
        warp.clear()
        for out in kept:
            if out is not None:
                out.close()


def test_numpy_page_ids_survive_a_busy_stream(side_streams):
    side = side_streams()
    with gpudyn.RWHeap(page_count=4096, stream=side) as heap:
        pages = heap.get_pages(4096).to_numpy()
        assert heap.free_page_count == 0
        busy = _keep_busy(side)
        heap.free_pages(pages)
        junk = _reuse_freed_memory(pages.nbytes, 0xFF)  # 0xFFFFFFFF = INVALID_PAGE, skipped
        assert heap.free_page_count == 4096
        assert heap.stats()["bad_frees"] == 0
        del busy, junk


def test_numpy_pointers_survive_a_busy_stream(side_streams):
    side = side_streams()
    with gpudyn.RWHeap(page_count=4096, stream=side) as heap:
        ptrs = heap.malloc(np.full(1000, 256, dtype=np.uint64)).to_numpy()
        used = heap.page_count - heap.free_page_count
        assert used >= 1000
        busy = _keep_busy(side)
        heap.free(ptrs)
        junk = _reuse_freed_memory(ptrs.nbytes, 0)  # 0 entries are skipped
        assert heap.free_page_count == heap.page_count
        del busy, junk


def test_numpy_pointers_to_the_device_heap_survive_a_busy_stream(side_streams):
    side = side_streams()
    with gpudyn.Heap(initial_bytes=64 << 20, stream=side) as heap:
        ptrs = heap.malloc(np.full(1000, 100, dtype=np.uint64)).to_numpy()
        assert heap.stats()["allocations"] == 1000
        busy = _keep_busy(side)
        heap.free(ptrs)
        junk = _reuse_freed_memory(ptrs.nbytes, 0)  # 0 entries are skipped
        st = heap.stats()
        assert st["allocations"] == 0 and st["bad_frees"] == 0
        del busy, junk


def test_call_inputs_close_their_temporaries_and_only_those(side_streams):
    from gpudyn.buffer import current_device, device_inputs

    side = side_streams()
    user = gpudyn.DeviceBuffer.from_numpy(np.arange(4, dtype=np.uint32), stream=side)
    with pytest.raises(RuntimeError, match="the call failed"):
        with device_inputs(side, current_device()) as inputs:
            ptr, n, dt = inputs.array(np.arange(8, dtype=np.uint32))
            assert (n, dt) == (8, np.dtype(np.uint32)) and ptr != 0
            temps = list(inputs._temps)
            assert inputs.array(user) == (user.ptr, 4, np.dtype(np.uint32))
            assert inputs.integers([3, 4], np.uint64, "test", "sizes")[1:] == (2, np.dtype(np.uint64))
            temps += inputs._temps[1:]
            failed_out = inputs.output(4, np.uint64)
            raise RuntimeError("the call failed")
    assert len(temps) == 2 and all(t._closed for t in temps), "a temporary outlived its call"
    assert failed_out._closed, "the result of a failed call was left to the garbage collector"
    assert not user._closed and list(user.to_numpy()) == [0, 1, 2, 3], "the caller's buffer was closed"
    with device_inputs(side, current_device()) as inputs:
        inputs.array(np.arange(8, dtype=np.uint32))
        temp = inputs._temps[0]
        out = inputs.output(3, np.uint32)
        out.copy_from_host(np.array([7, 8, 9], dtype=np.uint32))
    assert temp._closed and not out._closed and list(out.to_numpy()) == [7, 8, 9]
    out.close()


def test_numpy_sizes_survive_a_busy_stream(side_streams):
    side = side_streams()
    sizes = np.full(4096, 48, dtype=np.uint64)
    with gpudyn.WarpHeap(stream=side) as heap:
        busy = _keep_busy(side)
        ptrs = heap.malloc(sizes)
        junk = _reuse_freed_memory(sizes.nbytes, 0)  # size 0 gives a null pointer
        ptrs = ptrs.to_numpy()
        assert (ptrs != 0).all()
        assert heap.stats()["bytes_requested"] == int(sizes.sum())
        heap.clear()
        del busy, junk


def test_numpy_values_and_mask_survive_a_busy_stream(side_streams):
    side = side_streams()
    x = np.arange(N, dtype=np.int32) + 1
    mask = x % 3 == 0
    with gpudyn.StaticArray(N, np.int32, stream=side) as a:
        busy = _keep_busy(side)
        a.extend(x, mask=mask)
        junk = _reuse_freed_memory(x.nbytes, 0)
        assert np.array_equal(np.sort(a.to_numpy()), x[mask])
        del busy, junk
    gc.collect()


# ---- a raw stream handle destroyed before the buffers made on it -----------------
# CuPy's Stream.ptr (or a driver handle) names a stream that may be destroyed while
# buffers made on it live on: their garbage collection must not touch the dead handle
# (it crashed the process in cudaFreeAsync).  A child interpreter: a crash is its exit code.
_DEAD_STREAM = """
import ctypes, gc
import numpy as np
import gpudyn
gpudyn.DeviceBuffer(16).close()  # the primary context current for the driver calls
cu = ctypes.CDLL("libcuda.so.1")
class Closable:  # a stream object with __cuda_stream__ that its user can close
    def __init__(self, h):
        self.h = h
    def __cuda_stream__(self):
        if self.h is None:
            raise RuntimeError("this stream is closed")
        return (0, self.h)
    def close(self):
        assert cu.cuStreamDestroy_v2(ctypes.c_void_p(self.h)) == 0
        self.h = None
heap = gpudyn.Heap(initial_bytes=16 << 20)
for i in range(40):
    s = ctypes.c_void_p()
    assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0
    h = s.value
    buf = gpudyn.DeviceBuffer(1 << 20, np.uint8, stream=h)
    buf.fill_bytes(i + 1)
    sized = gpudyn.Heap(initial_bytes=4 << 20, stream=h)
    ptrs = sized.malloc(np.full(64, 48, dtype=np.uint64))  # a buffer on the raw handle too
    fresh = gpudyn.DeviceBuffer(1 << 20, np.uint8, stream=h)  # never written: freed while the stream is busy
    first = buf.to_numpy()[:4].tolist()
    sized.close()
    big = [gpudyn.DeviceBuffer(64 << 20, np.uint8, stream=h) for _ in range(2)]
    for b in big:
        b.fill_bytes(0)  # work still queued when the stream goes
    assert cu.cuStreamDestroy_v2(h) == 0
    cycle = [buf, ptrs, fresh, big]
    cycle.append(cycle)  # freed by the collector, as a traceback's frames are
    del buf, ptrs, fresh, big, cycle
    gc.collect()
    # A stream object closed by its user (cuda.core's Stream.close): asked again, it no
    # longer gives the handle; the buffer's collection and close() must not use it.
    s = ctypes.c_void_p()
    assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0
    obj = Closable(s.value)
    kept = gpudyn.DeviceBuffer(1 << 20, np.uint8, stream=obj)
    dropped = gpudyn.DeviceBuffer(1 << 20, np.uint8, stream=obj)
    kept.fill_bytes(3)
    obj.close()
    kept.close()
    del dropped
    gc.collect()
    assert first == [i + 1] * 4, first
    heap.free(heap.malloc(np.full(256, 4096, dtype=np.uint64)))  # the device still works
print("OK", heap.stats()["allocations"], heap.stats()["bad_frees"])
"""


def test_buffers_on_a_destroyed_stream_are_freed_safely():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _DEAD_STREAM], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and "OK 0 0" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])


# ---- first calls: the kernels were loaded when the structure was created -------------
# Under CUDA's lazy loading a kernel is loaded at its first launch, and loading waits for
# every stream's work; structures load theirs at creation.  A child interpreter: in this
# one earlier tests have loaded every kernel already.
_FIRST_CALLS = """
import ctypes
import numpy as np
import gpudyn
cu = ctypes.CDLL("libcuda.so.1")
gpudyn.DeviceBuffer(16).close()
def stream():
    s = ctypes.c_void_p()
    assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0
    return s.value
side, other = stream(), stream()
heap = gpudyn.Heap(initial_bytes=64 << 20, stream=side)
pages = gpudyn.RWHeap(page_count=4096, stream=side)
warp = gpudyn.WarpHeap(stream=side)
grow = gpudyn.GGArray(np.int32, stream=side)
fixed = gpudyn.StaticArray(4096, np.int32, stream=side)
x = np.arange(1000, dtype=np.int32)
def oom():
    try:
        heap.malloc([1 << 30])
    except gpudyn.OutOfMemoryError:
        return None
    raise AssertionError("no OutOfMemoryError")
calls = [("Heap.malloc", lambda: heap.malloc([16] * 8)), ("Heap.malloc (out of memory)", oom),
         ("Heap.stats", heap.stats), ("RWHeap.get_pages", lambda: pages.get_pages(64)),
         ("RWHeap.malloc", lambda: pages.malloc([256] * 8)), ("WarpHeap.malloc", lambda: warp.malloc([48] * 64)),
         ("StaticArray.extend", lambda: fixed.extend(x, mask=x % 2 == 0)),
         ("GGArray.extend", lambda: grow.extend(x, mask=x % 2 == 0)), ("GGArray.len", lambda: len(grow))]
busy = gpudyn.DeviceBuffer(1 << 30, np.uint8, stream=other)
kept, waited = [], []
for name, call in calls:
    for _ in range(64):  # ~20 ms of memset on `other`
        busy.fill_bytes(0)
    kept.append(call())
    if cu.cuStreamQuery(ctypes.c_void_p(other)) != 600:
        waited.append(name)
    cu.cuStreamSynchronize(ctypes.c_void_p(other))
cu.cuCtxSynchronize()
assert len(grow) == 500 and len(fixed) == 500
print("WAITED", waited)
"""


def test_first_calls_do_not_wait_for_other_streams():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    assert "WAITED []" in r.stdout, r.stdout[-2000:]


# ---- structures belong to their device (issue 13, item 3): two GPUs ----------------
# Each test runs in a child interpreter: a pointer of the wrong device handed to a kernel
# is cudaErrorIllegalAddress, which kills the CUDA context for the rest of the process.
_TWO_GPUS = """
import ctypes, sys
import numpy as np
import gpudyn
from gpudyn.buffer import current_device, on_device
cu = ctypes.CDLL("libcuda.so.1")
def device_of(ptr):  # the driver's answer, not gpudyn's (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9)
    v = ctypes.c_int(-1)
    assert cu.cuPointerGetAttribute(ctypes.byref(v), 9, ctypes.c_uint64(ptr)) == 0
    return v.value
assert current_device() == 0
"""


def _on_two_gpus(body: str) -> str:
    import subprocess
    import sys
    import textwrap

    if gpudyn.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    r = subprocess.run(
        [sys.executable, "-c", _TWO_GPUS + textwrap.dedent(body)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-3000:])
    return r.stdout


def test_device_attribute_is_the_stream_device():
    # .device was the current device, while the memory (and the heap) follow the stream's.
    out = _on_two_gpus("""
        with on_device(1):
            gpudyn.DeviceBuffer(16).close()  # device 1's primary context current for the driver call
            s = ctypes.c_void_p()
            assert cu.cuStreamCreate(ctypes.byref(s), 1) == 0
        buf = gpudyn.DeviceBuffer(1024, stream=s.value)
        heap = gpudyn.Heap(initial_bytes=16 << 20, stream=s.value)
        g = gpudyn.GGArray(np.int32, num_lfvectors=8, stream=s.value)
        print("DEV", buf.device, device_of(buf.ptr), buf.__dlpack_device__()[1], heap.device, g.device,
              current_device())
    """)
    assert "DEV 1 1 1 1 1 0" in out, out


def test_structures_work_with_another_device_current():
    # Outputs and NumPy temporaries were allocated on the current device: a device-0 heap's
    # kernel wrote into device-1 memory (cudaErrorIllegalAddress).
    out = _on_two_gpus("""
        heap = gpudyn.Heap(initial_bytes=16 << 20)
        page = gpudyn.RWHeap(page_count=1024)
        warp = gpudyn.WarpHeap(arena_bytes=16 << 20)
        g = gpudyn.GGArray(np.int32, num_lfvectors=8)
        with on_device(1):
            outs = [heap.malloc([64] * 8), page.get_pages(8), warp.malloc([32] * 8)]
            g.extend(np.arange(1000, dtype=np.int32))
            g.append(5)
            outs.append(g.flatten())
            print("DEV", *[device_of(b.ptr) for b in outs], *[b.device for b in outs], current_device())
        ptrs = outs[0].to_numpy()  # read with device 0 current
        with on_device(1):
            heap.free(ptrs)  # a NumPy temporary again
        want = sorted(list(range(1000)) + [5])
        print("OK", int((ptrs != 0).all()), int(sorted(g.to_numpy().tolist()) == want),
              int(sorted(outs[3].to_numpy().tolist()) == want), heap.stats()["allocations"])
    """)
    assert "DEV 0 0 0 0 0 0 0 0 1" in out and "OK 1 1 1 0" in out, out


def test_device_array_of_another_device_is_refused():
    # A device-1 array passed to a device-0 structure reached its kernel (cudaErrorIllegalAddress).
    out = _on_two_gpus("""
        with on_device(1):
            vals = gpudyn.DeviceBuffer.from_numpy(np.arange(1000, dtype=np.int32))
            sizes = gpudyn.DeviceBuffer.from_numpy(np.full(4, 64, dtype=np.uint64))
        g = gpudyn.GGArray(np.int32, num_lfvectors=8)
        heap = gpudyn.Heap(initial_bytes=16 << 20)
        for name, call in (("values", lambda: g.extend(vals)), ("sizes", lambda: heap.malloc(sizes))):
            try:
                call()
                print("ACCEPTED", name)
            except gpudyn.InvalidArgumentError as e:
                print("REFUSED", name, int(f"'{name}' is memory of device 1" in str(e) and "device 0" in str(e)))
        print("LEFT", len(g), heap.stats()["allocations"])
        with on_device(1):
            vals.close()
            sizes.close()
    """)
    assert "REFUSED values 1" in out and "REFUSED sizes 1" in out and "LEFT 0 0" in out, out
