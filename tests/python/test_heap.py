"""Heap (gpudyn's device allocator) from Python, and the driver of its benchmark.

Host tests: argument errors (checked before any device call) and the benchmark
driver's targets (issue 42's) from hand-made raw results.  GPU tests: pointers aligned,
disjoint and holding what was written; 2^k sizes 2^k-aligned; double, foreign
and interior frees counted and harmless; exhaustion raises OutOfMemoryError and
keeps every allocation; freed small blocks serve one large block; grow between
calls; reset; two heaps side by side."""

import json
import subprocess
import sys

import gpudyn
import numpy as np
import pytest
from gpudyn import DeviceBuffer, _ffi
from gpudyn.heap import Heap

MiB = 1 << 20


# ---- argument errors (no GPU needed) -------------------------------------------
@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"initial_bytes": -1}, "initial_bytes"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"page_size": "64K"}, "page_size"),
        ({"initial_bytes": 1.5}, "initial_bytes"),
        ({"page_size": True}, "page_size"),
    ],
)
def test_options_are_checked_before_any_device_call(kwargs, name):
    # ValueError for a value out of range, TypeError for a str or bool (as every class does)
    with pytest.raises((ValueError, TypeError), match=f"Heap argument '{name}'"):
        Heap(**kwargs)


def test_stream_argument_is_checked():
    with pytest.raises(TypeError, match="stream"):
        Heap(initial_bytes=4 * MiB, stream=object())


def _unopened():
    """A Heap that never got a handle: argument checks run, device calls refuse."""
    return Heap.__new__(Heap)


@pytest.mark.parametrize(
    "sizes, exc, match",
    [
        ([16, -1], ValueError, "'sizes' holds -1"),
        ([1.5, 16], TypeError, "'sizes' has dtype float64"),
        (np.array([16], dtype=np.float32), TypeError, "'sizes'"),
    ],
)
def test_malloc_sizes_are_checked(sizes, exc, match):
    with pytest.raises(exc, match=match):
        _unopened().malloc(sizes)


@pytest.mark.parametrize(
    "pointers, exc, match",
    [
        ([16, -5], ValueError, "'pointers' holds -5"),
        (["a"], TypeError, "'pointers' has dtype"),
        (np.array([1.0]), TypeError, "'pointers' has dtype float64"),
    ],
)
def test_free_pointers_are_checked(pointers, exc, match):
    with pytest.raises(exc, match=match):
        _unopened().free(pointers)


def test_unopened_heap_refuses_device_calls():
    with pytest.raises(ValueError, match="Heap is closed"):
        _unopened().malloc([16])
    with pytest.raises(ValueError, match="Heap is closed"):
        _unopened().stats()
    with pytest.raises(ValueError, match="Heap is closed"):
        _unopened().check()
    assert repr(_unopened()) == "Heap(closed)"


# ---- the benchmark driver (no GPU: a hand-made raw result) ------------------------
def _row(allocator, mode, n, s, alloc_ms, free_ms=0.01, **kw):
    r = {
        "kind": "matrix",
        "allocator": allocator,
        "mode": mode,
        "n": n,
        "s": s,
        "bytes_live": 1000,
        "alloc_ms": alloc_ms,
        "free_ms": free_ms,
        "alloc_free_ms": alloc_ms + free_ms,
        "bytes_held": 1100,
    }
    r.update(kw)
    return r


