"""Inputs a hostile (or careless) user hands the Python API (issue 39, item 4 and
"bad input never reaches a kernel"): every one is refused before any copy or
device work, in constant time, with a gpudyn error naming the argument.

- Addresses (Heap.free, RWHeap.free, WarpHeap.free_kept / tidy_up_kept) take
  64-bit integer dtypes only: an int32 array would hold truncated addresses.
- Counts: an input of more bytes than the device's memory (a 2**40-entry
  broadcast view, a huge range) is OutOfMemoryError at once, never read or copied.
- Device arrays: their ``__cuda_array_interface__`` must describe a C-contiguous
  array that fits the address space and the device, in device memory of the
  structure's device (host, pinned, managed memory and unknown addresses such as
  0x1000 are refused); a DLPack producer must say kDLCUDA of that device.

Host tests run here without a GPU: the library is replaced, in every module that
calls it, by a fake that answers the queries the checks make (current device,
device memory, what memory an address is) and fails the test on any other call
(a copy, an allocation, a kernel).  GPU tests make the same refused calls on real
structures and check after each one that the CUDA context is healthy and the
structure unchanged."""

import time

import gpudyn
import numpy as np
import pytest
from gpudyn import _args, _ffi, buffer, ggarray, heap, rw_heap, warp_heap
from gpudyn._ffi import ffi
from gpudyn.buffer import DeviceBuffer, as_device_array, check_count

GiB = 1 << 30
DEVICE_MEMORY = 80 * GiB  # the fake device's
BROADCAST = 1 << 40  # entries of the view: 8 TiB as uint64


def broadcast(n, dtype=np.uint64, value=16):
    """The issue's input: n entries, one element in memory (stride 0)."""
    return np.lib.stride_tricks.as_strided(np.full(1, value, dtype=dtype), shape=(n,), strides=(0,))


class Cai:
    """An object whose __cuda_array_interface__ (v3) says `shape` entries of
    `typestr` lie at `ptr`; `extra` replaces or adds fields."""

    def __init__(self, ptr, shape, typestr="<u8", strides=None, readonly=False, **extra):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, readonly),
            "version": 3,
            "strides": strides,
            "stream": None,
            **extra,
        }


# ---- host: a fake library --------------------------------------------------------
DEV0 = 0x7F00_0000_0000  # the fake's device memory: 1 MiB of device 0, 1 MiB of device 1
DEV1 = 0x7F10_0000_0000
MiB = 1 << 20


class FakeLib:
    """libgpudyn for the modules that call it: the queries the argument checks make
    are answered; any other call is device work, recorded and failed."""

    def __init__(self, real):
        self.real, self.work = real, []

    def gpudyn_get_device(self, out):
        out[0] = 0
        return 0

    def gpudyn_stream_get_device(self, stream, out):
        out[0] = 0
        return 0

    def gpudyn_get_device_info(self, device, info):
        assert device in (0, 1)
        info.total_memory = DEVICE_MEMORY
        return 0

    def gpudyn_pointer_get_device(self, ptr, out):
        a = int(ffi.cast("uintptr_t", ptr))
        out[0] = 0 if DEV0 <= a < DEV0 + MiB else 1 if DEV1 <= a < DEV1 + MiB else -1
        return 0

    def __getattr__(self, name):
        if not name.startswith("gpudyn_"):  # constants (GPUDYN_MEMCPY_...)
            return getattr(self.real, name)

        def device_work(*args):
            self.work.append(name)
            raise AssertionError(f"{name} was called: a refused input reached the device")

        return device_work


@pytest.fixture
def fake(monkeypatch):
    lib = FakeLib(_ffi.lib)
    for module in (_ffi, buffer, heap, rw_heap, warp_heap, ggarray):
        monkeypatch.setattr(module, "lib", lib)
    monkeypatch.setattr(buffer, "_total_memory", {})
    yield lib
    assert lib.work == [], f"device work for a refused input: {lib.work}"


