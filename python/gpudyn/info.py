"""Device and CUDA version information."""

from __future__ import annotations

import numpy as np

from . import _args
from ._ffi import check, ffi, lib


def fmt_cuda_version(v) -> str:
    """13000 -> '13.0'; 0 or None (no driver, unknown) -> 'none'."""
    return f"{v // 1000}.{v % 1000 // 10}" if v else "none"


def _archs(text: str) -> list[str]:
    return [a for a in text.replace(",", " ").split() if a]


def _cc(arch: str) -> str:
    """'86' -> '8.6', '90a' -> '9.0a'."""
    num, suffix = _split_arch(arch)
    return f"{num // 10}.{num % 10}{suffix}"


def _split_arch(arch: str) -> tuple[int, str]:
    """'90a' -> (90, 'a'); '86' -> (86, '')."""
    digits = arch[: len(arch) - len(arch.lstrip("0123456789"))]
    return int(digits or 0), arch[len(digits) :]


def build_archs() -> dict:
    """The architectures the loaded libgpudyn carries: {'sass': ['75', '80', ...], 'ptx':
    '90' or ''} (the build's gpu_archs and gpu_ptx, docs/guides/packaging.md), as the
    library reports them (``gpudyn_get_build_archs``); needs no GPU."""
    try:
        get = lib.gpudyn_get_build_archs
    except AttributeError:  # a library older than the call (GPUDYN_LIBRARY): what the package recorded
        from . import _version

        return {"sass": _archs(getattr(_version, "GPU_ARCHS", "")), "ptx": getattr(_version, "GPU_PTX", "").strip()}
    sass, ptx = ffi.new("const char**"), ffi.new("const char**")
    check(get(sass, ptx))
    return {"sass": _archs(ffi.string(sass[0]).decode()), "ptx": ffi.string(ptx[0]).decode().strip()}


def arch_fit(compute_capability, sass=None, ptx=None) -> str:
    """How a build carrying SASS for `sass` and PTX `ptx` (default: this library's,
    build_archs()) runs on a GPU of `compute_capability` (major, minor): 'sass' (machine
    code for it: sm_XY runs on X.Y' for Y' >= Y, an arch-specific sm_XYa on X.Y only),
    'ptx' (the driver JIT-compiles the PTX, for compute capabilities >= its own) or
    'none' (creating a structure fails with NotSupportedError).  The library decides the
    same way (lib/internal.hpp, arch_fit_of)."""
    if sass is None or ptx is None:
        b = build_archs()
        sass = b["sass"] if sass is None else sass
        ptx = b["ptx"] if ptx is None else ptx
    major, minor = (int(x) for x in compute_capability)
    device = major * 10 + minor
    for a in sass:
        num, suffix = _split_arch(a)
        if num and num // 10 == major and (num == device if suffix == "a" else num % 10 <= minor):
            return "sass"
    if ptx and 0 < _split_arch(ptx)[0] <= device:
        return "ptx"
    return "none"


def built_for(sass=None, ptx=None) -> str:
    """One line saying which GPUs this libgpudyn runs on (`gpudyn info` prints it):
    'built for compute capability 7.5, 8.0, 8.6, 8.9, 9.0 (SASS) and newer GPUs through
    PTX 9.0 (JIT-compiled by the driver)'."""
    if sass is None or ptx is None:
        b = build_archs()
        sass = b["sass"] if sass is None else sass
        ptx = b["ptx"] if ptx is None else ptx
    if not sass and not ptx:
        return "built for: unknown (no architectures recorded)"
    out = "built for compute capability " + (", ".join(_cc(a) for a in sass) + " (SASS)" if sass else "no SASS")
    if ptx:
        return out + f" and newer GPUs through PTX {_cc(ptx)} (JIT-compiled by the driver)"
    return out + " only (no PTX)"


def runs_on(compute_capability, sass=None, ptx=None) -> str:
    """What `gpudyn info` says of a device: 'runs its SASS', 'runs through PTX JIT' or
    'NOT SUPPORTED by this build (...)' with how to build for it."""
    fit = arch_fit(compute_capability, sass, ptx)
    major, minor = (int(x) for x in compute_capability)
    if fit == "sass":
        return "gpudyn: runs (SASS)"
    if fit == "ptx":
        return "gpudyn: runs (PTX, JIT-compiled by the driver at first use)"
    if major * 10 + minor < 75:
        return "gpudyn: NOT SUPPORTED (gpudyn needs compute capability 7.5 or newer)"
    return f"gpudyn: NOT SUPPORTED by this build (build for it: pip install . -Csetup-args=-Dgpu_archs={major}{minor})"


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
    `device` (None: the current device): the growth arenas of closed GGArrays,
    kept mapped for the next array to adopt, and memory that arenas gave back
    (:meth:`GGArray.trim`) and take again when they grow.  The library also
    gives such memory back by itself once it has been unused for a second.
    Returns the bytes given back; no wait."""
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
