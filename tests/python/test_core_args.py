"""Argument checks of the Python API, property-based (hypothesis), run without
a GPU: every check happens before any device call, so a bad scalar, dtype or
stream gives a ValueError/TypeError naming the argument here too (without the
check, these calls would reach the library: a cffi OverflowError, a silent
truncation, or NoDeviceError on this machine)."""

import ctypes
import sys
import types

import gpudyn
import numpy as np
import pytest
from gpudyn import _args, _ffi
from gpudyn._handle import OwnedHandle
from gpudyn.buffer import DeviceBuffer, _producer_stream, as_device_array, element_dtype
from hypothesis import given, settings
from hypothesis import strategies as st

FAST = settings(max_examples=40, deadline=None)
U32, U64 = (1 << 32) - 1, (1 << 64) - 1

# Values that are not counts: bools, fractions, non-finite floats, other types.
not_integers = st.one_of(
    st.booleans(),
    st.sampled_from([np.bool_(True), np.bool_(False)]),
    st.floats(allow_nan=True, allow_infinity=True).filter(lambda f: not (f == f and abs(f) < 1e300 and f.is_integer())),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(0, 3), max_size=2).map(tuple),
)


def _bad_error(exc_info, name):
    assert f"'{name}'" in str(exc_info.value), str(exc_info.value)
    assert not isinstance(exc_info.value, OverflowError)


# ---- the helper ----------------------------------------------------------------
@FAST
@given(lo=st.integers(0, 100), span=st.integers(0, 1 << 40), value=st.integers(-(1 << 70), 1 << 70))
def test_integer_accepts_exactly_the_range(lo, span, value):
    hi = lo + span
    if lo <= value <= hi:
        assert _args.integer("f", "x", value, lo, hi) == value
        assert _args.integer("f", "x", np.int64(value) if value < 1 << 63 else value, lo, hi) == value
        if abs(value) < 1 << 52:
            assert _args.integer("f", "x", float(value), lo, hi) == value  # a whole float is a count
    else:
        with pytest.raises(ValueError, match=rf"'x' is {value}, expected an integer in \[{lo}, {hi}\]"):
            _args.integer("f", "x", value, lo, hi)


@FAST
@given(value=not_integers)
def test_integer_refuses_non_integers(value):
    with pytest.raises((TypeError, ValueError)) as info:
        _args.integer("f", "count", value)
    _bad_error(info, "count")
    if isinstance(value, (bool, np.bool_)):
        assert info.type is TypeError  # True is not a count (was accepted as 1)


@FAST
@given(value=st.one_of(st.text(max_size=12), st.integers(-5, 10), st.booleans(), st.floats(0, 3), st.none()))
def test_choice_takes_exact_names_and_values_only(value):
    names = gpudyn.ggarray.ALGORITHMS
    ok = (isinstance(value, str) and value in names) or (type(value) is int and value in names.values())
    if ok:
        assert _args.choice("f", "algorithm", value, names) == names.get(value, value)
    else:
        with pytest.raises((TypeError, ValueError)) as info:
            _args.choice("f", "algorithm", value, names)
        _bad_error(info, "algorithm")
        assert "'atomic' (0)" in str(info.value)


# ---- constructors: every scalar checked before the library is called -------------
SCALARS = [
    (gpudyn.GGArray, "num_lfvectors", 1, U32),
    (gpudyn.GGArray, "first_bucket", 1, U64),
    (gpudyn.GGArray, "budget", 1, U64),
    (gpudyn.GGArray, "max_budget", 1, U64),
    (gpudyn.GGArray, "pool_bytes", 0, U64 - 1),
    (lambda **k: gpudyn.StaticArray(**{"capacity": 10, **k}), "capacity", 1, U64),
    (gpudyn.VmmArray, "initial_capacity", 0, U64),
    (gpudyn.VmmArray, "max_capacity", 0, U64),
    (gpudyn.RWHeap, "page_count", 1, 1 << 31),
    (gpudyn.RWHeap, "page_size", 1, U64),
    (gpudyn.RWHeap, "word_bits", 0, U32),
    (gpudyn.RWHeap, "max_random_steps", 0, U32),
    (gpudyn.WarpHeap, "superblock_bytes", 0, U64),
    (gpudyn.WarpHeap, "min_block_bytes", 0, U32),
    (gpudyn.WarpHeap, "list_capacity", 0, U32),
    (gpudyn.WarpHeap, "device_heap_bytes", 0, U64),
    (gpudyn.WarpHeap, "arena_bytes", 0, U64),
    (gpudyn.WarpHeap, "max_superblock_run", 0, U32),
]