def test_bench_driver_targets(tmp_path):
    from gpudyn.bench import available, heap
    from gpudyn.bench._common import Context

    assert "heap" in available()  # `gpudyn bench` runs it, `gpudyn bench heap` alone
    n, m = 1 << 20, 1 << 10
    rows = []
    for s, ms in (("16", 0.04), ("256", 0.06), ("4096", 0.1), ("mixed", 0.2)):
        rows += [
            _row("heap", "converged", n, s, ms),
            _row("heap", "divergent", n, s, 2 * ms),
            _row("cuda_malloc", "converged", n, s, 500.0),
            _row("cuda_malloc", "divergent", n, s, 900.0),
            _row("heap", "converged", m, s, 0.005, free_ms=0.004),
            _row("heap", "divergent", m, s, 0.006),
            _row("cuda_malloc", "converged", m, s, 2.0),
            _row("cuda_malloc", "divergent", m, s, 3.0),
        ]
    rows[0]["free_ms"] = 0.05  # the worst free: 1M x 16 B
    rows[-1] = {
        "kind": "matrix",
        "allocator": "cuda_malloc",
        "mode": "divergent",
        "n": m,
        "s": "mixed",
        "bytes_live": 1000,
        "skipped": True,
        "reason": "time budget of 200 s spent",
    }
    # A crashed baseline point (the child process died): even with a time in it, it
    # must not count (0.001 ms would be the worst speedup by far).
    assert rows[11]["allocator"] == "cuda_malloc" and (rows[11]["n"], rows[11]["s"]) == (n, "256")
    rows[11].update(
        crashed=True,
        alloc_ms=0.001,
        error="heap_bench.cu:405: cudaEventSynchronize(ev1): an illegal memory access (exit status 1)",
    )
    rows.append({"kind": "churn", "n": n, "s": "64", "rounds": 10, "held_over_live": 1.3})
    rows.append({"kind": "churn", "n": n, "s": "16", "rounds": 10, "held_over_live": 1.1})
    rows.append({"kind": "exhaustion", "s": "8192", "usable_fraction": 0.95, "heap_bytes_mapped": 1 << 30})
    rows.append(
        {"kind": "exhaustion", "s": "mixed", "usable_fraction": 0.85, "heap_bytes_mapped": 1 << 30, "overlaps": 2}
    )
    rows.append({"kind": "largest", "bytes": 3 << 30, "heap_bytes_mapped": 16 << 30})
    for nn in (n, m):  # floors: no allocator, no verification fields
        for op, conv_ms, div_ms in (("empty", 0.002, 0.01), ("bump", 0.003, 0.03 if nn == n else 0.012)):
            rows += [
                {"kind": "floor", "allocator": "floor", "op": op, "mode": mode, "n": nn, "alloc_ms": v}
                for mode, v in (("converged", conv_ms), ("divergent", div_ms))
            ]

    ctx = Context("heap", str(tmp_path), True, {"name": "test"})
    ctx.run_program = lambda program, args=None: {"rows": rows}
    ctx.pyplot = lambda: None
    result = heap.run(ctx)
    json.dumps(result, allow_nan=False)  # the result file stays strict JSON
    t = {x["name"]: x for x in ctx.targets}
    # issue 42's targets only: none that no allocator can reach
    assert not any("divergent / converged" in k for k in t) and all(x["goal"] < 1000 for x in ctx.targets)
    assert "heap malloc 1M x 16 B converged (ms)" not in t  # 1M: 4096 and mixed only
    assert t["heap malloc 1M x 4096 B converged (ms)"]["met"] is False  # 0.1 > 0.08
    mixed = t["heap malloc 1M x mixed 16-4096 B converged (ms)"]
    assert mixed["value"] == pytest.approx(0.2) and mixed["met"] is True  # goal 0.28
    for s in ("16 B", "256 B", "4096 B", "mixed 16-4096 B"):  # no 64K rows here
        m64 = t[f"heap malloc 64K x {s} converged (ms)"]
        assert m64["value"] == -1.0 and m64["met"] is False and m64["where"] == "not measured"
    div = t["heap malloc 1M threads divergent, worst S (ms)"]
    assert div["value"] == pytest.approx(0.4) and div["where"] == "mixed 16-4096 B" and div["met"] is True
    # one uncontended atomic per divergent call at 1M: 0.03 ms
    assert div["floor_divergent_ms"] == pytest.approx(0.03)
    assert "one uncontended atomic per divergent call takes 0.03 ms there" in result["table"]
    free = t["heap free 1M threads converged, worst S (ms)"]
    assert free["value"] == pytest.approx(0.05) and free["where"] == "16 B" and free["met"] is False
    # worst speedup: 1K x 16 B converged, 2.0 / 0.005 = 400 (the skipped point does not count)
    speed = t["heap speedup over CUDA malloc, worst measured point of the matrix"]
    assert speed["value"] == pytest.approx(400) and speed["where"].startswith("1K x 16 B, converged")
    assert speed["where"].endswith("CUDA malloc points: 14 measured, 1 skipped, 1 crashed")
    assert (speed["measured"], speed["skipped"], speed["crashed"]) == (14, 1, 1)
    # an empty 1K converged kernel (0.002 ms) against CUDA malloc's 2.0 ms there
    assert speed["floor_empty_kernel_ms"] == pytest.approx(0.002) and speed["floor_speedup"] == pytest.approx(1000)
    assert result["verification"]["heap"]["nulls"] == 0  # floor rows add nothing to the checks
    points = result["cuda_malloc_points"]
    assert points["crashed_points"] == [{"point": "1M x 256 B, divergent", "error": rows[11]["error"]}]
    assert points["skipped_points"] == [
        {"point": "1K x mixed 16-4096 B, divergent", "reason": "time budget of 200 s spent"}
    ]
    assert "CUDA malloc crashed at 1M x 256 B, divergent: heap_bench.cu:405" in result["table"]
    churn = t["heap bytes held / bytes live after churn, worst S"]
    assert churn["value"] == pytest.approx(1.3) and churn["where"].startswith("1M x 64 B") and not churn["met"]
    usable = t["heap usable fraction at exhaustion, mixed 16-4096 B"]
    assert usable["value"] == pytest.approx(0.85) and usable["met"] is False  # goal 0.95
    assert t["heap usable fraction at exhaustion, 4096 B"]["value"] == -1.0  # no 4 KiB row here
    free_all = t["heap largest allocation after free-all of small blocks / a fresh heap's"]
    assert free_all["value"] == -1.0 and free_all["met"] is False and "not measured" in free_all["where"]
    assert t["heap largest single allocation (GiB)"]["value"] == pytest.approx(3.0)
    assert result["verification"]["heap"]["overlaps"] == 2
    assert result["verification"]["cuda_malloc"]["overlaps"] == 0


