"""Memory follows the output (issue 40, item 1): a default GGArray takes what a
kernel pushes with no size named, holds about its elements' bytes between
launches, keeps its buckets over clear() and gives them back with trim().
GPU tests; the host checks of gpudyn.trim's argument run everywhere."""

import gpudyn
import numpy as np
import pytest

MiB = 1 << 20


def test_trim_argument_is_checked():
    with pytest.raises(TypeError):
        gpudyn.trim(1.0)
    with pytest.raises((ValueError, gpudyn.InvalidArgumentError, gpudyn.NoDeviceError)):
        gpudyn.trim(-1)


def _push_kernel():
    numba_cuda = pytest.importorskip("numba.cuda")
    gdn = pytest.importorskip("gpudyn.numba")

    @numba_cuda.jit
    def push_range(out, n, failed):
        i = numba_cuda.grid(1)
        stride = numba_cuda.gridsize(1)
        while i < n:
            if not gdn.push_back(out, np.int32(i)):
                numba_cuda.atomic.add(failed, 0, 1)
            i += stride

    return push_range


@pytest.mark.gpu
def test_default_array_takes_3_gb_from_one_kernel():
    cp = pytest.importorskip("cupy")
    push_range = _push_kernel()
    n = 800_000_000  # 3.2 GB of int32 (issue 40: a default array receives 3.2 GB from one kernel)
    failed = cp.zeros(1, dtype=np.int64)
    with gpudyn.GGArray(np.int32) as a:  # every default: no budget named
        push_range[132 * 8, 256](a.view_arg(), n, failed)
        assert int(failed[0]) == 0
        assert len(a) == n
        stats = a.stats()
        first_buckets = 512 * 1024 * 4
        assert n * 4 <= stats["allocated_bytes"] <= 2 * n * 4 + first_buckets + 2 * MiB
        flat = cp.asarray(a.flatten())
        assert int(flat.min()) == 0 and int(flat.max()) == n - 1
        assert int(cp.count_nonzero(cp.bincount(flat, minlength=n) != 1)) == 0  # each value once
        del flat


@pytest.mark.gpu
def test_clear_keeps_buckets_and_trim_gives_them_back():
    cp = pytest.importorskip("cupy")
    push_range = _push_kernel()
    n = 1 << 22  # 16 MiB of int32
    failed = cp.zeros(1, dtype=np.int64)
    with gpudyn.GGArray(np.int32) as a:
        assert a.stats()["allocated_bytes"] == 0  # nothing taken up front
        push_range[132 * 8, 256](a.view_arg(), n, failed)
        held = a.stats()["allocated_bytes"]
        assert n * 4 <= held <= 2 * n * 4 + 512 * 1024 * 4 + 2 * MiB
        for _ in range(3):  # produce, clear, repeat: no new memory
            a.clear()
            push_range[132 * 8, 256](a.view_arg(), n, failed)
            assert a.stats()["allocated_bytes"] == held
        assert len(a) == n and int(failed[0]) == 0
        a.clear()
        a.trim()
        assert a.stats()["allocated_bytes"] == 0 and a.capacity == 0
        gpudyn.trim()
        push_range[132 * 8, 256](a.view_arg(), n, failed)  # grows again
        assert len(a) == n and int(failed[0]) == 0
        assert np.array_equal(np.sort(a.to_numpy()), np.arange(n, dtype=np.int32))


@pytest.mark.gpu
def test_array_made_per_launch_adopts_the_last_arena_and_holds_only_its_own():
    """A destroyed array's arena stays mapped for the next array of the device
    (so a kernel into an array made per launch need not wait for mappings);
    the new array keeps what its own buckets take and gives the rest back at
    its first call that waits, and a larger output grows past what it adopted."""
    cp = pytest.importorskip("cupy")
    push_range = _push_kernel()
    failed = cp.zeros(1, dtype=np.int64)
    first_buckets = 512 * 1024 * 4
    for n in (1 << 24, 1 << 24, 1 << 18, 1 << 25, 3):  # same, smaller, larger, tiny
        a = gpudyn.GGArray(np.int32)
        push_range[132 * 8, 256](a.view_arg(), n, failed)
        assert len(a) == n and int(failed[0]) == 0
        held = a.stats()["allocated_bytes"]
        assert held <= 2 * n * 4 + first_buckets + 2 * MiB, (n, held)  # not the last array's arena
        out = cp.asarray(a.flatten())
        assert int(cp.count_nonzero(cp.bincount(out, minlength=n) != 1)) == 0  # each value once
        assert int(out.max()) == n - 1
        del out
        a.close()
    gpudyn.trim()  # the parked arena and the reserve go back to the driver


@pytest.mark.gpu
def test_adopted_arena_is_given_back_by_clear_when_the_stream_is_idle():
    cp = pytest.importorskip("cupy")
    push_range = _push_kernel()
    failed = cp.zeros(1, dtype=np.int64)
    big, small = 1 << 25, 1 << 16
    with gpudyn.GGArray(np.int32) as a:
        push_range[132 * 8, 256](a.view_arg(), big, failed)
        assert len(a) == big
    with gpudyn.GGArray(np.int32) as b:
        push_range[132 * 8, 256](b.view_arg(), small, failed)
        cp.cuda.Device().synchronize()
        b.clear()  # its stream is idle: the adopted memory beyond its buckets goes back
        assert b.stats()["allocated_bytes"] <= 2 * small * 4 + 512 * 1024 * 4 + 2 * MiB
        # Past what it kept, the kernel asks for mappings again (none is assumed left).
        push_range[132 * 8, 256](b.view_arg(), big, failed)
        assert len(b) == big and int(failed[0]) == 0
        out = cp.asarray(b.flatten())
        assert int(cp.count_nonzero(cp.bincount(out, minlength=big) != 1)) == 0
    gpudyn.trim()