@pytest.mark.parametrize("make,name,lo,hi", SCALARS, ids=[f"{i}-{s[1]}" for i, s in enumerate(SCALARS)])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_constructor_scalars_are_checked_first(make, name, lo, hi, data):
    bad = data.draw(
        st.one_of(
            not_integers,
            st.integers(hi + 1, hi + (1 << 70)),
            st.integers(-(1 << 70), lo - 1),
            st.sampled_from([1.5, -1, hi + 1]),
        ).filter(lambda v: not (name in ("pool_bytes", "budget", "max_budget") and v is None))
    )  # None: valid (no pool / default)
    with pytest.raises((TypeError, ValueError)) as info:
        make(**{name: bad})
    _bad_error(info, name)
    assert not isinstance(info.value, gpudyn.NoDeviceError)
    assert isinstance(info.value, (TypeError, gpudyn.InvalidArgumentError))  # no bare ValueError


@pytest.mark.parametrize(
    "make,name",
    [
        (lambda: gpudyn.RWHeap(max_random_steps=0), "max_random_steps"),
        (lambda: gpudyn.GGArray(first_bucket=1000), "first_bucket"),
        (lambda: gpudyn.GGArray(first_bucket=16), "first_bucket"),
        (lambda: gpudyn.GGArray(first_bucket=1 << 31), "first_bucket"),
        (lambda: gpudyn.Heap(initial_bytes=100), "initial_bytes"),
        (lambda: gpudyn.Heap(max_bytes=100), "max_bytes"),
        (lambda: gpudyn.Heap(initial_bytes=2**64 - 1), "initial_bytes"),
        (lambda: gpudyn.Heap(max_bytes=2**64 - 1), "max_bytes"),
        (lambda: gpudyn.Heap(initial_bytes=(2**31 + 1) * 4096, page_size=4096), "initial_bytes"),
    ],
)
def test_options_the_library_refuses_are_refused_under_their_python_names(make, name):
    # The library's message named the C field (options->first_bucket_elements ...).
    # A ValueError, and a gpudyn error like the library's own refusals.
    with pytest.raises(gpudyn.InvalidArgumentError, match=f"argument '{name}' is") as info:
        make()
    assert isinstance(info.value, ValueError) and info.value.status_name == "GPUDYN_ERROR_INVALID_ARGUMENT"


def test_issue_examples():
    with pytest.raises(ValueError, match=r"'num_lfvectors' is -1, expected an integer in \[1, 4294967295\]"):
        gpudyn.GGArray(num_lfvectors=-1)
    with pytest.raises(ValueError, match="'num_lfvectors' is 1.5"):
        gpudyn.GGArray(num_lfvectors=1.5)
    with pytest.raises(TypeError, match="'use_lockmap'"):
        gpudyn.RWHeap(use_lockmap="yes")
    # extend checks `algorithm` before it touches the array (a bare instance has no handle)
    g = gpudyn.GGArray.__new__(gpudyn.GGArray)
    with pytest.raises(TypeError, match="'algorithm' is True"):
        g.extend(np.zeros(3, np.int32), algorithm=True)
    with pytest.raises(ValueError, match="'algorithm' is 'bubble'"):
        g.extend(np.zeros(3, np.int32), algorithm="bubble")
    with pytest.raises(ValueError, match="closed"):  # a good algorithm reaches the handle check
        g.extend(np.zeros(3, np.int32), algorithm="atomic")
    h = gpudyn.RWHeap.__new__(gpudyn.RWHeap)
    with pytest.raises(TypeError, match="'stats'"):
        h.get_pages(1, stats="no")
    with pytest.raises(ValueError, match="'n' is -3"):
        h.get_pages(-3)
    with pytest.raises(ValueError, match="'algorithm'"):
        h.get_pages(1, algorithm="walk")
    with pytest.raises(ValueError, match="'fraction'"):
        h.occupy(float("nan"))
    with pytest.raises(TypeError, match="'fraction'"):
        h.occupy(True)
    with pytest.raises(ValueError, match="'capacity' is -1"):
        gpudyn.GGArray.__new__(gpudyn.GGArray).reserve(-1)


