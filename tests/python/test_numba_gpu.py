"""gpudyn.numba on a GPU: every device function in Numba @cuda.jit kernels,
called under divergence, to exhaustion (0 / False / INVALID_PAGE, counted, and
nothing stored before lost), several structures in one kernel, both link modes;
every result checked against a host reference computed here."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'gpudyn-cu13[numba]')")

import gpudyn  # noqa: E402
import gpudyn.numba as gdn  # noqa: E402
from gpudyn.numba import _link  # noqa: E402
from numba import cuda  # noqa: E402

pytestmark = pytest.mark.gpu
FULL = 0xFFFFFFFF
# Under compute-sanitizer kernels run 10-100x slower: fewer threads there.
N = 4096 if os.environ.get("GPUDYN_SANITIZER") else 65536


def row_length(i):
    """Host twin of the kernels' length rule (0 .. 96, about 1 % zeros)."""
    return (np.asarray(i, dtype=np.uint64) * np.uint64(2654435761) % np.uint64(1 << 32)) % np.uint64(97)


def check_disjoint(addresses, nbytes, align=16):
    """Blocks [address, address + nbytes) are aligned and pairwise disjoint."""
    addresses, nbytes = np.asarray(addresses, np.uint64), np.asarray(nbytes, np.uint64)
    assert (addresses % np.uint64(align) == 0).all()
    order = np.argsort(addresses)
    a, n = addresses[order], nbytes[order]
    assert (a[:-1] + n[:-1] <= a[1:]).all(), "two blocks overlap"


# ---- Heap ---------------------------------------------------------------------------------
@cuda.jit
def heap_build(heap, n, addresses):
    i = cuda.grid(1)
    if i >= n:
        return
    length = (np.uint64(i) * np.uint64(2654435761) % np.uint64(1 << 32)) % np.uint64(97)
    if length == 0:  # early return: the others allocate diverged
        addresses[i] = 0
        return
    p = gdn.malloc(heap, length * 4)
    if p != 0:
        row = gdn.array(p, length, np.uint32)
        for k in range(length):
            row[k] = np.uint64(i) + k
    addresses[i] = p


@cuda.jit
def heap_sum_and_free(heap, n, addresses, sums, freed):
    i = cuda.grid(1)
    if i >= n:
        return
    length = (np.uint64(i) * np.uint64(2654435761) % np.uint64(1 << 32)) % np.uint64(97)
    s = np.uint64(0)
    if addresses[i] != 0:
        row = gdn.array(addresses[i], length, np.uint32)
        for k in range(length):
            s += row[k]
    sums[i] = s
    freed[i] = gdn.free(heap, addresses[i])