def test_bench_driver_targets_at_64k_and_after_free_all(tmp_path):
    from gpudyn.bench import heap
    from gpudyn.bench._common import Context

    rows = []
    for n, conv in ((1 << 16, 0.007), (1 << 20, 0.07)):
        for s in ("16", "256", "4096", "mixed"):
            rows += [_row("heap", "converged", n, s, conv, free_ms=0.02), _row("heap", "divergent", n, s, 0.5)]
    rows.append({"kind": "exhaustion", "s": "4096", "usable_fraction": 0.99, "heap_bytes_mapped": 1 << 30})
    rows.append(
        {"kind": "free_all", "n": 1 << 20, "s": "16", "largest_bytes": 15 * MiB, "fresh_largest_bytes": 16 * MiB}
    )
    ctx = Context("heap", str(tmp_path), True, {"name": "test"})
    ctx.run_program = lambda program, args=None: {"rows": rows}
    ctx.pyplot = lambda: None
    heap.run(ctx)
    t = {x["name"]: x for x in ctx.targets}
    # 0.007 ms at 64K meets 0.008 / 0.009 / 0.009 / 0.023
    assert all(
        t[f"heap malloc 64K x {s} converged (ms)"]["met"] for s in ("16 B", "256 B", "4096 B", "mixed 16-4096 B")
    )
    assert t["heap malloc 1M x 4096 B converged (ms)"]["met"]  # 0.07 <= 0.08
    assert not t["heap malloc 1M threads divergent, worst S (ms)"]["met"]  # 0.5 > 0.45
    assert t["heap free 1M threads converged, worst S (ms)"]["met"]  # 0.02 <= 0.025
    assert t["heap usable fraction at exhaustion, 4096 B"]["met"]  # 0.99 >= 0.98
    f = t["heap largest allocation after free-all of small blocks / a fresh heap's"]
    assert f["value"] == pytest.approx(15 / 16) and f["met"] and f["where"] == "after 1M x 16 B"
    # no CUDA malloc point measured: no speedup target
    assert "heap speedup over CUDA malloc, worst measured point of the matrix" not in t


# ---- GPU ------------------------------------------------------------------------
def _bytes_at(address: int, nbytes: int, owner) -> DeviceBuffer:
    """A non-owning uint8 view of device memory at `address`."""
    return DeviceBuffer._wrap(address, (nbytes,), np.uint8, owner)


def _assert_disjoint(ptrs, sizes):
    live = ptrs != 0
    order = np.argsort(ptrs[live])
    p, s = ptrs[live][order], sizes[live][order]
    assert (p[:-1] + s[:-1] <= p[1:]).all(), "two live ranges overlap"