# ---- dtypes ----------------------------------------------------------------------
REFUSED_DTYPES = [
    np.dtype([("a", "i4"), ("b", "i4")]),
    "V8",
    "S4",
    "U1",
    "M8[ns]",
    "m8[s]",
    object,
    ">i4",
    ">f8",
    "<u2" if sys.byteorder == "big" else ">u2",
    np.dtype(("i4", (2,))),
    np.longdouble,
    np.clongdouble,
]  # x87 extended precision: no device type


@pytest.mark.parametrize("dtype", REFUSED_DTYPES, ids=str)
@pytest.mark.parametrize(
    "cls",
    [
        gpudyn.GGArray,
        gpudyn.VmmArray,
        lambda dtype: gpudyn.StaticArray(10, dtype=dtype),
        lambda dtype: DeviceBuffer(4, dtype),
    ],
)
def test_dtypes_a_structure_cannot_hold_are_refused_at_construction(cls, dtype):
    with pytest.raises(TypeError, match="'dtype'") as info:
        cls(dtype=dtype)
    assert "expected a native-byte-order bool, integer, float or complex dtype" in str(info.value)


@FAST
@given(st.sampled_from(list("?bBhHiIlLqQefdFD")))
def test_plain_dtypes_are_accepted(code):
    dt = np.dtype(code)
    assert element_dtype("f", dt, (1, 2, 4, 8, 16)) == dt


def test_big_endian_device_array_is_refused_before_any_device_call():
    class BigEndian:
        __cuda_array_interface__ = {
            "shape": (4,),
            "typestr": ">i4",
            "data": (256, False),
            "version": 3,
            "strides": None,
            "stream": 5,
        }

    with pytest.raises(TypeError, match="non-native byte order"):
        as_device_array(BigEndian(), where="GGArray.extend", name="values")


def test_numpy_dtype_mismatch_is_refused_not_wrapped():
    # int64 page ids cast silently to uint32 would wrap; the check comes before any copy.
    with pytest.raises(TypeError, match="'pages' has dtype int64, expected uint32"):
        as_device_array(np.array([1, 1 << 40]), dtype=np.uint32, where="RWHeap.free_pages", name="pages")


@FAST
@given(st.lists(st.integers(-(1 << 65), 1 << 65), min_size=1, max_size=20))
def test_host_integers_never_wrap(values):
    ok = all(0 <= v <= U32 for v in values)
    if ok:
        assert _args.host_integers("f", "pages", values, np.uint32).tolist() == values
    else:
        with pytest.raises((TypeError, ValueError), match="'pages'"):
            _args.host_integers("f", "pages", values, np.uint32)


# ---- DeviceBuffer ----------------------------------------------------------------
def test_device_buffer_is_not_converted_to_numpy_implicitly():
    buf = DeviceBuffer.__new__(DeviceBuffer)  # no device here; __array__ needs none
    for call in (np.asarray, np.array, lambda b: np.asarray(b, dtype=np.float32), lambda b: np.array(b, copy=True)):
        with pytest.raises(TypeError, match=r"to_numpy\(\)"):
            call(buf)


@pytest.mark.parametrize(
    "shape,exc",
    [
        (-1, ValueError),
        (1.5, ValueError),
        (True, TypeError),
        ((2, -3), ValueError),
        ("4", TypeError),
        (None, TypeError),
        (1j, TypeError),
        (b"4", TypeError),
    ],
)
def test_device_buffer_shape_checked_first(shape, exc):
    with pytest.raises(exc, match="'shape'"):
        DeviceBuffer(shape, np.int32)


# ---- streams ---------------------------------------------------------------------
class CudaStreamProto:
    def __init__(self, h):
        self.h = h

    def __cuda_stream__(self):
        return (0, self.h)


