"""pytest configuration: the `gpu` marker skips tests (with the reason) when
no CUDA device is usable."""

import pytest


def _no_device_reason():
    try:
        import gpudyn

        gpudyn.device_count()
        return None
    except Exception as exc:  # NoDeviceError, or the library failed to load
        return f"no CUDA device: {exc}"


_REASON = _no_device_reason()

# CUDA's device-malloc heap is process-wide and can only grow before the first
# kernel that calls malloc.  The suite sizes it once, here, before any test runs,
# so the tests that use the CUDA-malloc backing (test_warp_heap.py asks for the
# same size) do not depend on running first.
DEVICE_HEAP_BYTES = 256 << 20
if _REASON is None:
    import gpudyn

    gpudyn.WarpHeap(backing="cuda_malloc", device_heap_bytes=DEVICE_HEAP_BYTES).close()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped with a reason without one)")


def pytest_collection_modifyitems(config, items):
    if _REASON is None:
        return
    skip = pytest.mark.skip(reason=_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
