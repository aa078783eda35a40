"""Reading the arrays in place (issue 40, item 2).

Kernels read a GGArray of many buckets (first bucket 32, LFVectors filled
unevenly), a StaticArray and a VmmArray with gpudyn.numba's at / span /
ranged_size / size, and with the C++ ref from a CuPy RawModule: every element
present exactly once, in the order to_numpy() gives.  An iterative produce /
consume / clear / swap loop needs no host wait: a slow kernel queued first is
still running when every host call of the loop has returned, and the result
matches a host reference.  flatten(out=...) and size_async() are
stream-ordered; a too-small `out` is written nowhere and the status says so.
Host parts (no GPU): the new status bit's error, the argument checks made
before any device work, the C++ kernels compiled with NVRTC."""

import os
import time

import gpudyn
import numpy as np
import pytest
from gpudyn import _ffi
from gpudyn.ggarray import STATUS_ALLOCATION_FAILED, STATUS_DESTINATION_TOO_SMALL, status_error

try:
    import gpudyn.numba as gdn
    from numba import cuda

    HAVE_NUMBA = True
except ImportError:  # numba-cuda is an extra
    HAVE_NUMBA = False

needs_numba = pytest.mark.skipif(
    not HAVE_NUMBA, reason="numba-cuda is not installed (pip install 'gpudyn-cu13[numba]')"
)
# Under compute-sanitizer kernels run 10-100x slower: fewer elements there, and
# the slow kernel of the no-wait tests sleeps longer (the tools slow the host's
# API calls too).
SANITIZER = os.environ.get("GPUDYN_SANITIZER")
SPIN_SECONDS = 3.0 if SANITIZER else 0.3


