"""The device functions of gpudyn.numba (numba-cuda intrinsics).

Each function checks its argument types when the kernel is compiled (a clear
TypingError naming the argument otherwise), spills the ref to the stack, and
calls one extern "C" shim of shims/gpudyn_numba.cu through
numba.cuda.declare_device (see _link.py).  They are intrinsics rather than
@cuda.jit device functions so that compiling a kernel needs no GPU (numba-cuda
compiles jitted device functions for the current device).
"""

from __future__ import annotations

from llvmlite import ir
from numba.cuda import cgutils, types
from numba.cuda.core.errors import TypingError
from numba.cuda.extending import intrinsic
from numba.cuda.np.arrayobj import make_array, populate_array
from numba.cuda.np.numpy_support import from_dtype

from .._ffi import ffi
from .._view import KINDS
from . import _link

ARRAYS = ("ggarray", "static_array", "vmm_array")
ALLOCATORS = ("heap", "rw_heap")  # malloc / free
INVALID_PAGE = 0xFFFFFFFF  # get_page on exhaustion (GPUDYN_RW_HEAP_INVALID_PAGE)


# ---- typing helpers -------------------------------------------------------------------
def _kind(ty):
    """(kind name, element dtype or None) of a kernel argument's Numba type (a
    structure's ``view_arg()``, gpudyn/_view.py), or None."""
    if isinstance(ty, types.BaseNamedTuple):
        kind = getattr(ty.instance_class, "_gpudyn_kind", None)
        if kind is not None:
            return kind.name, ty.instance_class._gpudyn_dtype
    return None


def _ref(fn: str, ty, kinds):
    k = _kind(ty)
    if k is None or k[0] not in kinds:
        want = " or ".join(f"{KINDS[x].title}.view_arg()" for x in kinds)
        raise TypingError(f"gpudyn.numba.{fn}: argument 'ref' must be a {want} (passed to the kernel), got {ty}")
    return k


def _integer(fn: str, name: str, ty):
    if not isinstance(ty, (types.Integer, types.Boolean, types.IntegerLiteral)):
        raise TypingError(f"gpudyn.numba.{fn}: argument '{name}' must be an integer, got {ty}")


# ---- code generation helpers ------------------------------------------------------------
def _view_pointer(context, builder, refty, ref):
    """The address of a stack copy of the ref: the view struct the shims read."""
    llty = context.get_value_type(refty)
    want = ffi.sizeof(refty.instance_class._gpudyn_kind.view_type)
    if context.get_abi_sizeof(llty) != want:  # _refs checked the offsets; LLVM must agree on the size
        raise TypingError(
            f"gpudyn.numba: {refty} lowers to {context.get_abi_sizeof(llty)} bytes, the C view has {want}"
        )
    slot = cgutils.alloca_once(builder, llty)
    builder.store(ref, slot)
    return builder.bitcast(slot, ir.IntType(8).as_pointer())


def _call(context, builder, name, restype, argtypes, args):
    fn = _link.extern(name, restype, argtypes)
    return context.get_function(fn, restype(*argtypes))(builder, args)


def _cast(context, builder, value, fromty, toty):
    return context.cast(builder, value, fromty, toty)


def _truth(builder, value):
    return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


# ---- arrays: GGArray, StaticArray, VmmArray ---------------------------------------------
def _element(fn: str, dtype):
    """Numba type and width in bits of an array's elements."""
    bits = dtype.itemsize * 8
    if bits not in (8, 16, 32, 64, 128):
        raise TypingError(f"gpudyn.numba.{fn}: elements of {dtype.itemsize} bytes ({dtype}) are not supported")
    return from_dtype(dtype), bits


def _element_words(context, builder, elem, bits, value):
    """The element's bytes as the shim's integer argument(s): one iN, or two i64
    for 16-byte elements (through memory: floats, bools and complex numbers
    keep their exact bytes)."""
    slot = cgutils.alloca_once(builder, context.get_data_type(elem))
    context.pack_value(builder, elem, value, slot)
    if bits <= 64:
        return [builder.load(builder.bitcast(slot, ir.IntType(bits).as_pointer()))]
    words = builder.bitcast(slot, ir.IntType(64).as_pointer())
    return [builder.load(words), builder.load(builder.gep(words, [ir.Constant(ir.IntType(32), 1)]))]