def test_heap_malloc_free_divergent():
    n = N
    lengths = row_length(np.arange(n))
    with gpudyn.Heap(initial_bytes=256 << 20) as heap:
        addresses = cuda.device_array(n, np.uint64)
        heap_build[(n + 255) // 256, 256](heap.view_arg(), n, addresses)
        a = addresses.copy_to_host()
        assert ((a != 0) == (lengths > 0)).all(), "a malloc failed with memory to spare"
        check_disjoint(a[a != 0], lengths[a != 0] * 4)
        stats = heap.stats()
        assert stats["allocations"] == int((lengths > 0).sum()) and stats["failed_allocations"] == 0
        sums, freed = cuda.device_array(n, np.uint64), cuda.device_array(n, np.bool_)
        heap_sum_and_free[(n + 255) // 256, 256](heap.view_arg(), n, addresses, sums, freed)
        i = np.arange(n, dtype=np.uint64)
        assert (sums.copy_to_host() == lengths * i + lengths * (lengths - 1) // 2).all()
        assert freed.copy_to_host().all()  # free(0) is fine too
        stats = heap.stats()
        assert stats["allocations"] == 0 and stats["bad_frees"] == 0
        # The same pointers again: double frees, refused and counted, nothing changes.
        heap_sum_and_free[(n + 255) // 256, 256](
            heap.view_arg(), n, cuda.to_device(np.where(a != 0, a, 0)), sums, freed
        )
        f = freed.copy_to_host()
        assert not f[a != 0].any() and f[a == 0].all()
        assert heap.stats()["bad_frees"] == int((a != 0).sum())


@cuda.jit
def heap_grab(heap, nbytes, addresses):
    i = cuda.grid(1)
    p = gdn.malloc(heap, nbytes)
    if p != 0:
        row = gdn.array(p, nbytes // 8, np.uint64)
        for k in range(nbytes // 8):
            row[k] = i
    addresses[i] = p


@cuda.jit
def heap_verify(addresses, nbytes, bad):
    i = cuda.grid(1)
    if addresses[i] != 0:
        row = gdn.array(addresses[i], nbytes // 8, np.uint64)
        for k in range(nbytes // 8):
            if row[k] != i:
                cuda.atomic.add(bad, 0, 1)


def test_heap_exhaustion_returns_zero_and_keeps_the_rest():
    nbytes, threads = 64 << 10, 1024  # 64 MiB asked of a 16 MiB heap
    with gpudyn.Heap(initial_bytes=16 << 20, max_bytes=16 << 20) as heap:
        addresses = cuda.device_array(threads, np.uint64)
        heap_grab[threads // 128, 128](heap.view_arg(), nbytes, addresses)
        a = addresses.copy_to_host()
        got = a[a != 0]
        assert 0 < len(got) < threads
        check_disjoint(got, np.full(len(got), nbytes))
        stats = heap.stats()
        assert stats["failed_allocations"] == threads - len(got)
        assert stats["allocations"] == len(got)
        bad = cuda.to_device(np.zeros(1, np.uint64))
        heap_verify[threads // 128, 128](addresses, nbytes, bad)
        assert bad.copy_to_host()[0] == 0, "an allocation was overwritten"
        # The host sees the kernel's failures once, as OutOfMemoryError with their count.
        with pytest.raises(gpudyn.OutOfMemoryError, match=rf"\b{threads - len(got)} malloc request"):
            heap.check()
        heap.check()
        assert heap.stats()["allocations"] == len(got)


# ---- RWHeap ------------------------------------------------------------------------------
@cuda.jit
def pages_take(pages, n, out, addresses):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = gdn.INVALID_PAGE
    if i % 3 != 0:  # two lanes in three, diverged
        page = gdn.get_page(pages)
        out[i] = page
        if page != gdn.INVALID_PAGE:
            addresses[i] = gdn.page_address(pages, page)
            gdn.array(addresses[i], 1, np.uint64)[0] = i


@cuda.jit
def pages_give_back(pages, n, taken, owner, freed):
    i = cuda.grid(1)
    if i >= n:
        return
    page = taken[i]
    if page != gdn.INVALID_PAGE:
        owner[i] = gdn.array(gdn.page_address(pages, page), 1, np.uint64)[0]
    freed[i] = gdn.free_page(pages, page)


def test_page_heap_get_and_free_pages_divergent():
    n, count, size = 3000, 4096, 256
    with gpudyn.RWHeap(page_count=count, page_size=size) as pages:
        taken, addresses = cuda.device_array(n, np.uint32), cuda.device_array(n, np.uint64)
        pages_take[(n + 127) // 128, 128](pages.view_arg(), n, taken, addresses)
        t, a = taken.copy_to_host(), addresses.copy_to_host()
        asked = np.arange(n) % 3 != 0
        assert (t[~asked] == gdn.INVALID_PAGE).all() and (t[asked] < count).all()
        assert len(np.unique(t[asked])) == asked.sum(), "a page was handed out twice"
        assert (a[asked] == pages.pool_address + t[asked].astype(np.uint64) * size).all()
        assert pages.free_page_count == count - asked.sum()
        owner, freed = cuda.device_array(n, np.uint64), cuda.device_array(n, np.bool_)
        pages_give_back[(n + 127) // 128, 128](pages.view_arg(), n, taken, owner, freed)
        assert (owner.copy_to_host()[asked] == np.arange(n)[asked]).all()
        f = freed.copy_to_host()
        assert f[asked].all() and not f[~asked].any()  # INVALID_PAGE is out of range: a bad free
        info = pages.stats()
        assert info["free_pages"] == count and info["bad_frees"] == (~asked).sum()
        # Twice: every page is free already.
        pages_give_back[(n + 127) // 128, 128](pages.view_arg(), n, taken, owner, freed)
        assert not freed.copy_to_host().any() and pages.stats()["bad_frees"] == n + (~asked).sum()


@cuda.jit
def pages_all(pages, out):
    out[cuda.grid(1)] = gdn.get_page(pages)


def test_page_heap_exhaustion():
    count, threads = 1024, 4096
    with gpudyn.RWHeap(page_count=count, page_size=64) as pages:
        out = cuda.device_array(threads, np.uint32)
        pages_all[threads // 256, 256](pages.view_arg(), out)
        t = out.copy_to_host()
        got = t[t != gdn.INVALID_PAGE]
        # Bits only go from free to used here: a thread fails only after its sweep saw every page used.
        assert len(got) == count and len(np.unique(got)) == count
        info = pages.stats()
        assert info["free_pages"] == 0 and info["failed_requests"] == threads - count
        # The host sees the kernel's failures once; the counters stay.
        with pytest.raises(gpudyn.OutOfMemoryError, match=rf"\b{threads - count} request\(s\) found no free page"):
            pages.check()
        pages.check()
        assert pages.stats()["failed_requests"] == threads - count


@cuda.jit
def pages_malloc(pages, n, addresses):
    i = cuda.grid(1)
    if i < n:
        nbytes = 16 + (i % 7) * 200  # 16 B .. 1.2 KiB: below and above a page
        p = gdn.malloc(pages, nbytes)
        addresses[i] = p
        if p != 0:
            row = gdn.array(p, nbytes // 8, np.uint64)
            for k in range(nbytes // 8):
                row[k] = i


@cuda.jit
def pages_check_free(pages, n, addresses, bad, freed):
    i = cuda.grid(1)
    if i < n:
        nbytes = 16 + (i % 7) * 200
        if addresses[i] != 0:
            row = gdn.array(addresses[i], nbytes // 8, np.uint64)
            for k in range(nbytes // 8):
                if row[k] != i:
                    cuda.atomic.add(bad, 0, 1)
        freed[i] = gdn.free(pages, addresses[i])


def test_page_heap_malloc_free_per_lane():
    n = 2000
    with gpudyn.RWHeap(page_count=1 << 16, page_size=256) as pages:
        addresses = cuda.device_array(n, np.uint64)
        pages_malloc[(n + 127) // 128, 128](pages.view_arg(), n, addresses)
        a = addresses.copy_to_host()
        sizes = 16 + (np.arange(n) % 7) * 200
        assert (a != 0).all()
        check_disjoint(a, sizes)
        bad, freed = cuda.to_device(np.zeros(1, np.uint64)), cuda.device_array(n, np.bool_)
        pages_check_free[(n + 127) // 128, 128](pages.view_arg(), n, addresses, bad, freed)
        assert bad.copy_to_host()[0] == 0 and freed.copy_to_host().all()
        assert pages.free_page_count == 1 << 16 and pages.stats()["bad_frees"] == 0


# ---- WarpHeap -------------------------------------------------------------------------------
@cuda.jit
def warp_blocks(wh, words_of_lane, addresses, bad):
    i = cuda.grid(1)
    lane = cuda.laneid
    wants = lane % 3 != 2  # a third of the lanes never start
    mask = cuda.ballot_sync(FULL, wants)  # every lane of the warp is here
    if wants:
        h = gdn.warp_start(wh, mask)  # every lane of mask, same mask
        words = words_of_lane[lane]
        p = gdn.warp_alloc(wh, h, mask, words * 8)
        addresses[i] = p
        if p != 0:
            row = gdn.array(p, words, np.uint64)
            for k in range(words):
                row[k] = i
        cuda.syncwarp(mask)  # every lane of the warp wrote its block
        if p != 0:
            row = gdn.array(p, words, np.uint64)
            for k in range(words):
                if row[k] != i:
                    cuda.atomic.add(bad, 0, 1)  # another lane's block overlaps this one
        gdn.warp_tidy_up(wh, h, mask)  # everything but the header back
        q = gdn.warp_alloc(wh, h, mask, 64)  # and the warp allocates again
        if q == 0:
            cuda.atomic.add(bad, 1, 1)
        gdn.warp_end(wh, h)  # each started lane once
    else:
        addresses[i] = 0


def test_warp_heap_collectives():
    threads = 4096
    words = (np.arange(32) * 37 % 61 + 1).astype(np.int64)  # 8 .. 488 bytes per lane
    with gpudyn.WarpHeap() as wh:
        addresses = cuda.device_array(threads, np.uint64)
        bad = cuda.to_device(np.zeros(2, np.uint64))
        warp_blocks[threads // 128, 128](wh.view_arg(), cuda.to_device(words), addresses, bad)
        a = addresses.copy_to_host()
        lane = np.arange(threads) % 32
        started = lane % 3 != 2
        assert (a[started] != 0).all() and (a[~started] == 0).all()
        for w in range(threads // 32):  # a warp's blocks are live together (ended warps' are reused)
            s = slice(w * 32, (w + 1) * 32)
            check_disjoint(a[s][started[s]], words[lane[s][started[s]]] * 8)
        assert (bad.copy_to_host() == 0).all()
        stats = wh.stats()
        # every warp ended: headers and memory back, nothing failed, no misuse
        assert stats["headers"] == 0 and stats["bytes_reserved"] == 0, stats
        assert stats["failed_allocations"] == 0 and stats["misuse"] == 0, stats


@cuda.jit
def warp_exhaust(wh, rounds, nbytes, addresses, start_failed, bad):
    i = cuda.grid(1)
    mask = cuda.activemask()
    h = gdn.warp_start(wh, mask)
    if h == 0:
        start_failed[i] = True
        return
    for r in range(rounds):  # no tidy_up: the warp's blocks pile up
        p = gdn.warp_alloc(wh, h, mask, nbytes)
        addresses[r, i] = p
        if p != 0:
            gdn.array(p, 1, np.uint64)[0] = r * 100_000 + i
    for r in range(rounds):  # every block still holds what its lane wrote
        if addresses[r, i] != 0 and gdn.array(addresses[r, i], 1, np.uint64)[0] != r * 100_000 + i:
            cuda.atomic.add(bad, 0, 1)
    gdn.warp_end(wh, h)


def test_warp_heap_exhaustion():
    # A 2 MiB arena (a quarter header slots, the rest 32 KiB superblocks); each
    # warp asks 16 x 32 x 4 KiB = 2 MiB: even one warp alone runs out.
    threads, rounds, nbytes = 256, 16, 4096
    with gpudyn.WarpHeap(arena_bytes=2 << 20) as wh:
        addresses = cuda.to_device(np.zeros((rounds, threads), np.uint64))
        start_failed = cuda.to_device(np.zeros(threads, np.bool_))
        bad = cuda.to_device(np.zeros(1, np.uint64))
        warp_exhaust[threads // 64, 64](wh.view_arg(), rounds, nbytes, addresses, start_failed, bad)
        a, sf = addresses.copy_to_host(), start_failed.copy_to_host()
        started = ~sf
        got = a[:, started]
        assert started.any() and 0 < (got != 0).sum() < got.size
        for w in range(threads // 32):  # a warp's blocks are all live at once
            blocks = a[:, w * 32 : (w + 1) * 32]
            check_disjoint(blocks[blocks != 0], np.full((blocks != 0).sum(), nbytes))
        assert bad.copy_to_host()[0] == 0, "a block was overwritten"
        stats = wh.stats()
        # lanes refused: each failed alloc, and each lane of a warp whose start failed
        assert stats["failed_allocations"] == int((got == 0).sum() + sf.sum()), stats
        assert stats["headers"] == 0 and stats["bytes_reserved"] == 0, stats  # every started warp ended
        failed = stats["failed_allocations"]
        with pytest.raises(gpudyn.OutOfMemoryError, match=rf"\b{failed} lane\(s\) got NULL"):
            wh.check()
        wh.check()  # reported once
        assert wh.stats()["failed_allocations"] == failed


# ---- arrays -------------------------------------------------------------------------------------
@cuda.jit
def emit(out, n, ok):
    t = cuda.grid(1)
    if t < n:
        good = True
        for j in range(t % 4):  # 0 .. 3 values: lanes leave the loop apart
            good = gdn.push_back(out, t * 4 + j) and good
        ok[t] = good


def expected_values(n, dtype):
    t = np.arange(n)
    return np.sort(np.concatenate([(t[t % 4 > j] * 4 + j) for j in range(3)]).astype(dtype))


def _arrays(dtype, n):
    cap = 2 * n
    return {
        "GGArray": lambda: gpudyn.GGArray(dtype),
        "StaticArray": lambda: gpudyn.StaticArray(cap, dtype),
        "VmmArray": lambda: gpudyn.VmmArray(dtype, initial_capacity=cap, max_capacity=cap),
    }


@pytest.mark.parametrize("kind", ["GGArray", "StaticArray", "VmmArray"])
@pytest.mark.parametrize(
    "dtype",
    [np.int32, np.int64, np.uint32, np.uint64, np.float32, np.float64, np.int8, np.complex128],
    ids=lambda d: np.dtype(d).name,
)
def test_push_back_variable_counts(kind, dtype):
    n = 3000 if np.dtype(dtype).itemsize > 1 else 30  # int8: values up to 118
    with _arrays(dtype, n)[kind]() as arr:
        ok = cuda.device_array(n, np.bool_)
        emit[(n + 127) // 128, 128](arr.view_arg(), n, ok)
        assert ok.copy_to_host().all()
        assert len(arr) == len(expected_values(n, dtype))
        np.testing.assert_array_equal(np.sort(arr.to_numpy()), expected_values(n, dtype))


@cuda.jit
def count_size(arr, out):
    if cuda.grid(1) == 0:
        out[0] = gdn.size(arr)


@cuda.jit
def emit_extend(out, n, ok):
    t = cuda.grid(1)
    if t < n:
        vals = cuda.local.array(8, np.int64)
        for j in range(8):
            vals[j] = t * 8 + j
        ok[t] = gdn.extend(out, vals, t % 9 if t % 9 < 8 else 0)


@pytest.mark.parametrize("kind", ["GGArray", "StaticArray", "VmmArray"])
def test_extend_and_device_size(kind):
    n = 5000
    with _arrays(np.int64, 8 * n)[kind]() as arr:
        ok = cuda.device_array(n, np.bool_)
        emit_extend[(n + 127) // 128, 128](arr.view_arg(), n, ok)
        assert ok.copy_to_host().all()
        t = np.arange(n)
        k = np.where(t % 9 < 8, t % 9, 0)
        want = np.sort(np.concatenate([t[k > j] * 8 + j for j in range(8)]))
        np.testing.assert_array_equal(np.sort(arr.to_numpy()), want)
        size = cuda.device_array(1, np.uint64)
        count_size[1, 32](arr.view_arg(), size)
        assert size.copy_to_host()[0] == len(want)


@cuda.jit
def extend_n(out, n, counts, ok):
    t = cuda.grid(1)
    if t < n:
        vals = cuda.local.array(4, np.int64)
        for j in range(4):
            vals[j] = t * 4 + j
        ok[t] = gdn.extend(out, vals, counts[t])


_BAD_COUNTS = {
    np.int64: [-1, 5, 1 << 32, (1 << 32) + 2, -(1 << 40)],
    np.uint64: [5, 1 << 32, (1 << 32) + 2, 1 << 63, (1 << 64) - 1],
    np.int32: [-1, 5, (1 << 31) - 1, -(1 << 31)],
}


@pytest.mark.parametrize("count_dtype", list(_BAD_COUNTS))
def test_extend_with_n_outside_the_values_stores_nothing_for_that_thread(count_dtype):
    # n < 0, n > len(values) and n >= 2**32 must neither read past the values
    # nor reserve room: that thread gets False, the others store theirs.
    n, bad = 2048, _BAD_COUNTS[count_dtype]
    counts = [bad[i % len(bad)] if i % 3 == 0 else i % 5 for i in range(n)]
    valid = np.array([0 <= c <= 4 for c in counts])
    t = np.arange(n)
    k = np.where(valid, [c if 0 <= c <= 4 else 0 for c in counts], 0)
    with gpudyn.GGArray(np.int64) as arr:
        ok = cuda.device_array(n, np.bool_)
        extend_n[n // 128, 128](arr.view_arg(), n, cuda.to_device(np.array(counts, dtype=count_dtype)), ok)
        np.testing.assert_array_equal(ok.copy_to_host(), valid)
        want = np.sort(np.concatenate([t[k > j] * 4 + j for j in range(4)]))
        np.testing.assert_array_equal(np.sort(arr.to_numpy()), want)
        assert arr.status == 0  # a refused n is not an out-of-memory


@cuda.jit
def push_ids(out, ok):
    t = cuda.grid(1)
    ok[t] = gdn.push_back(out, t)


@pytest.mark.parametrize("kind", ["StaticArray", "VmmArray"])
def test_push_back_into_a_full_array(kind):
    cap, threads = 1000, 4096
    make = {
        "StaticArray": lambda: gpudyn.StaticArray(cap, np.int64),
        "VmmArray": lambda: gpudyn.VmmArray(np.int64, initial_capacity=cap, max_capacity=cap),
    }[kind]
    with make() as arr:
        cap = arr.capacity  # the VMM array maps whole granules: maybe more
        ok = cuda.device_array(threads, np.bool_)
        push_ids[threads // 256, 256](arr.view_arg(), ok)
        k = ok.copy_to_host()
        assert 0 < k.sum() <= cap and not k.all()
        assert arr.status & arr.STATUS_CAPACITY_EXCEEDED
        with pytest.raises(gpudyn.OutOfMemoryError):  # the next host call reports it (once)
            len(arr)
        # Exactly the values whose push returned True are stored, each once.
        np.testing.assert_array_equal(np.sort(arr.to_numpy()), np.flatnonzero(k))


# ---- several structures in one kernel -------------------------------------------------------------
@cuda.jit
def several(heap, pages, out, n, rows):
    i = cuda.grid(1)
    if i >= n or i % 5 == 0:
        return
    p = gdn.malloc(heap, 32)
    page = gdn.get_page(pages)
    if p != 0 and page != gdn.INVALID_PAGE:
        gdn.array(p, 4, np.uint64)[0] = i
        gdn.array(gdn.page_address(pages, page), 1, np.uint64)[0] = i * 3
        gdn.push_back(out, i)
        rows[i, 0] = p
        rows[i, 1] = page


@cuda.jit
def several_back(heap, pages, n, rows, seen):
    i = cuda.grid(1)
    if i >= n or rows[i, 0] == 0:
        return
    seen[i] = gdn.array(rows[i, 0], 4, np.uint64)[0] + gdn.array(gdn.page_address(pages, rows[i, 1]), 1, np.uint64)[0]
    gdn.free(heap, rows[i, 0])
    gdn.free_page(pages, rows[i, 1])


def test_several_structures_in_one_kernel():
    n = 10_000
    with (
        gpudyn.Heap(initial_bytes=64 << 20) as heap,
        gpudyn.RWHeap(page_count=1 << 14) as pages,
        gpudyn.GGArray(np.int64) as out,
    ):
        rows = cuda.to_device(np.zeros((n, 2), np.uint64))
        several[(n + 255) // 256, 256](heap.view_arg(), pages.view_arg(), out.view_arg(), n, rows)
        i = np.arange(n)
        kept = i[i % 5 != 0]
        np.testing.assert_array_equal(np.sort(out.to_numpy()), kept)
        seen = cuda.to_device(np.zeros(n, np.uint64))
        several_back[(n + 255) // 256, 256](heap.view_arg(), pages.view_arg(), n, rows, seen)
        np.testing.assert_array_equal(seen.copy_to_host()[kept], 4 * kept)
        assert heap.stats()["allocations"] == 0 and pages.free_page_count == 1 << 14


# ---- link modes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", _link.MODES)
def test_link_mode_runs(mode):
    have, built = _link.nvjitlink_version(), _link._major_minor(gdn.build_info()["cuda_version"])
    if mode == "ltoir" and (have is None or have[0] != built[0] or have < built):
        pytest.skip(f"LTO-IR needs nvJitLink {built[0]}.x >= {built}; numba-cuda has {have}")
    script = textwrap.dedent("""
        import numpy as np
        from numba import cuda
        import gpudyn, gpudyn.numba as gdn

        @cuda.jit
        def k(out, n):
            t = cuda.grid(1)
            if t < n and t % 2 == 1:
                gdn.push_back(out, t)

        with gpudyn.GGArray(np.int32) as a:
            k[4, 256](a.view_arg(), 1000)
            assert (np.sort(a.to_numpy()) == np.arange(1, 1000, 2)).all()
        print(gdn.link_file())
    """)
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GPUDYN_NUMBA_LINK": mode},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("." + mode)


def test_bench_numba_quick_verifies_every_output(tmp_path):
    """`gpudyn bench numba --quick`: every variant's output matches the host's count,
    sum and sum of squares, and no push failed."""
    pytest.importorskip("cupy", reason="gpudyn bench numba needs CuPy")
    import json

    r = subprocess.run(
        [sys.executable, "-m", "gpudyn", "bench", "numba", "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads((tmp_path / "numba.json").read_text())
    assert [row["mean"] for row in rec["rows"]] == [0.01, 1.0, 8.0]
    for row, chk in zip(rec["rows"], rec["checks"]):
        assert row["verified"], chk
        variants = {f"{who}_{k}_ok" for who in ("numba", "cpp", "numba_e2e") for k in ("push_back", "extend")}
        assert variants | {"two_pass_ok"} <= set(chk) and all(chk[v] for v in variants), chk
        assert chk["push_failures"] == 0, chk
        assert min(row["numba_ms"], row["cpp_ms"], row["numba_ms_extend"], row["cpp_ms_extend"], row["two_pass_ms"]) > 0
        assert row["e2e_kernel"] in ("push_back", "extend")
    names = [t["name"] for t in rec["targets"]]
    assert all("Numba" in name for name in names) and len(names) == 9
