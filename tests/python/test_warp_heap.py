"""WarpHeap (FDGMalloc) from Python: argument errors without a GPU; on a GPU,
ragged batches are disjoint, aligned and complete, data survives until
clear, the statistics match the requests and out-of-memory rolls back."""

import gpudyn
import numpy as np
import pytest
from gpudyn import _ffi
from gpudyn.warp_heap import WarpHeap

# CUDA's device malloc heap is process-wide; conftest.py raises it to this size
# before any test runs (asking for it again here is then a no-op).
HEAP_BYTES = 256 << 20


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"min_block_bytes": 24}, "min_block_bytes"),
        ({"min_block_bytes": 8}, "min_block_bytes"),
        ({"superblock_bytes": 40}, "superblock_bytes"),
        ({"superblock_bytes": 1 << 27}, "superblock_bytes"),
        ({"list_capacity": 0}, "list_capacity"),
    ],
)
def test_bad_options_name_the_argument(kwargs, name):
    with pytest.raises(gpudyn.InvalidArgumentError, match=name):
        WarpHeap(**kwargs)


def test_negative_option_is_a_value_error():
    with pytest.raises(ValueError, match="superblock_bytes"):
        WarpHeap(superblock_bytes=-1)


def _check_disjoint(ptrs, sizes):
    live = sizes > 0
    assert np.all(ptrs[~live] == 0)
    p, s = ptrs[live], sizes[live]
    assert np.all(p != 0)
    assert np.all(p % 16 == 0)
    order = np.argsort(p)
    p, s = p[order], s[order]
    assert np.all(p[:-1] + s[:-1] <= p[1:]), "two blocks overlap"


# Page heap for the page_heap backing: pages that hold a warp's header block
# (header, 126-entry list, 32 KiB superblock: under 36 KiB), 288 MiB in all.
PAGE_BYTES = 36 << 10
PAGE_COUNT = 8192


def test_bad_backing_names_the_argument():
    with pytest.raises(ValueError, match="backing"):
        WarpHeap(backing="bump")
    with pytest.raises(TypeError, match="backing"):
        WarpHeap(backing=3)