@intrinsic
def push_back(typingctx, ref, value):
    """``push_back(ref, value) -> bool``: appends `value` (converted to the
    array's dtype as NumPy's casting would) to the GGArray / StaticArray /
    VmmArray whose ``view_arg()`` the kernel got.  Any thread, under any divergence;
    the lanes that call together share one reservation.  False when the array
    cannot take it (full, or no memory for a GGArray bucket): nothing stored,
    the array's status records it (its next host call raises
    OutOfMemoryError), every element stored before stays."""
    kind, dtype = _ref("push_back", ref, ARRAYS)
    elem, bits = _element("push_back", dtype)
    if not isinstance(value, (types.Number, types.Boolean)):
        raise TypingError(f"gpudyn.numba.push_back: argument 'value' must be a number, got {value}")
    if isinstance(value, types.Complex) and not isinstance(elem, types.Complex):
        # NumPy would drop the imaginary part (with a ComplexWarning); a kernel cannot warn.
        raise TypingError(
            f"gpudyn.numba.push_back: argument 'value' is {value}, the array holds {elem}: "
            "pass value.real (or an array of a complex dtype)"
        )
    words = (types.uint64, types.uint64) if bits == 128 else (types.Integer.from_bitwidth(bits, signed=False),)

    def codegen(context, builder, sig, args):
        view = _view_pointer(context, builder, sig.args[0], args[0])
        x = _cast(context, builder, args[1], sig.args[1], elem)
        ok = _call(
            context,
            builder,
            f"gpudyn_numba_{kind}_push_back_u{bits}",
            types.int32,
            (types.voidptr,) + words,
            [view] + _element_words(context, builder, elem, bits, x),
        )
        return _truth(builder, ok)

    return types.boolean(ref, value), codegen


@intrinsic
def extend(typingctx, ref, values, n):
    """``extend(ref, values, n) -> bool``: appends ``values[0:n]`` (a 1-D
    C-contiguous array of the array's dtype, e.g. a ``cuda.local.array``; n may
    be 0 and differ per thread).  Any thread, any divergence; one reservation
    for the lanes that call together, all or nothing for them: False means none
    of their values were stored.  A thread whose n is negative or more than
    ``len(values)`` stores nothing and gets False (its values are never read
    past the end; the array's status is unchanged: it is not out of memory)."""
    kind, dtype = _ref("extend", ref, ARRAYS)
    elem, bits = _element("extend", dtype)
    if not (isinstance(values, types.Array) and values.ndim == 1 and values.layout == "C" and values.dtype == elem):
        raise TypingError(
            f"gpudyn.numba.extend: argument 'values' must be a 1-D C-contiguous array of {elem}, got {values}"
        )
    _integer("extend", "n", n)

    def codegen(context, builder, sig, args):
        view = _view_pointer(context, builder, sig.args[0], args[0])
        values = make_array(sig.args[1])(context, builder, args[1])
        # 0 <= n <= len(values) (and fits the shim's uint32), else this thread adds nothing and gets False;
        # a uint64 n beyond INT64_MAX turns negative as intp, so it is refused too.
        n = _cast(context, builder, args[2], sig.args[2], types.intp)
        length = builder.extract_value(values.shape, 0)
        valid = builder.and_(
            builder.icmp_signed(">=", n, ir.Constant(n.type, 0)),
            builder.and_(
                builder.icmp_signed("<=", n, length), builder.icmp_signed("<=", n, ir.Constant(n.type, 0xFFFFFFFF))
            ),
        )
        count = builder.select(valid, builder.trunc(n, ir.IntType(32)), ir.Constant(ir.IntType(32), 0))
        ok = _call(
            context,
            builder,
            f"gpudyn_numba_{kind}_extend_u{bits}",
            types.int32,
            (types.voidptr, types.voidptr, types.uint32),
            (view, builder.bitcast(values.data, ir.IntType(8).as_pointer()), count),
        )
        return builder.and_(_truth(builder, ok), valid)

    return types.boolean(ref, values, n), codegen


