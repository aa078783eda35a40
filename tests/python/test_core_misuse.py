"""Misuse from Python on a GPU (issue 13, items 9 and 10): a page heap backing an
open warp heap cannot be closed, page ids and addresses are kept apart, device
buffers never become NumPy arrays implicitly, byte order is never mislabelled."""
import gc

import numpy as np
import pytest

import gpudyn

pytestmark = pytest.mark.gpu

PAGE_BYTES = 36 << 10  # a warp's header block fits one page (see test_warp_heap.py)
PAGE_COUNT = 2048


def test_page_heap_cannot_be_closed_under_its_warp_heap():
    pages = gpudyn.PageHeap(page_count=PAGE_COUNT, page_size=PAGE_BYTES)
    wh = gpudyn.WarpHeap(backing=pages)
    wh.alloc(np.full(1000, 64, dtype=np.uint64))
    with pytest.raises(gpudyn.InvalidArgumentError, match="WarpHeap"):
        pages.close()
    # Both still work: the backing was not freed under the warp heap.
    assert pages.free_page_count < PAGE_COUNT
    ptrs = wh.alloc(np.full(1000, 64, dtype=np.uint64)).to_numpy()
    assert (ptrs != 0).all() and len(np.unique(ptrs)) == 1000
    wh.release()
    assert pages.free_page_count == PAGE_COUNT
    # The warp heap keeps its backing alive when the caller drops it.
    del pages
    gc.collect()
    assert (wh.alloc([64] * 100).to_numpy() != 0).all()
    backing = wh._page_heap
    wh.close()
    backing.close()  # allowed now
    with pytest.raises(ValueError, match="closed"):
        backing.free_page_count


def test_page_ids_and_addresses_are_kept_apart():
    with gpudyn.PageHeap(page_count=4096) as heap:
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
        assert heap.info()["bad_frees"] == 0
        heap.free(ptrs)
        heap.free_pages(pages.to_numpy().tolist())  # host ids as Python ints
        assert heap.free_page_count == heap.page_count


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