@pytest.mark.gpu
@pytest.mark.parametrize("backing", ["arena", "cuda_malloc", "page_heap"])
@pytest.mark.parametrize("superblock_bytes", [32768, 0])
def test_ragged_batches_are_disjoint_and_counted(superblock_bytes, backing):
    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 600, size=50_000).astype(np.uint64)
    sizes[rng.random(sizes.size) < 0.1] = 0
    sizes[::997] = 40_000  # larger than a superblock
    pages = gpudyn.RWHeap(page_count=PAGE_COUNT, page_size=PAGE_BYTES) if backing == "page_heap" else None
    with WarpHeap(
        superblock_bytes=superblock_bytes, device_heap_bytes=HEAP_BYTES, backing=pages if pages is not None else backing
    ) as heap:
        free_before = heap.backing_free_bytes() if backing != "cuda_malloc" else None
        ptrs = heap.malloc(sizes).to_numpy()
        _check_disjoint(ptrs, sizes)
        st = heap.stats()
        assert st["bytes_requested"] == int(((sizes + 15) // 16 * 16).sum())
        assert st["bytes_reserved"] >= st["bytes_requested"]
        assert st["failed_allocations"] == 0 and st["misuse"] == 0
        ptrs2 = heap.malloc(list(range(0, 64))).to_numpy()  # a second batch, from a list
        both = np.concatenate([ptrs, ptrs2])
        _check_disjoint(both, np.concatenate([sizes, np.arange(64, dtype=np.uint64)]))
        assert heap.batch_count == 2
        heap.clear()
        assert heap.batch_count == 0
        st = heap.stats()
        assert st["headers"] == st["superblocks"] == st["bytes_reserved"] == st["bytes_requested"] == 0
        if free_before is not None:
            assert heap.backing_free_bytes() == free_before  # every slot / page went back
        else:
            with pytest.raises(gpudyn.NotSupportedError):
                heap.backing_free_bytes()
    if pages is not None:
        pages.close()


@pytest.mark.gpu
def test_data_survives_until_clear():
    cp = pytest.importorskip("cupy")
    sizes = np.array([(i % 37) * 8 + 8 for i in range(10_000)], dtype=np.uint64)
    fill = cp.RawKernel(
        r'''
    extern "C" __global__ void fill(const unsigned long long* p, const unsigned long long* s, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { unsigned char* b = (unsigned char*)p[i]; for (unsigned long long k = 0; k < s[i]; ++k) b[k] = (unsigned char)(i * 31 + k); }
    }''',
        "fill",
    )
    check = cp.RawKernel(
        r'''
    extern "C" __global__ void check(const unsigned long long* p, const unsigned long long* s, int n, int* bad) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) { const unsigned char* b = (const unsigned char*)p[i]; for (unsigned long long k = 0; k < s[i]; ++k) if (b[k] != (unsigned char)(i * 31 + k)) atomicAdd(bad, 1); }
    }''',
        "check",
    )
    with WarpHeap(device_heap_bytes=HEAP_BYTES) as heap:
        ptrs = cp.asarray(heap.malloc(sizes))
        d_sizes = cp.asarray(sizes)
        n = sizes.size
        fill(((n + 255) // 256,), (256,), (ptrs, d_sizes, np.int32(n)))
        heap.malloc(np.full(5000, 48, dtype=np.uint64))  # another batch must not disturb the first
        bad = cp.zeros(1, dtype=cp.int32)
        check(((n + 255) // 256,), (256,), (ptrs, d_sizes, np.int32(n), bad))
        assert int(bad.get()[0]) == 0


@pytest.mark.gpu
def test_out_of_memory_rolls_back():
    with WarpHeap(device_heap_bytes=HEAP_BYTES) as heap:
        first = heap.malloc(np.full(1000, 64, dtype=np.uint64)).to_numpy()
        before = heap.stats()
        with pytest.raises(gpudyn.OutOfMemoryError, match="rolled back"):
            heap.malloc(np.full(64, 1 << 34, dtype=np.uint64))  # 16 GiB each
        after = heap.stats()
        assert heap.batch_count == 1
        assert after["bytes_reserved"] == before["bytes_reserved"]
        assert after["bytes_requested"] == before["bytes_requested"]
        assert after["failed_allocations"] > before["failed_allocations"]
        _check_disjoint(first, np.full(1000, 64, dtype=np.uint64))


@pytest.mark.gpu
def test_bad_sizes_are_refused():
    with WarpHeap(device_heap_bytes=HEAP_BYTES) as heap:
        with pytest.raises(ValueError, match="sizes"):
            heap.malloc(np.array([4, -1]))
        with pytest.raises(TypeError, match="sizes"):
            heap.malloc(np.array([1.5]))
        assert heap.malloc([]).size == 0
        assert heap.batch_count == 0


# ---- tidy_up_kept: host-side misuse (no GPU needed) ---------------------------------
def test_tidy_up_kept_null_heap_is_refused_by_the_library():
    from gpudyn._ffi import check, ffi, lib

    with pytest.raises(gpudyn.InvalidArgumentError, match="'heap'"):
        check(lib.gpudyn_warp_heap_tidy_up_kept(ffi.NULL, ffi.NULL, 1, ffi.NULL))
    # A handle that was never created is refused without being read (the library keeps a
    # registry of live handles), before the NULL array with entries is looked at.
    stand_in = ffi.cast("gpudyn_warp_heap_t", 16)
    with pytest.raises(gpudyn.InvalidArgumentError, match="'heap' is 0x10"):
        check(lib.gpudyn_warp_heap_tidy_up_kept(stand_in, ffi.NULL, 3, ffi.NULL))


def test_tidy_up_kept_on_a_closed_heap_is_a_value_error():
    heap = WarpHeap.__new__(WarpHeap)  # no device here: a heap that is not open
    with pytest.raises(ValueError, match="closed"):
        heap.tidy_up_kept([0])


def test_tidy_up_kept_refuses_bad_header_values_before_any_device_call():
    heap = WarpHeap.__new__(WarpHeap)
    heap._handle = object()  # open, as far as the argument checks go
    heap.stream = None
    with pytest.raises(ValueError, match="headers"):
        heap.tidy_up_kept(np.array([16, -1]))
    with pytest.raises(TypeError, match="headers"):
        heap.tidy_up_kept(np.array([1.5]))


# ---- tidy_up_kept on a GPU: memory back, headers usable in a later kernel ------------
TIDY_SRC = r'''
#include <gpudyn/warp_heap.cuh>
// Each warp allocates `calls` x 32 lanes x `bytes` and keeps its header.
extern "C" __global__ void keep(gpudyn_warp_heap_view_t view, unsigned long long* kept, unsigned calls,
                                unsigned bytes) {
    gpudyn::warp_heap_ref ref{view};
    gpudyn::warp_heap wh = ref.start(0xffffffffu);
    for (unsigned c = 0; c < calls; ++c) {
        unsigned* p = static_cast<unsigned*>(wh.alloc(bytes));
        if (p != nullptr) p[0] = c;
    }
    void* k = wh.valid() ? wh.keep() : nullptr;
    if (threadIdx.x % 32 == 0) kept[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = (unsigned long long)k;
}
// A later kernel resumes the (tidied) headers, allocates, checks its data, ends.
extern "C" __global__ void resume(gpudyn_warp_heap_view_t view, const unsigned long long* kept, unsigned bytes,
                                  unsigned* bad) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap wh = ref.resume(0xffffffffu, (void*)kept[tid / 32]);
    if (!wh.valid()) { atomicAdd(bad, 1u); return; }
    unsigned* p = static_cast<unsigned*>(wh.alloc(bytes));
    if (p == nullptr) atomicAdd(bad, 1u);
    else {
        for (unsigned i = 0; i < bytes / 4; ++i) p[i] = tid * 7919u + i;
        __syncwarp();
        for (unsigned i = 0; i < bytes / 4; ++i) if (p[i] != tid * 7919u + i) { atomicAdd(bad, 1u); break; }
    }
    wh.end();
}
'''
WARPS, CALLS, BYTES = 16, 16, 512  # 256 KiB per warp: 8 superblocks of 32 KiB each


@pytest.mark.gpu
@pytest.mark.parametrize("backing", ["arena", "cuda_malloc", "page_heap"])
def test_tidy_up_kept_returns_memory_and_keeps_headers_usable(backing):
    cp = pytest.importorskip("cupy")
    mod = cp.RawModule(code=TIDY_SRC, options=tuple(gpudyn.nvrtc_options()))
    pages = gpudyn.RWHeap(page_count=PAGE_COUNT, page_size=PAGE_BYTES) if backing == "page_heap" else None
    with WarpHeap(device_heap_bytes=HEAP_BYTES, backing=pages if pages is not None else backing) as heap:
        view_arg = heap.view_arg()
        assert len(bytes(view_arg)) == _ffi.ffi.sizeof("gpudyn_warp_heap_view_t")
        level = heap.backing_free_bytes if backing != "cuda_malloc" else (lambda: None)
        free0 = level()
        kept = cp.zeros(WARPS, dtype=cp.uint64)
        mod.get_function("keep")((WARPS // 4,), (128,), (view_arg, kept, np.uint32(CALLS), np.uint32(BYTES)))
        held = heap.stats()
        free1 = level()
        assert held["headers"] == WARPS and held["superblocks"] > WARPS
        assert held["bytes_requested"] == WARPS * CALLS * 32 * BYTES
        heap.tidy_up_kept(kept)
        tidy = heap.stats()
        # Each header keeps its own block (header, first list, first superblock) and nothing else.
        assert tidy["headers"] == WARPS and tidy["superblocks"] == WARPS and tidy["large_blocks"] == 0
        assert tidy["bytes_requested"] == 0 and tidy["misuse"] == 0
        assert tidy["bytes_reserved"] < held["bytes_reserved"] and tidy["bytes_reserved"] % WARPS == 0
        if free0 is not None:
            free2 = level()
            assert free1 < free2 < free0  # the superblocks went back, the header blocks stayed
            if backing == "page_heap":
                assert free0 - free2 == WARPS * PAGE_BYTES
            else:
                assert free0 - free2 == tidy["bytes_reserved"]  # a header slot is exactly a header block
            # A pointer that is no header of this heap is refused by name, the rest untouched.
            with pytest.raises(gpudyn.InvalidArgumentError, match="headers.*1 of 2 entries.*index 1"):
                heap.tidy_up_kept(cp.asarray([0, int(kept[0].get()) + 16], dtype=cp.uint64))
            assert heap.stats()["misuse"] == 1 and level() == free2
            with pytest.raises(gpudyn.InvalidArgumentError, match=r"\b1 contract violation"):
                heap.check()  # reported once; the stats keep it
            heap.check()
            assert heap.stats()["misuse"] == 1
        bad = cp.zeros(1, dtype=cp.uint32)
        mod.get_function("resume")((WARPS // 4,), (128,), (view_arg, kept, np.uint32(BYTES), bad))
        assert int(bad.get()[0]) == 0
        st = heap.stats()
        assert st["headers"] == st["superblocks"] == st["bytes_reserved"] == st["bytes_requested"] == 0
        assert st["failed_allocations"] == 0
        if free0 is not None:
            assert level() == free0
    if pages is not None:
        pages.close()