# ---- reading an array in place ------------------------------------------------------------
# (Indented as the docstrings it ends, so that it reads as their last paragraph.)
_READS_DOC = """
    Which elements a kernel reads: a GGArray's as of the ref's view (taking
    ``view_arg()`` recomputes the array's ranges in a kernel on the array's stream, so a
    kernel launched after it on that stream reads every element the kernels
    queued before stored -- no host wait); a StaticArray's / VmmArray's up to
    its size then.  Global index i runs LFVector after LFVector: the order of
    ``to_numpy()`` and ``flatten()``."""


def _u8_pointer(builder, slot):
    return builder.bitcast(slot, ir.IntType(8).as_pointer())


def at(typingctx, ref, i):
    """``at(ref, i) -> value`` (the array's dtype): element i, i below
    ``ranged_size(ref)`` for a GGArray (``size(ref)`` for a StaticArray /
    VmmArray).  Any thread; an i past a GGArray's elements or a contiguous
    array's storage (or negative) gives 0 and reads nothing out of bounds.
    For loops over many elements ``span`` is faster (one bucket lookup per
    span, not per element).
    """
    kind, dtype = _ref("at", ref, ARRAYS)
    elem, bits = _element("at", dtype)
    _integer("at", "i", i)

    def codegen(context, builder, sig, args):
        view = _view_pointer(context, builder, sig.args[0], args[0])
        index = _cast(context, builder, args[1], sig.args[1], types.uint64)
        slot = cgutils.alloca_once(builder, context.get_data_type(elem))
        _call(
            context,
            builder,
            f"gpudyn_numba_{kind}_at_u{bits}",
            types.int32,
            (types.voidptr, types.uint64, types.voidptr),
            [view, index, _u8_pointer(builder, slot)],
        )
        return context.unpack_value(builder, elem, slot)  # the element's bytes, or zeros

    return elem(ref, i), codegen


at.__doc__ = (at.__doc__ or "") + _READS_DOC
at = intrinsic(at)


def span(typingctx, ref, lo, hi):
    """``span(ref, lo, hi) -> array``: a 1-D array (the array's dtype) over
    the elements ``[lo, lo + len)`` of ``[lo, hi)``, the first contiguous
    piece of that range (for a GGArray it ends at the end of a bucket or of an
    LFVector; hi is clipped to ``ranged_size(ref)`` / ``size(ref)``); empty
    when ``lo`` is at or past that end.  Its elements are the array's own (no
    copy; writes change them).  Visit a range span by span (a block per range
    of indices, its threads striding over each span: coalesced)::

        lo = start
        while lo < stop:
            s = gdn.span(ref, lo, stop)
            if s.size == 0:
                break
            for j in range(cuda.threadIdx.x, s.size, cuda.blockDim.x):
                use(s[j])                          # element lo + j
            lo += s.size

    """
    kind, dtype = _ref("span", ref, ARRAYS)
    elem, bits = _element("span", dtype)
    _integer("span", "lo", lo)
    _integer("span", "hi", hi)
    arrty = types.Array(elem, 1, "C")

    def codegen(context, builder, sig, args):
        view = _view_pointer(context, builder, sig.args[0], args[0])
        first = _cast(context, builder, args[1], sig.args[1], types.uint64)
        last = _cast(context, builder, args[2], sig.args[2], types.uint64)
        count = cgutils.alloca_once(builder, ir.IntType(64))
        address = _call(
            context,
            builder,
            f"gpudyn_numba_{kind}_span_u{bits}",
            types.uint64,
            (types.voidptr, types.uint64, types.uint64, types.voidptr),
            [view, first, last, _u8_pointer(builder, count)],
        )
        ary = make_array(arrty)(context, builder)
        data_ty = context.get_data_type(elem)
        itemsize = context.get_abi_sizeof(data_ty)
        intp = context.get_value_type(types.intp)
        populate_array(
            ary,
            data=builder.inttoptr(address, data_ty.as_pointer()),
            shape=[builder.load(count)],
            strides=[ir.Constant(intp, itemsize)],
            itemsize=ir.Constant(intp, itemsize),
            meminfo=None,
        )
        return ary._getvalue()

    return arrty(ref, lo, hi), codegen