@pytest.mark.gpu
def test_malloc_free_roundtrip():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 9000, 20_000).astype(np.uint64)
    sizes[::97] = 0
    with Heap(initial_bytes=512 * MiB) as heap:
        assert heap.device == gpudyn.buffer.current_device()
        ptrs = heap.malloc(sizes).to_numpy()
        assert ((ptrs == 0) == (sizes == 0)).all(), "null exactly where the size is 0"
        assert (ptrs % 16 == 0).all()
        _assert_disjoint(ptrs, sizes)
        st = heap.stats()
        assert st["allocations"] == int((sizes > 0).sum())
        assert st["bytes_allocated"] >= int(sizes.sum())
        assert st["bytes_held"] >= st["bytes_allocated"] and st["bytes_mapped"] >= 512 * MiB
        assert st["failed_allocations"] == 0 and st["bad_frees"] == 0
        heap.free(ptrs)
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_allocated"] == 0 and st["bad_frees"] == 0


@pytest.mark.gpu
def test_data_written_reads_back():
    sizes = np.array([16, 17, 100, 4096, 5000, 64 * 1024, 300_000, 3 * MiB], dtype=np.uint64)
    with Heap(initial_bytes=64 * MiB) as heap:
        ptrs = heap.malloc(np.tile(sizes, 4)).to_numpy()
        data = [
            np.random.default_rng(i).integers(0, 256, int(s), dtype=np.uint8) for i, s in enumerate(np.tile(sizes, 4))
        ]
        for p, d in zip(ptrs, data):
            _bytes_at(int(p), d.size, heap).copy_from_host(d)
        for p, d in zip(ptrs, data):  # every block still holds its own bytes: nothing overlapped
            assert np.array_equal(_bytes_at(int(p), d.size, heap).to_numpy(), d)
        heap.free(ptrs)


@pytest.mark.gpu
def test_power_of_two_sizes_are_naturally_aligned():
    with Heap(initial_bytes=64 * MiB) as heap:
        sizes = np.array([2**k for k in range(4, 17)] * 8, dtype=np.uint64)  # 16 B .. 64 KiB (the page size)
        ptrs = heap.malloc(sizes).to_numpy()
        assert (ptrs % sizes == 0).all(), "2^k-sized requests up to the page size are 2^k-aligned"


@pytest.mark.gpu
def test_bad_frees_are_counted_and_change_nothing():
    with Heap(initial_bytes=64 * MiB) as heap, DeviceBuffer(256) as foreign:
        ptrs = heap.malloc([48] * 100 + [200_000] * 4).to_numpy()
        heap.free(ptrs[:50])
        assert heap.stats()["allocations"] == 54
        heap.free(ptrs[:50])  # double frees
        heap.free([foreign.ptr])  # not the heap's
        heap.free(ptrs[50:52] + 16)  # interior pointers of live blocks
        heap.free([int(ptrs[-1]) + 4096])  # interior pointer of a page run
        st = heap.stats()
        assert st["bad_frees"] == 50 + 1 + 2 + 1
        assert st["allocations"] == 54, "a bad free released nothing"
        heap.free(ptrs[50:])  # the live ones still free normally
        st = heap.stats()
        assert st["allocations"] == 0 and st["bad_frees"] == 54
        with pytest.raises(gpudyn.InvalidArgumentError, match=r"\b54 bad free"):
            heap.check()  # raised once; the stats keep counting
        heap.check()
        assert heap.stats()["bad_frees"] == 54
        heap.free(ptrs[:1])
        with pytest.raises(gpudyn.InvalidArgumentError, match=r"\b1 bad free"):
            heap.check()
        heap.clear_status()
        assert heap.stats()["bad_frees"] == 0
        heap.check()


