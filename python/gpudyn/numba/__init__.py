"""gpudyn.numba: gpudyn's structures inside Numba ``@cuda.jit`` kernels.

Install with ``pip install 'gpudyn-cu13[numba]'`` (numba-cuda).  A kernel gets a
structure through its ``view_arg()``, passed as a kernel argument (the same
object a CuPy ``RawKernel`` takes), and calls the functions below on it::

    import numpy as np
    from numba import cuda
    import gpudyn
    import gpudyn.numba as gdn

    @cuda.jit
    def multiples(out, n):                 # thread t emits t % 4 values
        t = cuda.grid(1)
        if t < n:
            for k in range(t % 4):
                gdn.push_back(out, t * 10 + k)

    arr = gpudyn.GGArray(np.int64)
    multiples[40, 256](arr.view_arg(), 10_000)   # the array's view, taken now
    values = arr.to_numpy()

``obj.view_arg()`` is the structure's C view (``gpudyn_*_view_t``) as a
structured NumPy scalar whose class names the structure and the element
dtype; importing gpudyn.numba registers those classes with numba-cuda, which
types the argument as a named tuple of the view's fields and passes it by
value, like the C++ API passes the view (a CuPy kernel gets the same bytes).
Take it when launching (``kernel[g, b](arr.view_arg(), ...)``): it reflects
the structure at that moment (a later ``reserve``/``grow`` is seen by
arguments taken after it).  Taking it does not wait for the device: an
array's ``view_arg()`` only queues, on the array's stream, the kernel that
indexes its elements for ``at``/``span`` (the status is checked by the next
host call that waits).  The structure must stay open while a kernel uses it:
the argument holds raw device addresses, so a kernel launched with the
argument of a closed structure uses freed memory, as a freed pointer would
(numba-cuda types the argument by its class once and caches it, so no launch
can check it).  The device functions call their first parameter ``ref``.

Compiling ahead of time (no GPU, no object): :func:`ref_type` gives the Numba
type of a structure's argument for a ``numba.cuda.compile`` signature::

    sig = (gdn.ref_type(gpudyn.GGArray, np.int64), numba.cuda.types.int64)
    ptx, _ = numba.cuda.compile(multiples, sig, device=False, output="ptx", cc=(9, 0), abi="numba")

``abi="numba"`` is needed because ``numba.cuda.compile`` defaults to
``abi="c"``, which numba-cuda (0.30) supports for device functions only; a
kernel (``device=False``) is compiled with the Numba ABI.

A kernel calling ``malloc`` takes about 80 registers a thread: launched with
blocks of more than 768 threads it needs ``@cuda.jit(launch_bounds=threads)``
(else the launch fails for want of registers).

Kernels that call these functions cannot be cached (``@cuda.jit(cache=True)``):
they link the shims, and numba-cuda does not cache kernels that link files
(its error: "Cannot pickle CUDACodeLibrary with linking files").

Device functions (any thread, under any divergence, unless said otherwise):

* GGArray, StaticArray, VmmArray: ``push_back(ref, value) -> bool`` (value
  converted to the array's dtype; False when the array cannot take it, nothing
  stored; a complex value for a real dtype is a TypingError), ``extend(ref,
  values, n) -> bool`` (``values[0:n]`` of a 1-D array, e.g. a
  ``cuda.local.array``, all or nothing; n outside ``[0, len(values)]`` stores
  nothing and gives False), ``size(ref) -> uint64``.
  Lanes that call together share one reservation (one atomic per warp group).
  Element types: every NumPy dtype the arrays hold (bool, integers, floats,
  complex).
* Reading them in place, from a kernel launched after the producers (no host
  wait, no copy): ``at(ref, i) -> value`` (element i in the order of
  ``to_numpy()``; 0 past the elements), ``span(ref, lo, hi) -> array`` (the
  first contiguous piece of elements ``[lo, hi)`` as a 1-D array: loop
  ``lo += len(span)``), and for a GGArray ``ranged_size(ref) -> uint64``
  (the count ``at`` and ``span`` reach, one load: the loop bound for every
  thread; ``size`` sums the LFVectors).  A GGArray's ref covers the elements
  stored by the work queued on its stream before its argument was taken:
  ``view_arg()`` queues the kernel that indexes them, it does not wait::

      @cuda.jit
      def consume(src, dst):                # grid-stride over src, pushes into dst
          n = gdn.ranged_size(src)
          for i in range(cuda.grid(1), n, cuda.gridsize(1)):
              x = gdn.at(src, i)
              if x % 2 == 0:
                  gdn.push_back(dst, x // 2)

      produce[64, 256, s](a.view_arg())                   # a, out: GGArrays on stream s
      consume[64, 256, s](a.view_arg(), out.view_arg())   # taken after produce: sees its elements
      a.clear()                             # stream-ordered too: no host wait anywhere
* Heap: ``malloc(ref, nbytes) -> address`` (uint64, 0 when exhausted),
  ``free(ref, address) -> bool``.
* RWHeap: ``get_page(ref) -> page`` (uint32, ``INVALID_PAGE`` when none is
  free), ``free_page(ref, page) -> bool``, ``page_address(ref, page) -> address``;
  ``malloc``/``free`` as for Heap (RW_malloc by each lane alone).
* WarpHeap (warp collectives, FDGMalloc's rules): ``warp_start(ref, mask) ->
  handle``: every lane of `mask` calls it with the same mask;
  ``warp_alloc(ref, handle, mask, nbytes) -> address`` and
  ``warp_tidy_up(ref, handle, mask)``: `mask` is exactly the calling lanes, a
  subset of the lanes that started, and no two collectives on one handle run
  at once; ``warp_end(ref, handle) -> bool``: each lane that started, once, in
  any order.  A handle of 0 (start failed) makes the later calls fail and
  counts as misuse.  Take the mask with ``cuda.activemask()`` where the lanes
  are together, or build it with ``cuda.ballot_sync``.
* ``array(address, count, dtype)``: a 1-D array over memory from malloc,
  page_address or warp_alloc (does not own it).

Failures are return values (0 / False / INVALID_PAGE) and are recorded where
the host reads them (the heaps' ``stats()``; an array's
``status``, and its next host call raises OutOfMemoryError); nothing stored
before is lost.

How it is built: each function is an extern "C" shim over the device headers
(``shims/gpudyn_numba.cu``), compiled by meson with nvcc when gpudyn is
installed into PTX and LTO-IR per architecture, installed here, and linked by
numba-cuda (``numba.cuda.declare_device(..., link=[...])``).  The functions are
intrinsics, so kernels compile (``cuda.compile``) without a GPU.
``GPUDYN_NUMBA_LINK=ltoir|ptx`` picks the file kind (see ``_link.py``).

Versions: written and tested against numba-cuda 0.30 (the ``numba.cuda``
extension API it provides: ``declare_device(..., abi="c")``,
``numba.cuda.extending.intrinsic``); LTO-IR needs nvJitLink of the CUDA major
version gpudyn was built with.
"""

