"""Misuse from Python on a GPU (issue 13, items 9 and 10): a page heap backing an
open warp heap cannot be closed, page ids and addresses are kept apart, device
buffers never become NumPy arrays implicitly, byte order is never mislabelled."""

import gc
import sys
import threading
import time

import gpudyn
import numpy as np
import pytest
from gpudyn import _ffi

pytestmark = pytest.mark.gpu

PAGE_BYTES = 36 << 10  # a warp's header block fits one page (see test_warp_heap.py)
PAGE_COUNT = 2048


def test_page_heap_cannot_be_closed_under_its_warp_heap():
    pages = gpudyn.RWHeap(page_count=PAGE_COUNT, page_size=PAGE_BYTES)
    wh = gpudyn.WarpHeap(backing=pages)
    wh.malloc(np.full(1000, 64, dtype=np.uint64))
    with pytest.raises(gpudyn.InvalidArgumentError, match="WarpHeap"):
        pages.close()
    # Both still work: the backing was not freed under the warp heap.
    assert pages.free_page_count < PAGE_COUNT
    ptrs = wh.malloc(np.full(1000, 64, dtype=np.uint64)).to_numpy()
    assert (ptrs != 0).all() and len(np.unique(ptrs)) == 1000
    wh.clear()
    assert pages.free_page_count == PAGE_COUNT
    # The warp heap keeps its backing alive when the caller drops it.
    del pages
    gc.collect()
    assert (wh.malloc([64] * 100).to_numpy() != 0).all()
    backing = wh._page_heap
    wh.close()
    backing.close()  # allowed now
    with pytest.raises(ValueError, match="closed"):
        backing.free_page_count  # noqa: B018  (the property read is the call under test)


def test_page_ids_and_addresses_are_kept_apart():
    with gpudyn.RWHeap(page_count=4096) as heap:
        pages = heap.get_pages(100)
        ptrs = heap.malloc(np.full(10, 256, dtype=np.uint64))
        free_before = heap.free_page_count
        with pytest.raises(TypeError, match=r"free_pages\(\)"):
            heap.free(pages)  # uint32 device array of page ids
        with pytest.raises(TypeError, match=r"free_pages\(\)"):
            heap.free(pages.to_numpy())  # host page ids (uint32)
        with pytest.raises(TypeError, match=r"free_pages\(\)"):
            heap.free(np.zeros(3, np.uint32))  # even ids that would be skipped as null addresses
        with pytest.raises(ValueError, match=r"free_pages\(\)"):
            heap.free(pages.to_numpy().astype(np.int64).tolist())  # the issue: ids as Python ints
        with pytest.raises(TypeError, match=r"free\(\)"):
            heap.free_pages(ptrs)  # uint64 device array of addresses
        with pytest.raises(ValueError, match=r"free\(\)"):
            heap.free_pages(ptrs.to_numpy())
        with pytest.raises(ValueError, match="pointers"):
            heap.free([heap.pool_address + heap.page_count * heap.page_size])  # one past the pool
        assert heap.free_page_count == free_before  # every misuse left the heap as it was
        assert heap.stats()["bad_frees"] == 0
        heap.free(ptrs)
        heap.free_pages(pages.to_numpy().tolist())  # host ids as Python ints
        assert heap.free_page_count == heap.page_count


def test_page_heap_check_reports_failures_and_bad_frees_once():
    with gpudyn.RWHeap(page_count=4096) as heap:
        pages = heap.get_pages(10).to_numpy()
        heap.free_pages(pages.tolist())
        heap.free_pages(pages[:3].tolist())  # double frees: counted, nothing changes
        assert heap.stats()["bad_frees"] == 3 and heap.free_page_count == 4096
        with pytest.raises(gpudyn.InvalidArgumentError, match=r"\b3 bad free"):
            heap.check()
        heap.check()  # reported once; info keeps counting
        assert heap.stats()["bad_frees"] == 3
        held = heap.get_pages(4000)
        with pytest.raises(gpudyn.OutOfMemoryError):
            heap.get_pages(200)
        failed = heap.stats()["failed_requests"]
        assert failed >= 104
        with pytest.raises(gpudyn.OutOfMemoryError, match=rf"\b{failed} request\(s\) found no free page"):
            heap.check()
        heap.check()
        heap.free_pages(held)
        heap.clear()  # zeroes the counters, and what the check saw of them
        heap.free_pages(pages[:1].tolist())
        with pytest.raises(gpudyn.InvalidArgumentError, match=r"\b1 bad free"):
            heap.check()