def _open(cls, **attrs):
    """A stand-in of `cls` on device 0 that the argument checks take as open."""
    obj = cls.__new__(cls)
    obj._handle, obj.device, obj.stream = object(), 0, None
    obj._stream = ffi.cast("gpudyn_stream_t", 0)
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def _page_heap():
    return _open(gpudyn.RWHeap, page_count=1024, page_size=256)


def _array(cls, dtype=np.int32):
    return _open(cls, dtype=np.dtype(dtype))


# ---- 64-bit addresses ----------------------------------------------------------------
ADDRESS_CALLS = {
    "Heap.free": lambda x: _open(gpudyn.Heap).free(x),
    "RWHeap.free": lambda x: _page_heap().free(x),
    "WarpHeap.free_kept": lambda x: _open(gpudyn.WarpHeap).free_kept(x),
    "WarpHeap.tidy_up_kept": lambda x: _open(gpudyn.WarpHeap).tidy_up_kept(x),
}
NARROW = [
    np.array([1, 2], np.int32),
    np.array([1, 2], np.uint32),
    np.array([7], np.int16),
    np.array([3], np.uint8),
    np.int32(5),
    np.uint32(5),
]


@pytest.mark.parametrize("call", ADDRESS_CALLS, ids=str)
@pytest.mark.parametrize("value", NARROW, ids=lambda v: f"{type(v).__name__}-{v.dtype}")
def test_addresses_of_fewer_than_64_bits_are_refused(fake, call, value):
    # Heap.free took np.array([1, 2], np.int32) (widened: truncated addresses); RWHeap.free refused it.
    with pytest.raises(TypeError, match=r"has dtype \w+, expected 64-bit addresses \(uint64 or int64\); a narrower"):
        ADDRESS_CALLS[call](value)


@pytest.mark.parametrize("call", ADDRESS_CALLS, ids=str)
@pytest.mark.parametrize("typestr", ["<i4", "<u4", "<u2", "|u1", "<f8"])
def test_device_address_arrays_of_another_dtype_are_refused(fake, call, typestr):
    # In device memory of the right device: only the dtype is wrong (refused before any wait or kernel).
    with pytest.raises(TypeError, match=rf"has dtype {np.dtype(typestr)}, expected 64-bit addresses"):
        ADDRESS_CALLS[call](Cai(DEV0, (4,), typestr))


def test_one_address_rule_accepts_64_bit_integers_and_python_ints(fake):
    for value in (
        [0, 1 << 63, (1 << 64) - 1],
        np.array([5, 1 << 40], np.int64),
        np.array([9], np.uint64),
        np.uint64(3),
        12,
    ):
        got = _args.host_addresses("Heap.free", "pointers", value)
        assert got.dtype == np.uint64 and got.tolist() == np.atleast_1d(np.asarray(value, dtype=object)).tolist()
    with pytest.raises(gpudyn.InvalidArgumentError, match="'pointers' holds -1"):
        _args.host_addresses("Heap.free", "pointers", np.array([-1, 16], np.int64))
    # a device array of uint64 or int64 in device 0's memory passes every check (nothing copied, nothing waited on)
    for typestr in ("<u8", "<i8"):
        ptr, n, dt = buffer.as_address_array(Cai(DEV0 + 64, (16,), typestr), None, "Heap.free", "pointers", device=0)[
            :3
        ]
        assert (ptr, n, dt) == (DEV0 + 64, 16, np.dtype(typestr))


def test_page_heap_keeps_its_page_id_hint(fake):
    with pytest.raises(TypeError, match=r"free_pages\(\)"):
        _page_heap().free(np.zeros(3, np.uint32))
    with pytest.raises(TypeError, match=r"free_pages\(\)"):
        _page_heap().free(Cai(DEV0, (3,), "<u4"))


# ---- huge and broadcast inputs: refused at once ---------------------------------------
def _huge(dtype=np.uint64):
    return broadcast(BROADCAST, dtype)


