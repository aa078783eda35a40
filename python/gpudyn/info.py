"""Device and CUDA version information."""
from __future__ import annotations

import numpy as np

from . import _args
from ._ffi import check, ffi, lib


def cuda_versions() -> dict:
    """{'runtime': 13000, 'driver': 13000 or 0 without a driver}; needs no GPU."""
    rt = ffi.new("int32_t*")
    drv = ffi.new("int32_t*")
    check(lib.gpudyn_get_cuda_versions(rt, drv))
    return {"runtime": int(rt[0]), "driver": int(drv[0])}


def device_count() -> int:
    """Number of CUDA devices; raises NoDeviceError when there is none, its
    message naming the cause: no NVIDIA driver, a driver too old for this
    library's CUDA runtime (both versions), or no device."""
    n = ffi.new("int32_t*")
    check(lib.gpudyn_get_device_count(n))
    return int(n[0])


def device_info(device: int = 0) -> dict:
    """Name, compute capability, SMs, memory, versions of `device`, an integer
    ordinal 0 <= device < device_count() (floats and bools: TypeError; out of
    range: InvalidArgumentError)."""
    if isinstance(device, (float, np.floating)):  # an ordinal, not a count: 1.0 is refused too
        raise TypeError(f"gpudyn: device_info argument 'device' is {device!r}, expected an integer device ordinal")
    device = _args.integer("device_info", "device", device, 0, (1 << 31) - 1)
    info = ffi.new("gpudyn_device_info_t*")
    info.struct_size = ffi.sizeof("gpudyn_device_info_t")
    check(lib.gpudyn_get_device_info(device, info))
    return {
        "device": int(info.device),
        "name": ffi.string(info.name).decode(),
        "compute_capability": (int(info.compute_capability_major), int(info.compute_capability_minor)),
        "multiprocessor_count": int(info.multiprocessor_count),
        "warp_size": int(info.warp_size),
        "total_memory": int(info.total_memory),
        "free_memory": int(info.free_memory),
        "l2_cache_bytes": int(info.l2_cache_bytes),
        "runtime_version": int(info.runtime_version),
        "driver_version": int(info.driver_version),
        "vmm_supported": bool(info.vmm_supported),
    }


def trim(device: int | None = None) -> int:
    """Gives back to the driver the device memory gpudyn keeps for reuse on
    `device` (None: the current device): memory that GGArrays' growth arenas
    gave back (:meth:`GGArray.trim`, :meth:`GGArray.close`) and take again when
    they grow.  The library also gives such memory back by itself once it has
    been unused for a second.  Returns the bytes given back; no wait."""
    if device is None:
        d = ffi.new("int32_t*")
        check(lib.gpudyn_get_device(d))
        device = int(d[0])
    if isinstance(device, (float, np.floating)):
        raise TypeError(f"gpudyn: trim argument 'device' is {device!r}, expected an integer device ordinal")
    device = _args.integer("trim", "device", device, 0, (1 << 31) - 1)
    out = ffi.new("uint64_t*")
    check(lib.gpudyn_trim(device, out))
    return int(out[0])