def test_device_buffer_to_numpy_only_explicitly():
    buf = gpudyn.DeviceBuffer.from_numpy(np.arange(5, dtype=np.int32))
    with pytest.raises(TypeError, match=r"to_numpy\(\)"):
        np.asarray(buf)
    assert buf.to_numpy().tolist() == [0, 1, 2, 3, 4]


def test_big_endian_numpy_is_converted_never_mislabelled():
    x = np.arange(1000, dtype=">i4")
    buf = gpudyn.DeviceBuffer.from_numpy(x)
    assert buf.dtype == np.dtype("=i4") and buf.__cuda_array_interface__["typestr"] == np.dtype("=i4").str
    assert buf.to_numpy().tolist() == list(range(1000))
    with gpudyn.GGArray(np.int32) as g:
        g.extend(x)
        g.extend(np.arange(1000, 1010, dtype=">i4"), mask=np.ones(10, dtype=bool))
        assert np.array_equal(np.sort(g.to_numpy()), np.arange(1010))
    with pytest.raises(TypeError, match="byte order"):
        gpudyn.GGArray(">i4")


def test_exports_of_every_plain_dtype_round_trip():
    for code in "?bBhHiIlLqQefdFD":
        x = (np.arange(37) % 2).astype(code)
        buf = gpudyn.DeviceBuffer.from_numpy(x)
        assert buf.__cuda_array_interface__["typestr"] == x.dtype.str
        assert np.array_equal(buf.to_numpy(), x)


# ---- lifetimes: close() against calls in flight, closed buffers and views, cycles ------
MiB = 1 << 20


class _BlockingArray:
    """A device array whose __cuda_array_interface__ blocks until released: the
    call reading it (extend) is in flight meanwhile."""

    def __init__(self, buf):
        self.buf, self.reading, self.release = buf, threading.Event(), threading.Event()

    @property
    def __cuda_array_interface__(self):
        self.reading.set()
        if not self.release.wait(5):
            raise TimeoutError("not released")  # the call then fails before any C call
        return self.buf.__cuda_array_interface__


def test_close_waits_for_a_call_in_flight():
    s = gpudyn.StaticArray(1024, np.int32)
    values = _BlockingArray(gpudyn.DeviceBuffer.from_numpy(np.arange(100, dtype=np.int32)))
    errors = []

    def extend():
        try:
            s.extend(values)
        except Exception as exc:
            errors.append(exc)

    caller = threading.Thread(target=extend)
    caller.start()
    assert values.reading.wait(5)
    closer = threading.Thread(target=s.close)
    closer.start()
    time.sleep(0.2)
    waited = closer.is_alive() and s._handle is not None
    if waited:  # else the array is destroyed already: extend must not go on with its handle
        values.release.set()
    caller.join(10)
    closer.join(10)
    assert waited, "close() destroyed the array under a call in flight"
    assert not errors and not closer.is_alive()
    with pytest.raises(ValueError, match="StaticArray is closed"):
        len(s)


class _SlowFree:
    """gpudyn.buffer's `lib`, whose gpudyn_device_free is slow and counts its calls
    (it frees on the first call only, so a double free is counted, not made)."""

    def __init__(self, lib):
        self._lib, self.calls = lib, []

    def __getattr__(self, name):
        return getattr(self._lib, name)

    def gpudyn_device_free(self, ptr, stream):
        self.calls.append(int(_ffi.ffi.cast("uintptr_t", ptr)))
        time.sleep(0.05)  # the other thread's close() runs meanwhile
        return self._lib.gpudyn_device_free(ptr, stream) if len(self.calls) == 1 else 0