@FAST
@given(h=st.integers(0, U64), kind=st.sampled_from(["int", "numpy", "proto", "torch", "cupy", "numba", "numba_null"]))
def test_every_stream_spelling_gives_the_handle(h, kind):
    if kind == "int":
        s = h
    elif kind == "numpy":
        s = np.uint64(h)
    elif kind == "proto":
        s = CudaStreamProto(h)
    elif kind == "torch":
        s = types.SimpleNamespace(cuda_stream=h)
    elif kind == "cupy":
        s = types.SimpleNamespace(ptr=h)
    elif kind == "numba":
        s = types.SimpleNamespace(handle=ctypes.c_void_p(h))
    else:
        s, h = types.SimpleNamespace(handle=ctypes.c_void_p(None)), 0
    assert _ffi.stream_value(s) == h
    assert int(_ffi.ffi.cast("uintptr_t", _ffi.stream_handle(s))) == h


@pytest.mark.parametrize(
    "bad", [True, np.bool_(False), "stream", 1.0, -1, np.int64(-1), 1 << 64, CudaStreamProto("x"), object()]
)
def test_bad_streams_are_refused(bad):
    with pytest.raises((TypeError, ValueError), match="stream"):
        _ffi.stream_value(bad)
    with pytest.raises((TypeError, ValueError), match="stream"):
        gpudyn.GGArray(stream=bad)  # before any device call


