"""Pages from a gpudyn.RWHeap inside a user's CuPy RawModule kernels.

Kernel 1: every thread whose id is not a multiple of 3 takes a page (get_page
with the RW-BM walk: any thread, any branch; a per-thread random stream), and
writes its id and the page id into it.  Kernel 2, a later launch: each of
those threads reads its page back and gives it back (free_page); then every
thread frees its page a second time, which the heap refuses and counts.  The
device header is compiled by NVRTC with gpudyn.nvrtc_options().

    python examples/rw_heap/cupy_pages.py [threads]

Needs a GPU and CuPy (without either it says so on stderr and exits 77,
"skipped"); checks every page against NumPy and the heap's counters.
"""

import sys

import gpudyn
import numpy as np

KERNELS = r"""
#include <gpudyn/rw_heap.cuh>

extern "C" __global__ void take(gpudyn_rw_heap_view_t view, unsigned n, unsigned long long seed, unsigned* pages) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                                    // threads may leave early
    pages[i] = gpudyn::kRwInvalidPage;
    if (i % 3 == 0) return;                                // and the others take pages diverged
    const gpudyn::rw_heap_ref heap{view};
    gpudyn::detail::counter_rng rng(seed, i);              // one random stream per thread
    const unsigned page = heap.get_page<gpudyn::rw_algorithm::rw_bm>(rng);
    if (page != gpudyn::kRwInvalidPage) {                  // kRwInvalidPage: no free page found
        unsigned* p = static_cast<unsigned*>(heap.page_address(page));
        p[0] = i;
        p[1] = page;
    }
    pages[i] = page;
}

// owner[i]: what the page says about who took it; freed[i]: free_page's answer.
extern "C" __global__ void give_back(gpudyn_rw_heap_view_t view, unsigned n, const unsigned* pages,
                                     unsigned long long* owner, unsigned char* freed) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const gpudyn::rw_heap_ref heap{view};
    if (pages[i] != gpudyn::kRwInvalidPage) {
        const unsigned* p = static_cast<const unsigned*>(heap.page_address(pages[i]));
        owner[i] = (static_cast<unsigned long long>(p[1]) << 32) | p[0];
    }
    freed[i] = heap.free_page(pages[i]);                   // false: a bad free (counted, nothing changes)
}
"""


def main(n: int = 200_000) -> int:
    try:
        import cupy as cp
    except ImportError:
        print("cupy_pages.py: CuPy is not installed; skipped", file=sys.stderr)
        return 77
    try:
        gpudyn.device_count()
    except gpudyn.NoDeviceError as e:
        print(f"cupy_pages.py: no CUDA device ({e}); skipped", file=sys.stderr)
        return 77
    module = cp.RawModule(code=KERNELS, options=tuple(gpudyn.nvrtc_options()))
    take, give_back = module.get_function("take"), module.get_function("give_back")
    grid, block = ((n + 255) // 256,), (256,)
    count = 1 << 18  # more pages than takers: every request must be served

    with gpudyn.RWHeap(page_count=count, page_size=64) as heap:
        view_arg = heap.view_arg()  # the gpudyn_rw_heap_view_t, passed by value
        pages = cp.empty(n, dtype=cp.uint32)
        take(grid, block, (view_arg, np.uint32(n), np.uint64(2024), pages))
        got = pages.get()
        asked = np.arange(n) % 3 != 0
        taken = got[asked]
        ok = (got[~asked] == 0xFFFFFFFF).all() and (taken < count).all() and len(np.unique(taken)) == asked.sum()
        print(
            f"{n} threads: {asked.sum()} pages taken, all distinct: {ok}; {heap.free_page_count} of {count} pages free"
        )
        ok = ok and heap.free_page_count == count - asked.sum()

        owner, freed = cp.zeros(n, dtype=cp.uint64), cp.zeros(n, dtype=cp.uint8)
        give_back(grid, block, (view_arg, np.uint32(n), pages, owner, freed))
        i = np.arange(n, dtype=np.uint64)
        want = (got.astype(np.uint64) << np.uint64(32)) | i
        ok = ok and (owner.get()[asked] == want[asked]).all()
        f = freed.get().astype(bool)
        ok = ok and f[asked].all() and not f[~asked].any()  # INVALID_PAGE is not a page: refused
        info = heap.stats()
        print(f"given back: {int(f.sum())}, free pages {info['free_pages']}, bad frees {info['bad_frees']}")
        ok = ok and info["free_pages"] == count and info["bad_frees"] == (~asked).sum()

        give_back(grid, block, (view_arg, np.uint32(n), pages, owner, freed))  # a second time
        ok = ok and not freed.get().any() and heap.stats()["bad_frees"] == n + (~asked).sum()
        ok = ok and heap.free_page_count == count
    print("cupy_pages.py:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000))