@pytest.mark.gpu
def test_exhaustion_raises_and_keeps_every_allocation():
    with Heap(initial_bytes=16 * MiB, max_bytes=16 * MiB) as heap:
        sizes = np.full(1000, 1024, dtype=np.uint64)
        ptrs = heap.malloc(sizes).to_numpy()
        data = np.arange(1024, dtype=np.uint8)
        for p in ptrs[::100]:
            _bytes_at(int(p), 1024, heap).copy_from_host(data)
        before = heap.stats()
        with pytest.raises(gpudyn.OutOfMemoryError):
            heap.malloc(np.full(64, MiB, dtype=np.uint64))  # 64 MiB into a 16 MiB heap
        after = heap.stats()
        assert after["allocations"] == before["allocations"] == 1000, "the failed call left nothing behind"
        assert after["bytes_allocated"] == before["bytes_allocated"]
        assert after["failed_allocations"] >= 1
        for p in ptrs[::100]:
            assert np.array_equal(_bytes_at(int(p), 1024, heap).to_numpy(), data)
        more = heap.malloc([64 * 1024]).to_numpy()  # the heap still works
        assert more[0] != 0
        with pytest.raises(gpudyn.OutOfMemoryError, match="found no memory since the last check"):
            heap.check()  # bulk calls' failures count too
        heap.check()
        assert heap.stats()["failed_allocations"] == after["failed_allocations"]
        heap.clear_status()
        assert heap.stats()["failed_allocations"] == 0
        heap.check()


@pytest.mark.gpu
@pytest.mark.parametrize("small", [16, 300, "mixed"])
def test_freed_small_blocks_serve_one_large_block(small):
    # A full heap of small blocks, all freed: its empty slabs go back to the page
    # pool when the large request finds no pages, with no clear().
    with Heap(initial_bytes=16 * MiB, max_bytes=16 * MiB) as heap:
        largest = heap.stats()["largest_free_bytes"]
        assert largest >= 8 * MiB
        rng = np.random.default_rng(7)
        n = 2 * 16 * MiB // (2056 if small == "mixed" else small)  # twice what fits
        sizes = rng.integers(16, 4097, n).astype(np.uint64) if small == "mixed" else np.full(n, small, np.uint64)
        ptrs = []
        for chunk in np.array_split(sizes, 32):  # until the heap is full (a failed call keeps nothing)
            try:
                ptrs.append(heap.malloc(chunk).to_numpy())
            except gpudyn.OutOfMemoryError:
                break
        assert heap.stats()["bytes_held"] > 8 * MiB
        for p in ptrs:
            heap.free(p)
        heap.clear_status()
        assert heap.stats()["allocations"] == 0
        big = heap.malloc([largest]).to_numpy()  # the fresh heap's largest block
        assert big[0] != 0
        _bytes_at(int(big[0]), largest, heap).fill_bytes(0xA5)
        assert (_bytes_at(int(big[0]) + largest - MiB, MiB, heap).to_numpy() == 0xA5).all()
        heap.free(big)
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_held"] == 0 and st["bad_frees"] == 0
        again = heap.malloc(np.full(1000, 64, np.uint64)).to_numpy()  # and small blocks again
        assert (again != 0).all()
        _assert_disjoint(again, np.full(1000, 64, np.uint64))


@pytest.mark.gpu
def test_grow_between_calls():
    with Heap(initial_bytes=4 * MiB, max_bytes=64 * MiB) as heap:
        view = bytes(heap.view_arg())
        assert 4 * MiB <= heap.stats()["bytes_mapped"] < 32 * MiB
        with pytest.raises(gpudyn.OutOfMemoryError):
            heap.malloc([32 * MiB])
        try:
            heap.grow(48 * MiB)
        except gpudyn.NotSupportedError:
            pytest.skip("no virtual memory management on this device")
        assert heap.stats()["bytes_mapped"] >= 48 * MiB
        big = heap.malloc([32 * MiB]).to_numpy()
        assert big[0] != 0
        _bytes_at(int(big[0]), 32 * MiB, heap).fill_bytes(0x5A)
        assert (_bytes_at(int(big[0]) + 31 * MiB, MiB, heap).to_numpy() == 0x5A).all()
        assert bytes(heap.view_arg()) == view, "the view stays valid across grow"
        heap.grow(8 * MiB)  # smaller than mapped: changes nothing
        assert heap.stats()["bytes_mapped"] >= 48 * MiB
        with pytest.raises(gpudyn.InvalidArgumentError):
            heap.grow(128 * MiB)  # beyond max_bytes


@pytest.mark.gpu
def test_clear_drops_everything():
    with Heap(initial_bytes=64 * MiB) as heap:
        heap.malloc(np.full(5000, 100, dtype=np.uint64))
        heap.free([12345 * 16])  # a bad free, to be cleared too
        heap.clear()
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_allocated"] == 0 and st["bytes_held"] == 0
        assert st["bad_frees"] == 0 and st["failed_allocations"] == 0
        assert heap.malloc([100]).to_numpy()[0] != 0