BULK_CALLS = {
    "Heap.malloc": lambda x: _open(gpudyn.Heap).malloc(x),
    "Heap.free": lambda x: _open(gpudyn.Heap).free(x),
    "RWHeap.malloc": lambda x: _page_heap().malloc(x),
    "RWHeap.free": lambda x: _page_heap().free(x),
    "RWHeap.free_pages": lambda x: _page_heap().free_pages(x),
    "WarpHeap.malloc": lambda x: _open(gpudyn.WarpHeap).malloc(x),
    "WarpHeap.free_kept": lambda x: _open(gpudyn.WarpHeap).free_kept(x),
    "WarpHeap.tidy_up_kept": lambda x: _open(gpudyn.WarpHeap).tidy_up_kept(x),
}


def _refused_at_once(call, exc=gpudyn.OutOfMemoryError, match=None):
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match) as info:
        call()
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"refused after {elapsed:.1f} s: the input was read or copied first"
    return info.value


@pytest.mark.parametrize("name", BULK_CALLS, ids=str)
@pytest.mark.parametrize(
    "make",
    [
        lambda: _huge(),
        lambda: np.broadcast_to(np.uint64(16), (1 << 20, 1 << 20)),
        lambda: range(1 << 70),
        lambda: range(0, 1 << 45, 2),
    ],
    ids=["as_strided-2^40", "broadcast_to-2^20x2^20", "range-2^70", "range-2^44"],
)
def test_huge_inputs_are_refused_in_constant_time(fake, name, make):
    # Heap.malloc spun for minutes on the 2^40-entry view (min/max over every entry, then an 8 TiB copy).
    e = _refused_at_once(lambda: BULK_CALLS[name](make()), match=rf"{name} argument '\w+' has \d+ entries")
    assert f"more than the {DEVICE_MEMORY} bytes of memory of device 0" in str(e)
    assert e.status_name == "GPUDYN_ERROR_OUT_OF_MEMORY"


@pytest.mark.parametrize("cls", [gpudyn.StaticArray, gpudyn.VmmArray, gpudyn.GGArray], ids=lambda c: c.__name__)
def test_huge_array_values_are_refused_in_constant_time(fake, cls):
    a = _array(cls, np.int32)
    _refused_at_once(lambda: a.extend(_huge(np.int32)), match=r"extend argument 'values' has 1099511627776 entries")
    # big-endian values are converted to native order only after the count is known to fit
    _refused_at_once(lambda: a.extend(_huge(np.dtype(">i4"))), match="'values' has 1099511627776 entries")


def test_a_mask_of_another_length_is_refused_before_either_input_is_copied(fake):
    a = _array(gpudyn.StaticArray)
    with pytest.raises(gpudyn.InvalidArgumentError, match="'mask' has 3 entries, values has 4"):
        a.extend(Cai(DEV0, (4,), "<i4"), mask=np.ones(3, np.bool_))
    with pytest.raises(gpudyn.InvalidArgumentError, match="'mask' has 5 entries, values has 4"):
        a.extend(np.arange(4, dtype=np.int32), mask=Cai(DEV0, (5,), "|b1"))


def test_device_buffer_copies_refuse_huge_inputs_at_once(fake):
    _refused_at_once(lambda: DeviceBuffer.from_numpy(_huge()), match="'array' has 1099511627776 entries")
    buf = DeviceBuffer.__new__(DeviceBuffer)  # a stand-in of 2 uint64: the count is checked before any value
    buf.dtype, buf.shape, buf._owner, buf.nbytes = np.dtype(np.uint32), (2,), None, 8
    _refused_at_once(
        lambda: buf.copy_from_host(_huge()),
        gpudyn.InvalidArgumentError,
        match="has 1099511627776 elements, the buffer 2",
    )