# ---- host references ----------------------------------------------------------------------
def uneven_reference(n, block, salt):
    """What produce_uneven pushes: thread t of block b, (t % block + b) % 4 values salt + 4 t + j."""
    t = np.arange(n, dtype=np.int64)
    k = (t % block + t // block) % 4
    return np.sort(np.concatenate([salt + 4 * t[k > j] + j for j in range(3)]))


def loop_reference(iters, m):
    """The produce / consume loop on the host: each round pushes round * 10^7 + 4 t + j
    (j < t % 3) into A, keeps x + 1 of every x of A with x % 5 != 0 in B, clears A, swaps."""
    a = np.zeros(0, np.int64)
    t = np.arange(m, dtype=np.int64)
    for k in range(iters):
        produced = np.concatenate([k * 10**7 + 4 * t[t % 3 > j] + j for j in range(2)])
        a = np.concatenate([a, produced])
        a = a[a % 5 != 0] + 1
    return np.sort(a)


class _Prefix:
    """The first `n` elements of a device buffer, as a CUDA array (a view: no copy)."""

    def __init__(self, buf, n):
        cai = dict(buf.__cuda_array_interface__)
        cai["shape"] = (n,)
        self.__cuda_array_interface__ = cai


def _make(kind, dtype, capacity, **gg):
    if kind == "GGArray":
        return gpudyn.GGArray(dtype, num_lfvectors=gg.get("num_lfvectors", 8), first_bucket=32, stream=gg.get("stream"))
    if kind == "StaticArray":
        return gpudyn.StaticArray(capacity, dtype, stream=gg.get("stream"))
    return gpudyn.VmmArray(dtype, initial_capacity=capacity, max_capacity=capacity, stream=gg.get("stream"))


# ---- host: no GPU needed --------------------------------------------------------------------
def test_destination_too_small_is_an_argument_error_naming_out():
    assert STATUS_DESTINATION_TOO_SMALL == _ffi.lib.GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL == 8
    assert gpudyn.GGArray.STATUS_DESTINATION_TOO_SMALL == gpudyn.StaticArray.STATUS_DESTINATION_TOO_SMALL == 8
    e = status_error("GGArray", STATUS_DESTINATION_TOO_SMALL)
    assert isinstance(e, gpudyn.InvalidArgumentError) and not isinstance(e, MemoryError)
    assert "flatten(out=...)" in str(e) and "'out'" in str(e) and "push from a kernel" not in str(e)
    e = status_error("GGArray", STATUS_DESTINATION_TOO_SMALL | STATUS_ALLOCATION_FAILED)
    assert isinstance(e, gpudyn.InvalidArgumentError)  # both causes named
    assert "push from a kernel failed" in str(e) and "allocated" in str(e) and "flatten(out=...)" in str(e)


def test_flatten_arguments_are_refused_before_any_device_work():
    a = gpudyn.GGArray.__new__(gpudyn.GGArray)  # never created: the checks must not reach the library
    with pytest.raises(gpudyn.InvalidArgumentError, match="'size' needs 'out'"):
        a.flatten(size=object())
    with pytest.raises(TypeError, match="'out' is a NumPy array"):
        a.flatten(out=np.zeros(4, np.int32))
    with pytest.raises(TypeError, match="'size' is a NumPy array"):
        a.flatten(out=object(), size=np.zeros(1, np.uint64))


CUPY_READ = r"""
#include <gpudyn/ggarray.cuh>
// Thread t of block b pushes its index when (t + b) % 3 != 0: blocks fill their LFVectors unevenly.
extern "C" __global__ void produce(gpudyn_ggarray_view_t v, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && (threadIdx.x + blockIdx.x) % 3 != 0) gpudyn::ggarray_ref<long long>{v}.push_back((long long)i);
}
// out[i] = element i, grid-stride up to the ranged size; *count = that size.
extern "C" __global__ void read_at(gpudyn_ggarray_view_t v, long long* out, unsigned long long* count) {
    const gpudyn::ggarray_ref<long long> a{v};
    const unsigned long long n = a.ranged_size();
    if (blockIdx.x == 0 && threadIdx.x == 0) *count = n;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        out[i] = a.at(i);
}
// Block b copies the parts b, b + gridDim.x, ... of `part` indices span by span (a.span);
// hits[i] counts the copies of element i.
extern "C" __global__ void read_spans(gpudyn_ggarray_view_t v, long long* out, unsigned* hits,
                                      unsigned long long part) {
    const gpudyn::ggarray_ref<long long> a{v};
    const unsigned long long n = a.ranged_size();
    for (unsigned long long lo = blockIdx.x * part; lo < n; lo += (unsigned long long)gridDim.x * part) {
        const unsigned long long hi = lo + part < n ? lo + part : n;
        unsigned long long m = 0;
        for (unsigned long long i = lo; i < hi; i += m) {
            const long long* p = a.span(i, hi, &m);
            if (m == 0) break;
            for (unsigned long long j = threadIdx.x; j < m; j += blockDim.x) {
                out[i + j] = p[j];
                atomicAdd(hits + i + j, 1u);
            }
        }
    }
}
"""


def test_cupy_read_kernels_compile_with_nvrtc():
    import importlib.util
    import pathlib

    check_py = pathlib.Path(__file__).resolve().parents[2] / ".ci" / "nvrtc_check.py"
    spec = importlib.util.spec_from_file_location("nvrtc_check", check_py)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    try:
        nvrtc = check.Nvrtc(check.find_nvrtc())
    except (SystemExit, OSError) as e:
        pytest.skip(f"NVRTC is not available here ({e}); pip install nvidia-cuda-nvrtc")
    ok, log, _ = nvrtc.compile(CUPY_READ, "ggarray_read.cu", gpudyn.nvrtc_options(arch="90"))
    assert ok, log


# ---- Numba kernels ------------------------------------------------------------------------------
if HAVE_NUMBA:

    @cuda.jit
    def produce_uneven(a, n, salt):
        t = cuda.grid(1)
        if t >= n:
            return
        for j in range((cuda.threadIdx.x + cuda.blockIdx.x) % 4):
            gdn.push_back(a, salt + 4 * t + j)

    @cuda.jit
    def read_at(a, out, sizes):
        """out[i] = element i up to the ranged size; sizes = ranged_size, size, at(n), at(-1)."""
        n = gdn.ranged_size(a)
        if cuda.grid(1) == 0:
            sizes[0] = n
            sizes[1] = gdn.size(a)
            sizes[2] = gdn.at(a, n)  # past the elements: 0
            sizes[3] = gdn.at(a, -1)
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = gdn.at(a, i)

    @cuda.jit
    def read_spans(a, n, part, out, hits):
        """Block b copies the parts b, b + grid, ... of `part` indices of [0, n) span by span."""
        lo = cuda.blockIdx.x * part
        while lo < n:
            hi = min(lo + part, n)
            i = lo
            while i < hi:
                s = gdn.span(a, i, hi)
                if s.size == 0:
                    break
                for j in range(cuda.threadIdx.x, s.size, cuda.blockDim.x):
                    out[i + j] = s[j]
                    cuda.atomic.add(hits, i + j, 1)
                i += s.size
            lo += cuda.gridDim.x * part

    @cuda.jit
    def copy_at(a, n, out):
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            out[i] = gdn.at(a, i)

    @cuda.jit
    def copy_spans(a, n, out):
        """One thread per block walks [0, n) span by span (block 0 only: the order of the spans)."""
        if cuda.grid(1) != 0:
            return
        i = 0
        while i < n:
            s = gdn.span(a, i, n)
            if s.size == 0:
                break
            for j in range(s.size):
                out[i + j] = s[j]
            i += s.size

    @cuda.jit
    def produce_round(a, m, k):
        t = cuda.grid(1)
        if t < m:
            for j in range(t % 3):
                gdn.push_back(a, k * 10**7 + 4 * t + j)

    @cuda.jit
    def consume_round(src, dst, mismatch):
        """Every element x of src (grid-stride, at) with x % 5 != 0 becomes x + 1 in dst."""
        n = gdn.ranged_size(src)
        if cuda.grid(1) == 0 and gdn.size(src) != n:
            cuda.atomic.add(mismatch, 0, 1)
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            x = gdn.at(src, i)
            if x % 5 != 0:
                gdn.push_back(dst, x + 1)

    @cuda.jit
    def spin(rounds):
        if cuda.grid(1) == 0:
            for _ in range(rounds):
                cuda.nanosleep(1000000)  # about 1 ms each (sm_70+)


def _spin_rounds(stream, seconds):
    """Rounds of `spin` that keep the device busy about `seconds` (measured here: the
    hardware bounds a nanosleep only loosely)."""
    spin[1, 1, stream](1)  # compiled and loaded before the timed launch
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    start.record(stream)
    spin[1, 1, stream](20)
    stop.record(stream)
    stop.synchronize()
    per_round = max(cuda.event_elapsed_time(start, stop) / 1000 / 20, 1e-6)
    return int(min(seconds / per_round, 200_000)) + 1


@needs_numba
def test_the_numba_kernels_here_compile_without_a_gpu():
    """The GPU tests' kernels, typed as their launches type them, compile to PTX here."""
    from numba.cuda import types
    from numba.cuda.typing.typeof import typeof

    def ref(name, dtype):
        return gdn.ref_type(getattr(gpudyn, name), dtype)

    archs = gdn.build_info()["archs"]
    cc = divmod(int(("90" if "90" in archs else archs[0]).rstrip("af")), 10)
    gg, i64, u64 = ref("GGArray", np.int64), types.int64, types.uint64[::1]
    sigs = [
        (produce_uneven, (gg, i64, i64)),
        (read_at, (gg, types.int64[::1], u64)),
        (read_spans, (gg, i64, i64, types.int64[::1], types.uint32[::1])),
        (produce_round, (gg, i64, i64)),
        (consume_round, (gg, gg, u64)),
        (spin, (i64,)),
    ]
    for kind in ("GGArray", "StaticArray", "VmmArray"):
        for dtype in (np.uint8, np.complex128, np.bool_):
            out = types.Array(typeof(np.zeros(1, dtype)).dtype, 1, "C")
            sigs += [(copy_at, (ref(kind, dtype), i64, out)), (copy_spans, (ref(kind, dtype), i64, out))]
    for kernel, sig in sigs:
        cuda.compile(kernel.py_func, sig, device=False, output="ptx", cc=cc, abi="numba")


# ---- GPU: Numba ----------------------------------------------------------------------------------
@needs_numba
@pytest.mark.gpu
@pytest.mark.parametrize("num_lfvectors", [1, 37, 64])
def test_numba_reads_every_element_of_a_many_bucket_ggarray(num_lfvectors):
    n, block, salt = (4096 if SANITIZER else 60_000), 128, 7 << 40
    with gpudyn.GGArray(np.int64, num_lfvectors=num_lfvectors, first_bucket=32) as a:
        produce_uneven[(n + block - 1) // block, block](a.view_arg(), n, salt)
        want = a.to_numpy()  # the order at() and span() follow
        np.testing.assert_array_equal(np.sort(want), uneven_reference(n, block, salt))  # each element once
        m = len(want)
        if not SANITIZER:
            assert m > 32 * num_lfvectors * 15  # LFVectors of four buckets or more (32, 64, 128, 256, ...)
        out = cuda.to_device(np.full(m + 1, -1, np.int64))
        sizes = cuda.to_device(np.full(4, 99, np.uint64))
        read_at[64, 256](a.view_arg(), out, sizes)
        got = out.copy_to_host()
        np.testing.assert_array_equal(got[:m], want)
        assert got[m] == -1  # nothing written past the elements
        assert list(sizes.copy_to_host()) == [m, m, 0, 0]
        out = cuda.to_device(np.full(m, -1, np.int64))
        hits = cuda.to_device(np.zeros(m, np.uint32))
        read_spans[48, 128](a.view_arg(), m, 1000, out, hits)
        np.testing.assert_array_equal(out.copy_to_host(), want)
        assert (hits.copy_to_host() == 1).all()  # every element visited exactly once

        # A ref taken before more pushes: size() counts them (live counters), at() and
        # ranged_size() still cover the elements as of that ref, in the same order.
        stale = a.view_arg()
        produce_uneven[(n + block - 1) // block, block](a.view_arg(), n, salt + 2)
        out = cuda.to_device(np.full(m + 1, -1, np.int64))
        read_at[64, 256](stale, out, sizes)
        assert list(sizes.copy_to_host()[:2]) == [m, len(a)] and len(a) > m
        np.testing.assert_array_equal(out.copy_to_host()[:m], want)


def _values(dtype, n):
    rng = np.random.default_rng(5)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    if dt.kind == "f":
        return (rng.standard_normal(n) * 100).astype(dt)
    return rng.integers(0, min(np.iinfo(dt).max, 1 << 20), n).astype(dt)


@needs_numba
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["GGArray", "StaticArray", "VmmArray"])
@pytest.mark.parametrize(
    "dtype",
    [np.uint8, np.int16, np.int32, np.float32, np.float64, np.complex128, np.bool_],
    ids=lambda d: np.dtype(d).name,
)
def test_numba_at_and_span_read_every_dtype_exactly(kind, dtype):
    n = 3000
    with _make(kind, dtype, 4096) as arr:
        arr.extend(_values(dtype, n))
        arr.extend(_values(dtype, 7)[::-1].copy())
        want = arr.to_numpy()
        out = cuda.to_device(np.zeros(len(want), dtype))
        copy_at[16, 128](arr.view_arg(), len(want), out)
        np.testing.assert_array_equal(out.copy_to_host(), want)
        out = cuda.to_device(np.zeros(len(want), dtype))
        copy_spans[1, 32](arr.view_arg(), len(want), out)
        np.testing.assert_array_equal(out.copy_to_host(), want)


@needs_numba
@pytest.mark.gpu
def test_produce_consume_loop_needs_no_host_wait():
    """Producer pushes into A; consumer reads A (ranged_size, at, size) and pushes into
    B; A is cleared; A and B swap -- ten rounds queued behind a slow kernel, which is
    still running when every host call of the loop has returned."""
    iters, m = 10, (2000 if SANITIZER else 20_000)
    want = loop_reference(iters, m)
    s = cuda.stream()
    mismatch = cuda.to_device(np.zeros(1, np.uint64), stream=s)
    with (
        gpudyn.GGArray(np.int64, num_lfvectors=64, first_bucket=32, stream=s) as a0,
        gpudyn.GGArray(np.int64, num_lfvectors=64, first_bucket=32, stream=s) as b0,
    ):

        def loop():
            a, b = a0, b0
            for k in range(iters):
                produce_round[(m + 127) // 128, 128, s](a.view_arg(), m, k)
                consume_round[64, 128, s](a.view_arg(), b.view_arg(), mismatch)
                a.clear()
                a, b = b, a
            return a

        # Once to compile and load every kernel (a first launch may wait under lazy
        # loading) and to open the arrays' arenas; it must be right too.
        np.testing.assert_array_equal(np.sort(loop().to_numpy()), want)
        a0.clear()
        b0.clear()
        rounds = _spin_rounds(s, SPIN_SECONDS)
        spin_done = cuda.event()
        t0 = time.perf_counter()
        spin[1, 1, s](rounds)
        spin_done.record(s)
        final = loop()
        t_loop = time.perf_counter() - t0
        still_running = not spin_done.query()
        s.synchronize()
        t_all = time.perf_counter() - t0
        assert still_running, (
            f"the slow kernel ({t_all:.3f} s) had finished when the loop's host calls returned "
            f"({t_loop:.3f} s): a call waited for the device"
        )
        assert t_loop < t_all / 3, (t_loop, t_all)
        assert mismatch.copy_to_host()[0] == 0  # size() == ranged_size() in every consumer
        assert final.status == 0
        np.testing.assert_array_equal(np.sort(final.to_numpy()), want)  # every element exactly once


@needs_numba
@pytest.mark.gpu
def test_flatten_out_and_size_async_do_not_wait():
    s = cuda.stream()
    with gpudyn.GGArray(np.int64, num_lfvectors=16, first_bucket=32, stream=s) as a:
        a.extend(np.arange(5000, dtype=np.int64) * 3)
        with gpudyn.DeviceBuffer(8000, np.int64, stream=s) as buf, gpudyn.DeviceBuffer(1, np.uint64, stream=s) as count:
            a.flatten(out=buf, size=count)  # once: the kernels loaded
            a.size_async(out=count)
            rounds = _spin_rounds(s, SPIN_SECONDS)
            done = cuda.event()
            spin[1, 1, s](rounds)
            done.record(s)
            buf.fill_bytes(0)
            assert a.flatten(out=buf, size=count) is buf
            fresh = a.size_async()
            still_running = not done.query()
            s.synchronize()
            assert still_running, "flatten(out=...) or size_async() waited for the device"
            want = a.to_numpy()
            np.testing.assert_array_equal(buf.to_numpy()[:5000], want)
            assert count.to_numpy()[0] == 5000 and fresh.to_numpy()[0] == 5000
            fresh.close()


# ---- GPU: CuPy RawModule -------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("num_lfvectors", [1, 48])
def test_cupy_rawmodule_reads_every_element_in_order(num_lfvectors):
    cp = pytest.importorskip("cupy")
    mod = cp.RawModule(code=CUPY_READ, options=tuple(gpudyn.nvrtc_options()))
    n, block = (4096 if SANITIZER else 100_000), 256
    with gpudyn.GGArray(np.int64, num_lfvectors=num_lfvectors, first_bucket=32) as a:
        mod.get_function("produce")(((n + block - 1) // block,), (block,), (a.view_arg(), np.uint32(n)))
        want = a.to_numpy()
        i = np.arange(n)
        np.testing.assert_array_equal(np.sort(want), i[(i % block + i // block) % 3 != 0])
        m = len(want)
        out = cp.full(m + 1, -1, dtype=cp.int64)
        count = cp.zeros(1, dtype=cp.uint64)
        mod.get_function("read_at")((80,), (256,), (a.view_arg(), out, count))
        assert int(count[0]) == m
        np.testing.assert_array_equal(cp.asnumpy(out[:m]), want)
        assert int(out[m]) == -1
        out = cp.full(m, -1, dtype=cp.int64)
        hits = cp.zeros(m, dtype=cp.uint32)
        mod.get_function("read_spans")((40,), (128,), (a.view_arg(), out, hits, np.uint64(777)))
        np.testing.assert_array_equal(cp.asnumpy(out), want)
        assert bool((hits == 1).all())


# ---- GPU: flatten(out=...), size_async -----------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["GGArray", "StaticArray", "VmmArray"])
def test_flatten_out_into_a_reused_buffer(kind):
    values = np.arange(1, 3001, dtype=np.int32) * 3
    sentinel = -7
    with _make(kind, np.int32, 4096) as arr:
        arr.extend(values)
        want = arr.to_numpy()
        n = len(want)
        with gpudyn.DeviceBuffer(n + 64, np.int32) as buf, gpudyn.DeviceBuffer(2, np.uint64) as size:
            buf.copy_from_host(np.full(n + 64, sentinel, np.int32))
            size.copy_from_host(np.zeros(2, np.uint64))
            assert arr.flatten(out=buf, size=size) is buf
            got = buf.to_numpy()
            np.testing.assert_array_equal(got[:n], want)
            assert (got[n:] == sentinel).all() and list(size.to_numpy()) == [n, 0]
            assert arr.status == 0
            # The same buffer again, after more pushes; and exactly the elements' size.
            arr.extend(values[:50])
            want = arr.to_numpy()
            arr.flatten(out=_Prefix(buf, n + 50), size=size)
            np.testing.assert_array_equal(buf.to_numpy()[: n + 50], want)
            assert size.to_numpy()[0] == n + 50 and (buf.to_numpy()[n + 50 :] == sentinel).all()
            assert int(arr.size_async().to_numpy()[0]) == n + 50
            arr.size_async(out=size)
            assert size.to_numpy()[0] == n + 50
            with pytest.raises(TypeError, match="dtype"):
                arr.flatten(out=gpudyn.DeviceBuffer(n + 50, np.int64))

            # Too small by one: nothing is written, inside `out` or past it; the size is.
            buf.copy_from_host(np.full(n + 64, sentinel, np.int32))
            size.copy_from_host(np.zeros(2, np.uint64))
            arr.flatten(out=_Prefix(buf, n + 49), size=size)
            assert (buf.to_numpy() == sentinel).all()
            assert size.to_numpy()[0] == n + 50
            assert arr.status == arr.STATUS_DESTINATION_TOO_SMALL
            with pytest.raises(gpudyn.InvalidArgumentError, match=r"flatten\(out=\.\.\.\)"):
                len(arr)  # the next call that waits reports it, once
            assert arr.status == 0 and len(arr) == n + 50
            np.testing.assert_array_equal(arr.to_numpy(), want)  # the array is as it was
            # An empty out: too small for any element.
            arr.flatten(out=gpudyn.DeviceBuffer(0, np.int32))
            assert arr.status == arr.STATUS_DESTINATION_TOO_SMALL
            arr.clear_status()
            # An empty array fits any out, an empty one too; nothing is written.
            arr.clear()
            arr.flatten(out=gpudyn.DeviceBuffer(0, np.int32), size=size)
            assert size.to_numpy()[0] == 0 and arr.status == 0
            assert (buf.to_numpy() == sentinel).all()