span.__doc__ = (span.__doc__ or "") + _READS_DOC
span = intrinsic(span)


# ---- the other functions: ref, integer arguments, one shim call ----------------------------------
def _device_function(name: str, kinds, shim: str, params, result, doc: str):
    """The intrinsic ``name(ref, *params)``: `ref` of one of `kinds`, each parameter
    (name, C type) an integer converted to its C type, one call of `shim` (formatted
    with the ref's kind).  `result`: a Numba integer type, types.boolean (the shim's
    int != 0) or types.none (the shim's int dropped)."""
    ctypes_ = tuple(c for _, c in params)
    returns = types.int32 if result in (types.boolean, types.none) else result

    def typer(ref, args):
        kind, _ = _ref(name, ref, kinds)
        for (pname, _), t in zip(params, args):
            _integer(name, pname, t)

        def codegen(context, builder, sig, llargs):
            view = _view_pointer(context, builder, sig.args[0], llargs[0])
            cargs = [view] + [_cast(context, builder, v, t, c) for v, t, c in zip(llargs[1:], sig.args[1:], ctypes_)]
            r = _call(context, builder, shim.format(kind=kind), returns, (types.voidptr,) + ctypes_, cargs)
            if result is types.boolean:
                return _truth(builder, r)
            return context.get_dummy_value() if result is types.none else r

        return result(ref, *args), codegen

    # numba folds a call's arguments by the definition's signature: one per arity, no *args.
    if len(params) == 0:

        def definition(typingctx, ref):
            return typer(ref, ())
    elif len(params) == 1:

        def definition(typingctx, ref, a):  # type: ignore[misc]  # one arity each
            return typer(ref, (a,))
    elif len(params) == 2:

        def definition(typingctx, ref, a, b):  # type: ignore[misc]  # one arity each
            return typer(ref, (a, b))
    else:

        def definition(typingctx, ref, a, b, c):  # type: ignore[misc]  # one arity each
            return typer(ref, (a, b, c))

    definition.__name__ = definition.__qualname__ = name
    definition.__doc__ = doc
    return intrinsic(definition)


_U32, _U64 = types.uint32, types.uint64

size = _device_function(
    "size",
    ARRAYS,
    "gpudyn_numba_{kind}_size",
    [],
    _U64,
    """``size(ref) -> uint64``: elements stored in the array now (pushes of other
threads that have returned are counted): it reads the array's counters live,
so a kernel launched after the pushing kernels (stream order) counts all of
their elements, whenever its ref was taken.  A GGArray sums its LFVectors
(num_lfvectors loads): in a kernel that only reads the array, with a ref taken
after the producers were launched, ``ranged_size(ref)`` is the same count in
one load -- call that from every thread, this one from few.""",
)
ranged_size = _device_function(
    "ranged_size",
    ("ggarray",),
    "gpudyn_numba_ggarray_ranged_size",
    [],
    _U64,
    """``ranged_size(ref) -> uint64``: the GGArray's elements that ``at`` and
``span`` reach: its size when the ref was taken, in stream order (taking
``view_arg()`` queues the kernel that computes it after the array's earlier work: no
host wait).  One load: the bound for loops of every thread of a consumer.""",
)

# Heap and RWHeap
malloc = _device_function(
    "malloc",
    ALLOCATORS,
    "gpudyn_numba_{kind}_malloc",
    [("nbytes", _U64)],
    _U64,
    """``malloc(ref, nbytes) -> uint64``: device address of `nbytes` bytes (16-byte
aligned), 0 when memory is exhausted (counted; the host sees it in stats()).
Heap: any thread, any divergence, lanes that call together are aggregated.
RWHeap: RW_malloc by the calling lane alone.""",
)
free = _device_function(
    "free",
    ALLOCATORS,
    "gpudyn_numba_{kind}_free",
    [("address", _U64)],
    types.boolean,
    """``free(ref, address) -> bool``: frees an address malloc returned (any thread,
any kernel; 0 is fine).  False for a double, foreign or interior free, which
changes nothing and is counted as a bad free.""",
)