def test_two_threads_closing_a_device_buffer_free_it_once(monkeypatch):
    from gpudyn import buffer as buffer_module

    buf = gpudyn.DeviceBuffer(4096)
    ptr = buf.ptr
    slow = _SlowFree(buffer_module.lib)
    monkeypatch.setattr(buffer_module, "lib", slow)
    barrier = threading.Barrier(2)
    closers = [threading.Thread(target=lambda: (barrier.wait(), buf.close())) for _ in range(2)]
    for t in closers:
        t.start()
    for t in closers:
        t.join(10)
    monkeypatch.undo()
    assert slow.calls == [ptr]


def test_closed_device_buffers_and_views_refuse_use():
    buf = gpudyn.DeviceBuffer.from_numpy(np.arange(16, dtype=np.int32))
    empty = gpudyn.DeviceBuffer(0, np.int32)
    assert empty.to_numpy().shape == (0,)  # empty, not closed
    buf.close()
    empty.close()
    for b in (buf, empty):
        for use in (
            b.to_numpy,
            lambda: b.__cuda_array_interface__,
            b.__dlpack__,
            b.__dlpack_device__,
            lambda: b.copy_from_host(np.zeros(16, np.int32)),
            lambda: b.fill_bytes(0),
        ):
            with pytest.raises(ValueError, match="this DeviceBuffer is closed"):
                use()
    with gpudyn.GGArray(np.int32, num_lfvectors=8) as g:
        with pytest.raises(ValueError, match="this DeviceBuffer is closed"):
            g.extend(buf)  # not read as a NULL pointer with 16 elements
        assert len(g) == 0
    s = gpudyn.StaticArray(1024, np.int32)
    s.extend(np.arange(1024, dtype=np.int32))
    view = s.as_buffer()
    assert view.to_numpy().tolist() == list(range(1024))
    s.close()  # frees the memory the view names
    for use in (
        view.to_numpy,
        lambda: view.__cuda_array_interface__,
        view.__dlpack__,
        lambda: view.copy_from_host(np.zeros(1024, np.int32)),
    ):
        with pytest.raises(ValueError, match="view of a StaticArray that is closed"):
            use()


def test_with_block_keeps_the_users_exception():
    heap = gpudyn.Heap(initial_bytes=16 * MiB)
    g = None
    with pytest.raises(KeyError, match="the block's own error") as info:
        with heap:
            g = gpudyn.GGArray(np.int32, num_lfvectors=8, pool_bytes=None, heap=heap)
            raise KeyError("the block's own error")  # leaving the block, close() is refused: g uses the heap
    if sys.version_info >= (3, 11):
        assert any("Heap.close() failed too" in note for note in info.value.__notes__)
    assert heap.stats()["bytes_mapped"] > 0  # still open and owned
    g.close()
    heap.close()


def _free_memory(device: int, cupy) -> int:
    # A device synchronize also hands the stream-ordered pools' freed memory back
    # (release threshold 0): a RWHeap's pool shows as free only after one.
    cupy.cuda.runtime.deviceSynchronize()
    return gpudyn.device_info(device)["free_memory"]


def _backing_and_user(backing):
    if backing == "Heap":
        b = gpudyn.Heap(initial_bytes=512 * MiB, max_bytes=512 * MiB)
        user = gpudyn.GGArray(np.int32, num_lfvectors=8, pool_bytes=None, heap=b)
        user.extend(np.arange(1000, dtype=np.int32))
    else:
        b = gpudyn.RWHeap(page_count=8192, page_size=64 << 10)  # a 512 MiB pool
        user = gpudyn.WarpHeap(backing=b)
        user.malloc([64] * 100)
    return b, user