@pytest.mark.gpu
def test_two_heaps_side_by_side():
    with Heap(initial_bytes=32 * MiB) as a, Heap(initial_bytes=32 * MiB) as b:
        pa, pb = a.malloc([256] * 64).to_numpy(), b.malloc([256] * 64).to_numpy()
        assert not set(pa) & set(pb)
        b.free(pa[:8])  # a's pointers are foreign to b
        assert b.stats()["bad_frees"] == 8 and a.stats()["allocations"] == 64
        a.free(pa)
        assert a.stats()["allocations"] == 0 and b.stats()["allocations"] == 64


@pytest.mark.gpu
def test_largest_single_allocation_is_at_least_1_gib():
    with Heap(initial_bytes=(1 << 30) + 256 * MiB) as heap:
        p = heap.malloc([1 << 30]).to_numpy()
        assert p[0] != 0 and p[0] % 16 == 0
        assert heap.stats()["bytes_allocated"] >= 1 << 30
        heap.free(p)
        assert heap.stats()["allocations"] == 0


@pytest.mark.gpu
def test_view_and_device_arrays():
    with Heap(initial_bytes=16 * MiB) as heap:
        view = heap.view_arg()
        assert len(bytes(view)) == _ffi.ffi.sizeof("gpudyn_heap_view_t")
        assert view.version == _ffi.lib.GPUDYN_HEAP_VIEW_VERSION
        sizes = DeviceBuffer.from_numpy(np.array([32, 0, 64], dtype=np.uint64))  # sizes already on the device
        ptrs = heap.malloc(sizes)
        assert ptrs.dtype == np.uint64 and ptrs.shape == (3,)
        host = ptrs.to_numpy()
        assert host[0] and not host[1] and host[2]
        heap.free(ptrs)  # device array of pointers
        assert heap.stats()["allocations"] == 0
        assert heap.malloc([]).shape == (0,)
    with pytest.raises(ValueError, match="Heap is closed"):
        heap.malloc([16])


@pytest.mark.gpu
def test_bench_heap_quick_is_clean(tmp_path):
    """`gpudyn bench heap --quick`: every verification of the benchmark passes
    (no null, read-back error, overlap, misalignment, bad free or leak) and every
    target is computed."""
    from gpudyn.bench._common import Context

    try:
        Context("heap", str(tmp_path), True, {}).find_program("gpudyn_bench_heap")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    r = subprocess.run(
        [sys.executable, "-m", "gpudyn", "bench", "heap", "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "heap.json").read_text())
    assert not any(result["verification"]["heap"].values()), result["verification"]
    rows = result["raw"]["rows"]
    heap_rows = [x for x in rows if x["kind"] == "matrix" and x["allocator"] == "heap"]
    assert heap_rows and all(x["alloc_ms"] > 0 and x["bytes_held"] >= x["bytes_live"] for x in heap_rows)
    floors = {(x["op"], x["mode"], x["n"]): x["alloc_ms"] for x in rows if x["kind"] == "floor"}
    assert len(floors) == 4 * len({x["n"] for x in heap_rows}) and all(v > 0 for v in floors.values())
    names = [t["name"] for t in result["targets"]]
    for name in (
        "heap speedup over CUDA malloc, worst measured point of the matrix",
        "heap bytes held / bytes live after churn, worst S",
        "heap usable fraction at exhaustion, 4096 B",
        "heap usable fraction at exhaustion, mixed 16-4096 B",
        "heap largest allocation after free-all of small blocks / a fresh heap's",
        "heap largest single allocation (GiB)",
    ):
        assert name in names
    # Free-all and the phase change ran after every exhaustion, cleanly; the empty
    # slabs went back (the fresh heap's largest block is its whole mapping here).
    by_kind = {k: [x for x in rows if x["kind"] == k] for k in ("exhaustion", "free_all", "phase_change")}
    assert len(by_kind["free_all"]) == len(by_kind["exhaustion"]) == len(by_kind["phase_change"])
    for x in by_kind["free_all"]:
        assert x["fresh_largest_bytes"] > 0 and x["largest_bytes"] >= 0.9 * x["fresh_largest_bytes"], x
    for x in by_kind["phase_change"]:
        assert x["live"] > 0 and 0 < x["usable_fraction"] <= 1.0, x