# RWHeap pages
get_page = _device_function(
    "get_page",
    ("rw_heap",),
    "gpudyn_numba_rw_heap_get_page",
    [],
    _U32,
    """``get_page(ref) -> uint32``: a free page of the RWHeap (random walk, RW-BM),
or INVALID_PAGE when none was found.  Any thread, any divergence.""",
)
free_page = _device_function(
    "free_page",
    ("rw_heap",),
    "gpudyn_numba_rw_heap_free_page",
    [("page", _U32)],
    types.boolean,
    """``free_page(ref, page) -> bool``: gives a page from get_page back (any thread).
False for a page that is free already, out of range or part of a malloc run (a
bad free: counted, nothing changes).""",
)
page_address = _device_function(
    "page_address",
    ("rw_heap",),
    "gpudyn_numba_rw_heap_page_address",
    [("page", _U32)],
    _U64,
    """``page_address(ref, page) -> uint64``: device address of the page's first byte.""",
)

# WarpHeap: warp collectives
warp_start = _device_function(
    "warp_start",
    ("warp_heap",),
    "gpudyn_numba_warp_heap_start",
    [("mask", _U32)],
    _U64,
    """``warp_start(ref, mask) -> handle`` (uint64): a collective over `mask`: every
lane of `mask` calls it, with the same mask (e.g. ``cuda.activemask()`` taken
once, or a ballot).  Every lane gets the warp's handle, 0 when memory is
exhausted.""",
)
warp_alloc = _device_function(
    "warp_alloc",
    ("warp_heap",),
    "gpudyn_numba_warp_heap_alloc",
    [("handle", _U64), ("mask", _U32), ("nbytes", _U64)],
    _U64,
    """``warp_alloc(ref, handle, mask, nbytes) -> uint64``: a collective over `mask`,
which must be exactly the calling lanes and a subset of the lanes that started;
each lane gets its own block of `nbytes` (16-byte aligned; 0 for 0 bytes or
when memory is exhausted).  No two collectives on one handle at the same time
(diverged groups of a warp take turns).""",
)
warp_tidy_up = _device_function(
    "warp_tidy_up",
    ("warp_heap",),
    "gpudyn_numba_warp_heap_tidy_up",
    [("handle", _U64), ("mask", _U32)],
    types.none,
    """``warp_tidy_up(ref, handle, mask)``: a collective like warp_alloc; frees every
block of the warp (the handle stays usable).""",
)
warp_end = _device_function(
    "warp_end",
    ("warp_heap",),
    "gpudyn_numba_warp_heap_end",
    [("handle", _U64)],
    types.boolean,
    """``warp_end(ref, handle) -> bool``: each lane that started calls it once, in any
order, converged or not; the last one frees the warp's memory (and gets True).
The handle is invalid afterwards.""",
)


# ---- addresses as arrays ------------------------------------------------------------------
@intrinsic
def array(typingctx, address, count, dtype):
    """``array(address, count, dtype)``: a 1-D C-contiguous array of `count`
    elements of `dtype` (e.g. ``np.int32``) at a device address from malloc,
    page_address or warp_alloc.  It does not own the memory."""
    _integer("array", "address", address)
    _integer("array", "count", count)
    if not isinstance(dtype, types.DTypeSpec):
        raise TypingError(
            f"gpudyn.numba.array: argument 'dtype' must be a NumPy scalar type such as np.int32, got {dtype}"
        )
    arrty = types.Array(dtype.dtype, 1, "C")

    def codegen(context, builder, sig, args):
        ary = make_array(arrty)(context, builder)
        elem = context.get_data_type(arrty.dtype)
        itemsize = context.get_abi_sizeof(elem)
        a = _cast(context, builder, args[0], sig.args[0], types.uint64)
        data = builder.inttoptr(a, elem.as_pointer())
        n = _cast(context, builder, args[1], sig.args[1], types.intp)
        intp = context.get_value_type(types.intp)
        populate_array(
            ary,
            data=data,
            shape=[n],
            strides=[ir.Constant(intp, itemsize)],
            itemsize=ir.Constant(intp, itemsize),
            meminfo=None,
        )
        return ary._getvalue()

    return arrty(address, count, dtype), codegen