def test_producer_stream_rules(monkeypatch):
    cai = {"shape": (1,), "typestr": "<i4", "data": (256, False), "version": 3, "strides": None}
    obj = object()
    assert _producer_stream(obj, {**cai, "stream": 7}) == 7
    assert _producer_stream(obj, {**cai, "stream": 1}) == 1  # legacy default stream
    assert _producer_stream(obj, {**cai, "stream": None}) is None  # the producer says: no sync needed
    assert _producer_stream(obj, cai) is None  # unknown library, no stream: nothing to wait for

    # PyTorch exports CAI v2 (no stream): its current stream is the producer, asked only if imported.
    Tensor = type("Tensor", (), {"__module__": "torch", "device": "cuda:0"})
    Ndarray = type("ndarray", (), {"__module__": "cupy._core.core"})
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert _producer_stream(Tensor(), cai) is None
    asked = []
    fake_torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            current_stream=lambda device: asked.append(device) or types.SimpleNamespace(cuda_stream=4242)
        )
    )
    fake_cupy = types.SimpleNamespace(
        cuda=types.SimpleNamespace(get_current_stream=lambda: types.SimpleNamespace(ptr=99))
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    assert _producer_stream(Tensor(), cai) == 4242 and asked == ["cuda:0"]
    assert _producer_stream(Ndarray(), cai) == 99
    assert _producer_stream(Ndarray(), {**cai, "stream": 5}) == 5  # an explicit stream wins


# ---- lifetimes (item 9, item 11) -----------------------------------------------------
def test_failed_destroy_keeps_the_handle_for_a_retry():
    import gc

    results, calls = [gpudyn.InvalidArgumentError.status, 0], []

    class Thing(OwnedHandle):
        def __init__(self):
            self._own(_ffi.ffi.new("int*"), lambda h: calls.append(1) or results.pop(0))  # never keep h

    t = Thing()
    with pytest.raises(gpudyn.InvalidArgumentError):
        t.close()
    assert t._h() is not None  # still open: nothing was dropped
    t.close()  # retried: destroyed now
    assert len(calls) == 2
    with pytest.raises(ValueError, match="closed"):
        t._h()
    del t
    gc.collect()
    assert len(calls) == 2  # the finalizer was detached after the successful destroy

    # A failed close followed by garbage collection: the finalizer still destroys it.
    results[:] = [gpudyn.InvalidArgumentError.status, 0]
    t = Thing()
    with pytest.raises(gpudyn.InvalidArgumentError):
        t.close()
    del t
    gc.collect()
    assert len(calls) == 4


def test_page_heap_close_refused_while_a_warp_heap_uses_it():
    destroyed = []
    heap = gpudyn.RWHeap.__new__(gpudyn.RWHeap)  # stand-ins: no device here
    import weakref

    heap._users = weakref.WeakSet()
    heap._own(_ffi.ffi.new("int*"), lambda h: destroyed.append(h) or 0)
    user = gpudyn.WarpHeap.__new__(gpudyn.WarpHeap)
    user._handle = object()  # open
    heap._users.add(user)
    with pytest.raises(gpudyn.InvalidArgumentError, match="WarpHeap"):
        heap.close()
    assert heap._h() is not None and destroyed == []  # still usable
    user._handle = None  # the warp heap closed
    heap.close()
    assert len(destroyed) == 1


def test_waiting_on_the_same_stream_does_nothing():
    # No device call at all (this machine may have none): same stream, or both spellings
    # of the legacy default stream (0 in gpudyn, 1 in CAI v3).
    h = _ffi.stream_handle(None)
    _ffi.wait_for(h, 0)
    _ffi.wait_for(h, 1)
    _ffi.wait_for(_ffi.stream_handle(7), 7)
    _ffi.check(_ffi.lib.gpudyn_stream_wait(_ffi.stream_handle(7), _ffi.stream_handle(7)))


# ---- values a dtype cannot hold, sizes beyond 64 bits, ordinals ---------------------
@pytest.mark.parametrize("shape,dtype", [((1 << 61,), np.complex128), ((1 << 40, 1 << 40), np.uint8)])
def test_device_buffer_byte_count_beyond_64_bits_is_out_of_memory(shape, dtype):
    # Each entry is <= 2^62, their product x itemsize is not a uint64: refused naming the
    # size before any device call (was cffi's bare OverflowError).
    with pytest.raises(gpudyn.OutOfMemoryError, match=r"more than 2\*\*64 - 1"):
        DeviceBuffer(shape, dtype)


@pytest.mark.parametrize(
    "device,exc",
    [(0.9, TypeError), (1.0, TypeError), (True, TypeError), ("0", TypeError), (1 << 40, gpudyn.InvalidArgumentError)],
)
def test_device_info_ordinal_checked_first(device, exc):
    # int(device) made 0.9 device 0, True device 1, and 1 << 40 a cffi OverflowError.
    with pytest.raises(exc, match="'device'"):
        gpudyn.device_info(device)


@FAST
@given(
    value=st.one_of(
        st.integers(-(1 << 70), 1 << 70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(-1e6, 1e6).map(round).map(float),
    ),
    code=st.sampled_from(list("?bBhHiIqQ")),
)
def test_append_takes_exactly_the_values_an_integer_dtype_holds(value, code):
    # append went through np.asarray([value], dtype): 1.5 stored as 1, np.int64(300) as 44 in uint8.
    from gpudyn.ggarray import _exact

    dt = np.dtype(code)
    lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
    whole = isinstance(value, int) or (value == value and abs(value) != float("inf") and value.is_integer())
    if whole and lo <= value <= hi:
        got = _exact("StaticArray.append", value, dt)
        assert got.dtype == dt and int(got[0]) == value
    else:
        with pytest.raises(ValueError, match="cannot hold"):
            _exact("StaticArray.append", value, dt)


@pytest.mark.parametrize("value", [-(1 << 63) - 1, 1 << 64, 2, -1])
def test_append_of_an_integer_a_bool_array_cannot_hold(value):
    # Beyond int64, np.asarray made an object array: TypeError instead of the range's ValueError.
    from gpudyn.ggarray import _exact

    with pytest.raises(ValueError, match="cannot hold: expected 0 <= value <= 1"):
        _exact("StaticArray.append", value, np.dtype(np.bool_))


def test_append_refuses_before_any_device_call():
    a = gpudyn.StaticArray.__new__(gpudyn.StaticArray)  # no device here: the value is checked first
    a.dtype = np.dtype(np.uint8)
    for v in (1.5, np.float32(7.25), 300, np.int64(300), -1, 1 + 2j):
        with pytest.raises(ValueError, match="'value' is .* cannot hold"):
            a.append(v)
    with pytest.raises(TypeError, match="'value'"):
        a.append("1")


@pytest.mark.parametrize("value", [[1, 2], [], (3,), np.ones((2, 3)), np.array([5])])
def test_append_refuses_a_sequence(value):
    # np.asarray(value).reshape(-1) appended every element of a list: append takes one number.
    a = gpudyn.StaticArray.__new__(gpudyn.StaticArray)  # no device here: the value is checked first
    a.dtype = np.dtype(np.float64)
    with pytest.raises(TypeError, match=r"append argument 'value' has shape .*expected one number"):
        a.append(value)


@pytest.mark.parametrize(
    "values,mask,exc,msg",
    [
        (np.arange(4, dtype=np.int64), None, TypeError, "'values' has dtype int64, this array holds int32"),
        (np.arange(4, dtype=np.int32), np.ones(4, np.int32), TypeError, "'mask' has dtype int32"),
        (np.arange(4, dtype=np.int32), np.ones(3, np.bool_), ValueError, "'mask' has 3 entries, values has 4"),
    ],
)
def test_extend_refuses_host_arrays_before_copying_them(values, mask, exc, msg):
    a = gpudyn.StaticArray.__new__(gpudyn.StaticArray)  # a stand-in handle, no device: nothing may be copied first
    a._handle, a.dtype = object(), np.dtype(np.int32)
    with pytest.raises(exc, match=msg):
        a.extend(values, mask=mask)


@pytest.mark.parametrize(
    "dtype,host,exc,msg",
    [
        (np.uint8, np.array([300, 1, 2, 3]), ValueError, "holds 300"),
        (np.uint64, np.array([-1, 2]), ValueError, "holds -1"),
        (np.int32, np.array([1.7, 2.2]), TypeError, "dtype float64"),
        (np.float32, np.array([1 + 1j, 2], dtype=np.complex64), TypeError, "dtype complex64"),
        (np.bool_, np.array([0, 1]), TypeError, "dtype int64"),
    ],
)
def test_copy_from_host_refuses_lossy_casts_first(dtype, host, exc, msg):
    # The unsafe cast made 300 -> 44 and 1.7 -> 1 whenever the byte counts matched.
    buf = DeviceBuffer.__new__(DeviceBuffer)  # no device here: the cast is checked first
    buf.dtype, buf.shape, buf._owner = np.dtype(dtype), host.shape, None
    buf.nbytes = host.size * buf.dtype.itemsize
    with pytest.raises(exc, match=msg):
        buf.copy_from_host(host)


def test_host_integers_beyond_int64_reach_the_range_check():
    # NumPy makes [16, 2**64 - 1] float64: taken as the ints they are, not "dtype float64".
    assert _args.host_integers("Heap.malloc", "sizes", [16, U64], np.uint64).tolist() == [16, U64]
    assert _args.host_integers("Heap.malloc", "sizes", (U64, 0), np.uint64).tolist() == [U64, 0]
    with pytest.raises(ValueError, match=f"'sizes' holds {1 << 64}, expected"):
        _args.host_integers("Heap.malloc", "sizes", [16, 1 << 64], np.uint64)
    with pytest.raises(ValueError, match="'sizes' holds -1, expected"):
        _args.host_integers("Heap.malloc", "sizes", [-1, U64], np.uint64)


def test_get_pages_checks_n_against_the_page_count_before_allocating():
    h = gpudyn.RWHeap.__new__(gpudyn.RWHeap)  # a stand-in: no device here
    h._handle, h.page_count, h.stream = object(), 1024, None
    for n in (1025, 1 << 40, 1 << 62):  # 1 << 62 was cffi's OverflowError, 1 << 40 OutOfMemoryError
        with pytest.raises(gpudyn.InvalidArgumentError, match=f"'n' is {n}, more than the 1024 pages"):
            h.get_pages(n)


def test_masked_cuda_array_is_refused():
    class Masked:  # CAI v3 'mask': the masked-out elements were read as valid
        __cuda_array_interface__ = {
            "shape": (4,),
            "typestr": "<i4",
            "data": (256, False),
            "version": 3,
            "strides": None,
            "stream": None,
            "mask": object(),
        }

    with pytest.raises(NotImplementedError, match="'values' is a masked CUDA array"):
        as_device_array(Masked(), where="StaticArray.extend", name="values")


@pytest.mark.parametrize("values", [[16, True], (False, 8), [np.bool_(True)]])
def test_host_integers_refuse_bools_inside_a_list(values):
    # NumPy reads [16, True] as [16, 1]; a lone bool is refused, so one in a list is too.
    with pytest.raises(TypeError, match="'sizes' holds a bool"):
        _args.host_integers("Heap.malloc", "sizes", values, np.uint64)