@pytest.mark.parametrize("backing", ["Heap", "RWHeap"])
def test_a_reference_cycle_through_a_backing_frees_it(backing):
    """A backing and its user (GGArray of a Heap, WarpHeap of a RWHeap) in one
    reference cycle: the collector may finalize the backing first, whose destroy
    is refused while the user lives; it is retried after the user's."""
    import weakref

    from gpudyn import _handle
    from gpudyn.buffer import current_device

    cupy = pytest.importorskip("cupy", reason="a device synchronize (CuPy) to read the pools' free memory")
    device = current_device()
    b, user = _backing_and_user(backing)  # warm-up: the first use loads kernels (device memory kept)
    user.close()
    b.close()
    gc.collect()
    f0 = _free_memory(device, cupy)
    b, user = _backing_and_user(backing)
    b.users = [user]  # backing -> list -> user -> backing
    alive = weakref.ref(b), weakref.ref(user)
    f1 = _free_memory(device, cupy)
    del b, user
    gc.collect()
    assert alive[0]() is None and alive[1]() is None, "the cycle was not collected"
    assert not _handle._deferred, "a refused destroy is still waiting for its retry"
    if f0 - f1 < 400 * MiB:
        pytest.skip(f"the backing's memory did not show in free memory ({(f0 - f1) >> 20} MiB)")
    f2 = _free_memory(device, cupy)
    assert f0 - f2 < 64 * MiB, f"{(f0 - f2) >> 20} MiB still held after the cycle was collected"


class _SlowCreate:
    """A module's `lib` whose `name` signals, then waits for a release before it
    calls the real function: a create is in flight meanwhile."""

    def __init__(self, lib, name):
        self._lib, self._name = lib, name
        self.calling, self.release = threading.Event(), threading.Event()

    def __getattr__(self, name):
        real = getattr(self._lib, name)
        if name != self._name:
            return real

        def slow(*args):
            self.calling.set()
            self.release.wait(5)
            return real(*args)

        return slow


def _close_during_create(monkeypatch, module, name, backing, create):
    """Closes `backing` on another thread while `create()` (a structure built on
    it) is inside the library's `name`; returns (close waited, close's error, the
    structure)."""
    slow = _SlowCreate(module.lib, name)
    monkeypatch.setattr(module, "lib", slow)
    made, errors = [], []
    creator = threading.Thread(target=lambda: made.append(create()))
    creator.start()
    assert slow.calling.wait(5)

    def close():
        try:
            backing.close()
        except Exception as exc:
            errors.append(exc)

    closer = threading.Thread(target=close)
    closer.start()
    time.sleep(0.2)
    waited = closer.is_alive() and backing._handle is not None
    slow.release.set()
    creator.join(10)
    closer.join(10)
    monkeypatch.undo()
    return waited, errors, made


def test_close_of_a_heap_waits_for_an_array_being_created_on_it(monkeypatch):
    from gpudyn import ggarray as ggarray_module

    heap = gpudyn.Heap(initial_bytes=64 << 20)
    waited, errors, made = _close_during_create(
        monkeypatch, ggarray_module, "gpudyn_ggarray_create", heap, lambda: gpudyn.GGArray(np.int32, 32, heap=heap)
    )
    assert waited, "Heap.close() destroyed the heap while a GGArray was being created on it"
    assert len(made) == 1
    # Once created, the array is the heap's user: the close was refused, the heap stays open.
    assert len(errors) == 1 and isinstance(errors[0], gpudyn.InvalidArgumentError)
    made[0].extend(np.arange(1000, dtype=np.int32))
    assert np.array_equal(np.sort(made[0].to_numpy()), np.arange(1000, dtype=np.int32))
    made[0].close()
    heap.close()


def test_close_of_a_page_heap_waits_for_a_warp_heap_being_created_on_it(monkeypatch):
    from gpudyn import warp_heap as warp_heap_module

    page_heap = gpudyn.RWHeap(page_count=4096, page_size=4096)
    waited, errors, made = _close_during_create(
        monkeypatch, warp_heap_module, "gpudyn_warp_heap_create", page_heap, lambda: gpudyn.WarpHeap(backing=page_heap)
    )
    assert waited, "RWHeap.close() destroyed the page heap while a WarpHeap was being created on it"
    assert len(made) == 1
    assert len(errors) == 1 and isinstance(errors[0], gpudyn.InvalidArgumentError)
    made[0].close()
    page_heap.close()