def test_a_device_buffer_beyond_the_devices_memory_is_refused_before_allocating(fake):
    with pytest.raises(gpudyn.OutOfMemoryError, match=f"more than the {DEVICE_MEMORY} bytes of memory of device 0"):
        DeviceBuffer(DEVICE_MEMORY // 4 + 1, np.int32)


def test_the_bound_is_the_device_memory_exactly(fake):
    fits = DEVICE_MEMORY // 8
    assert check_count("Heap.malloc", "sizes", broadcast(fits), 8, 0) == fits
    with pytest.raises(gpudyn.OutOfMemoryError, match=f"has {fits + 1} entries of 8 bytes"):
        check_count("Heap.malloc", "sizes", broadcast(fits + 1), 8, 0)
    # beyond 64 bits of bytes: refused whatever the device
    with pytest.raises(gpudyn.OutOfMemoryError, match=r"more than 2\*\*64 - 1"):
        check_count("Heap.malloc", "sizes", range(1 << 62), 8, None)


def test_small_broadcast_views_are_accepted_and_each_value_checked(fake):
    # A broadcast view is a fine way to ask for 10^6 mallocs of 16 bytes; its values are
    # range-checked over its one stored element (not 10^6 times), and still checked.
    got = _args.host_integers("Heap.malloc", "sizes", broadcast(10**6), np.uint64)
    assert got.shape == (10**6,) and got.flags.c_contiguous and (got == 16).all()
    grid = np.lib.stride_tricks.as_strided(np.array([3, -4], np.int64), shape=(1000, 2), strides=(0, 8))
    with pytest.raises(gpudyn.InvalidArgumentError, match="'sizes' holds -4"):
        _args.host_integers("Heap.malloc", "sizes", grid, np.uint64)
    with pytest.raises(gpudyn.InvalidArgumentError, match="'pointers' holds -1"):
        _args.host_addresses("Heap.free", "pointers", broadcast(1 << 30, np.int64, -1))


# ---- device arrays: memory of the structure's device only ------------------------------
HOST = np.zeros(64, np.uint64)
MEMORY_CASES = {
    "0x1000": (Cai(0x1000, (4,)), "not device memory of device 0: CUDA reports its first byte at 0x1000"),
    "host array": (Cai(HOST.ctypes.data, HOST.shape), "not device memory of device 0"),
    "other device": (Cai(DEV1, (4,)), "is memory of device 1, but this structure lives on device 0"),
    "runs past its memory": (Cai(DEV0 + MiB - 16, (4,)), r"its last byte \(32 bytes on\)"),
    "null with entries": (Cai(0, (4,)), r"entries at address 0 \(NULL\)"),
    "bigger than the device": (Cai(DEV0, (DEVICE_MEMORY // 8 + 1,)), "no array of this device"),
}
SIZE_CALLS = {
    "Heap.malloc": lambda x: _open(gpudyn.Heap).malloc(x),
    "RWHeap.malloc": lambda x: _page_heap().malloc(x),
    "WarpHeap.malloc": lambda x: _open(gpudyn.WarpHeap).malloc(x),
    "Heap.free": lambda x: _open(gpudyn.Heap).free(x),
    "RWHeap.free": lambda x: _page_heap().free(x),
    "WarpHeap.tidy_up_kept": lambda x: _open(gpudyn.WarpHeap).tidy_up_kept(x),
}


@pytest.mark.parametrize("call", SIZE_CALLS, ids=str)
@pytest.mark.parametrize("case", MEMORY_CASES, ids=str)
def test_device_arrays_outside_the_devices_memory_are_refused(fake, call, case):
    # A CAI naming host memory or 0x1000 was handed to a kernel (only another device's was refused).
    obj, match = MEMORY_CASES[case]
    with pytest.raises(gpudyn.InvalidArgumentError, match=match):
        SIZE_CALLS[call](obj)


@pytest.mark.parametrize("case", MEMORY_CASES, ids=str)
@pytest.mark.parametrize("which", ["values", "mask"])
def test_array_values_and_masks_outside_the_devices_memory_are_refused(fake, case, which):
    obj, match = MEMORY_CASES[case]
    a = _array(gpudyn.GGArray, np.uint64)  # values of uint64, as MEMORY_CASES' interfaces say
    with pytest.raises(gpudyn.InvalidArgumentError, match=match):
        if which == "values":
            a.extend(obj)
        else:  # a mask of the same bytes at the same address (8 one-byte entries per uint64), good values
            cai = obj.__cuda_array_interface__
            n = 8 * cai["shape"][0]
            a.extend(Cai(DEV0, (n,), "<u8"), mask=Cai(cai["data"][0], (n,), "|u1"))


def test_device_memory_of_the_structures_device_passes_every_check(fake):
    # (nothing copied, nothing waited on: the fake fails the test on any device work)
    for cai in (
        Cai(DEV0, (4,)),
        Cai(DEV0 + MiB - 32, (4,)),
        Cai(DEV0, (1, 4), strides=(999, 8)),
        Cai(DEV0, (4,), readonly=True),
        Cai(DEV0, (0,)),
        Cai(0, (0,)),
        Cai(None, (0,)),
    ):
        ptr, n, dt, keep = as_device_array(cai, dtype=np.uint64, where="Heap.malloc", name="sizes", device=0)
        assert (ptr, n, dt, keep) == (
            cai.__cuda_array_interface__["data"][0] or 0,
            math_prod(cai),
            np.dtype("<u8"),
            cai,
        )
    with pytest.raises(gpudyn.InvalidArgumentError, match=r"entries at address 0 \(NULL\)"):
        as_device_array(Cai(None, (4,)), where="Heap.malloc", name="sizes", device=0)


def math_prod(cai):
    return int(np.prod(cai.__cuda_array_interface__["shape"]))


LAYOUTS = {
    "negative shape": ({"shape": (-1, -1)}, "negative extent"),  # math.prod made it 1 entry
    "float shape": ({"shape": (1.5,)}, "shape is"),
    "bool pointer": ({"data": (True, False)}, "data pointer is True"),
    "pointer beyond 64 bits": ({"data": (1 << 64, False)}, "data pointer is"),
    "negative pointer": ({"data": (-8, False)}, "data pointer is -8"),
    "no data tuple": ({"data": DEV0}, r"expected \(pointer, readonly\)"),
    "bytes beyond 64 bits": ({"shape": (1 << 62, 8)}, r"more than 2\*\*64 - 1"),
    "wraps the address space": ({"data": ((1 << 64) - 16, False), "shape": (4,)}, "run past the end of the address"),
    "zero strides": ({"shape": (1 << 20,), "strides": (0,)}, "must be C-contiguous"),
    "transposed": ({"shape": (4, 2), "strides": (8, 32)}, "must be C-contiguous"),
    "strides of another rank": ({"shape": (4, 2), "strides": (16,)}, "do not match its shape"),
}


@pytest.mark.parametrize("case", LAYOUTS, ids=str)
def test_interfaces_that_describe_no_array_are_refused(fake, case):
    fields, match = LAYOUTS[case]
    cai = Cai(DEV0, (4,))
    cai.__cuda_array_interface__.update(fields)
    with pytest.raises(gpudyn.InvalidArgumentError, match=match):
        as_device_array(cai, where="Heap.malloc", name="sizes", device=0)


def test_masked_and_malformed_interfaces_keep_their_errors(fake):
    with pytest.raises(NotImplementedError, match="masked CUDA array"):
        as_device_array(Cai(DEV0, (4,), mask=Cai(DEV0, (4,), "|b1")), where="f", name="values", device=0)
    with pytest.raises(TypeError, match="typestr 'xyz' that is no dtype"):
        as_device_array(Cai(DEV0, (4,), "xyz"), where="f", name="values", device=0)
    with pytest.raises(TypeError, match="non-native byte order"):
        as_device_array(Cai(DEV0, (4,), ">u8" if np.little_endian else "<u8"), where="f", name="values", device=0)


class DLPackOnly:
    def __init__(self, device):
        self.device = device

    def __dlpack__(self, stream=None):
        raise AssertionError("imported before its device was checked")

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize(
    "device,match",
    [
        ((1, 0), r"host memory \(kDLCPU\)"),
        ((3, 0), r"pinned host memory \(kDLCUDAHost\)"),
        ((13, 0), r"CUDA managed memory \(kDLCUDAManaged\)"),
        ((10, 0), "DLPack device type 10"),
        ((2, 1), "is memory of device 1, but this structure lives on device 0"),
    ],
)
def test_dlpack_producers_outside_the_devices_memory_are_refused_before_import(fake, device, match):
    with pytest.raises(gpudyn.InvalidArgumentError, match=match):
        _open(gpudyn.Heap).malloc(DLPackOnly(device))


# ---- GPU: the same refusals on real structures; the context stays healthy ---------------
def _context_is_healthy():
    """No CUDA error pending or sticky: the device synchronizes, and a copy there and back works."""
    _ffi.check(_ffi.lib.gpudyn_device_synchronize())
    x = np.arange(4096, dtype=np.uint32) * 7
    with DeviceBuffer.from_numpy(x) as b:
        assert np.array_equal(b.to_numpy(), x)


def _real_hostile_inputs(dtype, cp=None, keep=None):
    """Device-array inputs of `dtype` that must be refused on a real device: (name, object, match)."""
    dt = np.dtype(dtype)
    host = np.zeros(64, dt)
    keep = keep if keep is not None else []
    keep.append(host)
    cases = [
        ("0x1000", Cai(0x1000, (4,), dt.str), "not device memory"),
        ("host array", Cai(host.ctypes.data, host.shape, dt.str), "not device memory"),
        ("null with entries", Cai(0, (4,), dt.str), "NULL"),
        ("zero strides", Cai(0x1000, (1 << 20,), dt.str, strides=(0,)), "C-contiguous"),
    ]
    if cp is not None:
        pinned = cp.cuda.alloc_pinned_memory(64 * dt.itemsize)
        managed = cp.cuda.malloc_managed(64 * dt.itemsize)
        view = cp.lib.stride_tricks.as_strided(cp.zeros(1, dt), shape=(1 << 20,), strides=(0,))
        keep += [pinned, managed, view]
        cases += [
            ("pinned", Cai(pinned.ptr, (64,), dt.str), "not device memory"),
            ("managed", Cai(managed.ptr, (64,), dt.str), "not device memory"),
            ("cupy broadcast view", view, "C-contiguous"),
        ]
    return cases


def _cupy():
    try:
        import cupy

        return cupy
    except ImportError:
        return None


@pytest.mark.gpu
def test_heap_refusals_leave_the_heap_and_the_context_healthy():
    keep = []
    with gpudyn.Heap(initial_bytes=16 << 20) as h:
        ptrs = h.malloc([64] * 8).to_numpy()
        before = h.stats()
        total = gpudyn.device_info(h.device)["total_memory"]
        refusals = [
            ("int32 addresses", lambda: h.free(np.array([1, 2], np.int32)), TypeError, "64-bit"),
            ("uint32 pointers", lambda: h.free(ptrs.astype(np.uint32)), TypeError, "64-bit"),
            ("2^40 broadcast sizes", lambda: h.malloc(_huge()), gpudyn.OutOfMemoryError, "entries"),
            (
                "one entry past the device",
                lambda: h.malloc(broadcast(total // 8 + 1)),
                gpudyn.OutOfMemoryError,
                f"more than the {total} bytes",
            ),
            ("2^40 broadcast pointers", lambda: h.free(_huge()), gpudyn.OutOfMemoryError, "entries"),
        ]
        for name, obj, match in _real_hostile_inputs(np.uint64, _cupy(), keep):
            refusals.append((f"sizes: {name}", lambda o=obj: h.malloc(o), gpudyn.InvalidArgumentError, match))
            refusals.append((f"pointers: {name}", lambda o=obj: h.free(o), gpudyn.InvalidArgumentError, match))
        for name, call, exc, match in refusals:
            _refused_at_once(call, exc, match)
            _context_is_healthy()
            assert h.stats() == before, f"{name}: the heap changed"
        more = h.malloc([100] * 4)  # the same heap still works
        assert (more.to_numpy() != 0).all() and h.stats()["allocations"] == 12
        h.free(more)
        h.free(ptrs)
        st = h.stats()
        assert (st["allocations"], st["bad_frees"], st["failed_allocations"]) == (0, 0, 0)


@pytest.mark.gpu
def test_page_heap_refusals_leave_the_heap_and_the_context_healthy():
    keep = []
    with gpudyn.RWHeap(page_count=4096) as p:
        pages = p.get_pages(16).to_numpy()
        ptrs = p.malloc([256] * 8).to_numpy()
        free, info = p.free_page_count, p.stats()
        refusals = [
            ("int32 addresses", lambda: p.free(ptrs.astype(np.int32)), TypeError, "64-bit"),
            ("2^40 broadcast sizes", lambda: p.malloc(_huge()), gpudyn.OutOfMemoryError, "entries"),
            (
                "2^40 broadcast pages",
                lambda: p.free_pages(broadcast(BROADCAST, np.uint32, 1)),
                gpudyn.OutOfMemoryError,
                "entries",
            ),
            ("2^40 broadcast pointers", lambda: p.free(_huge()), gpudyn.OutOfMemoryError, "entries"),
        ]
        for name, obj, match in _real_hostile_inputs(np.uint64, _cupy(), keep):
            refusals.append((f"sizes: {name}", lambda o=obj: p.malloc(o), gpudyn.InvalidArgumentError, match))
            refusals.append((f"pointers: {name}", lambda o=obj: p.free(o), gpudyn.InvalidArgumentError, match))
        for name, obj, match in _real_hostile_inputs(np.uint32, _cupy(), keep):
            refusals.append((f"pages: {name}", lambda o=obj: p.free_pages(o), gpudyn.InvalidArgumentError, match))
        for name, call, exc, match in refusals:
            _refused_at_once(call, exc, match)
            _context_is_healthy()
            assert (p.free_page_count, p.stats()) == (free, info), f"{name}: the page heap changed"
        p.free(ptrs)
        p.free_pages(pages)
        assert p.free_page_count == p.page_count and p.stats()["bad_frees"] == 0


@pytest.mark.gpu
def test_warp_heap_refusals_leave_the_heap_and_the_context_healthy():
    keep = []
    with gpudyn.WarpHeap(arena_bytes=16 << 20) as w:
        first = w.malloc([48] * 64).to_numpy()
        before, batches = w.stats(), w.batch_count
        refusals = [
            ("int32 headers", lambda: w.free_kept(np.array([16, 32], np.int32)), TypeError, "64-bit"),
            ("uint32 headers", lambda: w.tidy_up_kept(np.array([16], np.uint32)), TypeError, "64-bit"),
            ("2^40 broadcast sizes", lambda: w.malloc(_huge()), gpudyn.OutOfMemoryError, "entries"),
            ("2^40 broadcast headers", lambda: w.free_kept(_huge()), gpudyn.OutOfMemoryError, "entries"),
        ]
        for name, obj, match in _real_hostile_inputs(np.uint64, _cupy(), keep):
            refusals.append((f"sizes: {name}", lambda o=obj: w.malloc(o), gpudyn.InvalidArgumentError, match))
            refusals.append((f"headers: {name}", lambda o=obj: w.tidy_up_kept(o), gpudyn.InvalidArgumentError, match))
        for name, call, exc, match in refusals:
            _refused_at_once(call, exc, match)
            _context_is_healthy()
            assert (w.stats(), w.batch_count) == (before, batches), f"{name}: the warp heap changed"
        second = w.malloc([32] * 64).to_numpy()
        assert (first != 0).all() and (second != 0).all() and w.batch_count == batches + 1
        w.clear()
        assert w.batch_count == 0


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["static", "vmm", "ggarray"])
def test_array_refusals_leave_the_array_and_the_context_healthy(kind):
    keep = []
    make = {
        "static": lambda: gpudyn.StaticArray(4096, np.int32),
        "vmm": lambda: gpudyn.VmmArray(np.int32, initial_capacity=4096, max_capacity=1 << 20),
        "ggarray": lambda: gpudyn.GGArray(np.int32, num_lfvectors=8),
    }[kind]
    with make() as a:
        x = np.arange(1000, dtype=np.int32)
        a.extend(x)
        good = DeviceBuffer.from_numpy(np.arange(8, dtype=np.int32))
        keep.append(good)
        refusals = [("2^40 broadcast values", lambda: a.extend(_huge(np.int32)), gpudyn.OutOfMemoryError, "entries")]
        for name, obj, match in _real_hostile_inputs(np.int32, _cupy(), keep):
            refusals.append((f"values: {name}", lambda o=obj: a.extend(o), gpudyn.InvalidArgumentError, match))
        for name, obj, match in _real_hostile_inputs(np.uint8, _cupy(), keep):
            if obj.__cuda_array_interface__["shape"] != (8,):  # a mask of another length is refused for that
                cai = obj.__cuda_array_interface__
                obj = Cai(cai["data"][0], (8,), "|u1", strides=None if cai.get("strides") is None else (0,))
            refusals.append((f"mask: {name}", lambda o=obj: a.extend(good, mask=o), gpudyn.InvalidArgumentError, match))
        for name, call, exc, match in refusals:
            _refused_at_once(call, exc, match)
            _context_is_healthy()
            got = a.to_numpy()
            assert np.array_equal(np.sort(got), x), f"{name}: the array changed"
        a.extend(good)  # the same array still works
        assert np.array_equal(np.sort(a.to_numpy()), np.sort(np.concatenate([x, np.arange(8)])))


@pytest.mark.gpu
def test_device_memory_of_every_kind_the_package_makes_is_accepted():
    # The memory checks refuse what is not device memory of the device; each of these is:
    # VMM-mapped (VmmArray, Heap: cuMemCreate/cuMemMap), cudaMalloc (StaticArray), the
    # stream-ordered pool (DeviceBuffer), and a CuPy array when CuPy is there.
    x = np.arange(1000, dtype=np.int32)
    with (
        gpudyn.VmmArray(np.int32, initial_capacity=4096, max_capacity=1 << 20) as v,
        gpudyn.StaticArray(4096, np.int32) as s,
        gpudyn.GGArray(np.int32, num_lfvectors=8) as g,
        gpudyn.Heap(initial_bytes=16 << 20) as h,
    ):
        v.extend(x)
        s.extend(x + 1000)
        g.extend(v)
        g.extend(s)
        with DeviceBuffer.from_numpy(x + 2000) as buf:
            g.extend(buf)
        block = int(h.malloc([4096]).to_numpy()[0])
        _ffi.check(_ffi.lib.gpudyn_memset(ffi.cast("void*", block), 0, 4096, ffi.NULL))
        g.extend(Cai(block, (1024,), "<i4"))  # a heap block, read as 1024 zeros
        want = list(range(3000)) + [0] * 1024
        cp = _cupy()
        if cp is not None:
            g.extend(cp.arange(3000, 3100, dtype=cp.int32))
            want += list(range(3000, 3100))
        assert sorted(g.to_numpy().tolist()) == sorted(want)
        h.free([block])
        assert h.stats()["allocations"] == 0
        _context_is_healthy()


@pytest.mark.gpu
def test_torch_host_tensors_are_refused_through_dlpack():
    torch = pytest.importorskip("torch")
    with gpudyn.Heap(initial_bytes=16 << 20) as h:
        with pytest.raises(gpudyn.InvalidArgumentError, match=r"host memory \(kDLCPU\)"):
            h.malloc(torch.full((4,), 64, dtype=torch.int64))  # a CPU tensor: DLPack says kDLCPU
        _context_is_healthy()
        assert h.stats()["allocations"] == 0
        sizes = torch.full((4,), 64, dtype=torch.int64, device="cuda")  # a CUDA tensor of another dtype: TypeError
        with pytest.raises(TypeError, match="'sizes' has dtype int64, expected uint64"):
            h.malloc(sizes)
        _context_is_healthy()
        ptrs = h.malloc([64] * 4).to_numpy().astype(np.int64)
        h.free(torch.as_tensor(ptrs, device="cuda"))  # int64 device addresses: a CUDA tensor's memory is accepted
        assert h.stats()["allocations"] == 0 and h.stats()["bad_frees"] == 0