from __future__ import annotations

import numpy as _np

if not hasattr(_np, "row_stack"):
    # numba-cuda 0.30.x registers an overload of np.row_stack when its CUDA target
    # initializes (numba/cuda/np/arrayobj.py, for any NumPy >= 2.0).  NumPy 2.5
    # removed that alias of np.vstack (deprecated since 2.0), so the registration
    # raises AttributeError and no kernel compiles.  Restoring the alias it was
    # lets numba-cuda initialize (numba itself skips it on NumPy >= 2.5).
    _np.row_stack = _np.vstack

try:
    import numba.cuda  # noqa: F401
    from numba.cuda.extending import intrinsic as _intrinsic  # noqa: F401  (numba-cuda's own extension API)
except ImportError as _e:  # numba without numba-cuda, or neither
    raise ImportError("gpudyn.numba needs numba-cuda (pip install 'gpudyn-cu13[numba]'): " + str(_e)) from _e

from ._device import (  # noqa: E402
    INVALID_PAGE,
    array,
    at,
    extend,
    free,
    free_page,
    get_page,
    malloc,
    page_address,
    push_back,
    ranged_size,
    size,
    span,
    warp_alloc,
    warp_end,
    warp_start,
    warp_tidy_up,
)
from ._link import build_info, link_file  # noqa: E402
from ._refs import kernel_ref as ref  # noqa: E402,F401  (deprecated: obj.view_arg())
from ._refs import ref_type  # noqa: E402

__all__ = [
    "ref_type",
    "push_back",
    "extend",
    "size",
    "at",
    "span",
    "ranged_size",
    "malloc",
    "free",
    "get_page",
    "free_page",
    "page_address",
    "INVALID_PAGE",
    "warp_start",
    "warp_alloc",
    "warp_tidy_up",
    "warp_end",
    "array",
    "build_info",
    "link_file",
]
