// GGArray growth inside user kernels from gpudyn's own memory (the array's
// growth arena: its budget), never from CUDA's device malloc heap.  The pushes are the
// block-cooperative push_back of ggarray.cuh, as a user's kernel writes them.
//   1  A kernel that uses CUDA's device malloc runs first in the process (CUDA's
//      malloc heap is then fixed, at its 8 MiB default), then one user kernel
//      grows a fresh GGArray to 1.1e9 uint32 (4.4 GB): every value present
//      exactly once, the bucket bytes within the GGArray's 2x bound.
//   2  The budget runs out in the middle of a kernel: the pushes that found no
//      bucket return false and store nothing, the status word says
//      ALLOCATION_FAILED, the elements of an earlier launch and every push that
//      returned true are there exactly once; set_budget then lets the next
//      launch store the rest (every value once; the status bits stay until
//      clear_status).
//   3  Several GGArrays side by side in one kernel: two with their own arenas,
//      two taking their arenas from a given heap (whose mapping is their
//      budget, and which refuses destroy while they live); each holds exactly
//      its values; clear keeps the buckets (the same pushes take no new
//      memory); destroy gives the shared heap every run back.
//   4  Options of an older caller (struct_size before max_budget_bytes) are
//      accepted and the later fields not read; budget arguments checked.
//   5  Memory follows the output (issue 40): a default-constructed array takes
//      3.2 GB from one kernel of per-thread push_back (no size named), holds
//      at most 2x the elements' bytes plus one first bucket per LFVector, and
//      gives the device its memory back once destroyed and trimmed.
//   6  A small output holds little; clear keeps the buckets (the same pushes
//      map nothing new); trim of the empty array gives every bucket back and
//      the array grows again after it.
//   7  The device runs out of memory in the middle of an iterative loop: the
//      pushes that found no memory return false, the status says so, nothing
//      stored is lost, and once memory is free again the loop stores the rest
//      (under a sanitizer a 24 MiB budget runs out instead, then is raised).
// Under GPUDYN_SANITIZER the sizes shrink (kSmall below): 2M values in part 1
// (the 4 GB run takes minutes under the tools), 2M in part 2.
#include <gpudyn/ggarray.cuh>

extern "C" {
#include "ggarray_test_util.h"
}

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <ctime>
#include <vector>

using u32 = unsigned;

// Threads of the push and check kernels; push_storage is sized for them.
constexpr unsigned kThreads = 256;
constexpr gpudyn::insert_algo kAlgo = gpudyn::insert_algo::warp_scan;
using storage = gpudyn::push_storage<kThreads, kAlgo>;

static bool g_small = false; // under a sanitizer
// GPUDYN_ARENA_PREMAP (tests/sanitize.sh) maps arenas ahead: the bounds on what they hold do not apply.
static bool premapped = false;

// ---- kernels -------------------------------------------------------------

// Unrelated work that uses CUDA's device malloc: after it, CUDA's malloc heap
// can no longer be resized in this process.
__global__ void cuda_malloc_kernel(unsigned long long* got) {
    void* p = malloc(64);
    if (p != nullptr) {
        static_cast<volatile char*>(p)[0] = 1;
        atomicAdd(got, 1ull);
    }
    free(p);
}

// Block b handles i in lo + [b * rounds * blockDim, (b + 1) * rounds * blockDim),
// cut to hi, one per thread per round; every thread of the block calls
// push_back each round.  Pushes tag + i unless skip[i]; stored[i] = 1 when the
// push returned true; failed counts the pushes that returned false.
__global__ void push_range(gpudyn_ggarray_view_t v, unsigned long long lo, unsigned long long hi, unsigned rounds,
                           u32 tag, const uint8_t* skip, uint8_t* stored, unsigned long long* failed) {
    __shared__ storage temp;
    const gpudyn::ggarray_ref<u32> a{v};
    const unsigned long long first = lo + (unsigned long long)blockIdx.x * rounds * blockDim.x;
    for (unsigned r = 0; r < rounds; ++r) {
        const unsigned long long i = first + (unsigned long long)r * blockDim.x + threadIdx.x;
        const bool want = i < hi && (skip == nullptr || skip[i] == 0);
        const bool ok = a.push_back(temp, want, u32(tag + i));
        if (want && ok && stored != nullptr) stored[i] = 1;
        if (want && !ok) atomicAdd(failed, 1ull);
    }
}

// The same pushes into four arrays at once (part 3): array k gets tag k << 28.
__global__ void push_four(gpudyn_ggarray_view_t v0, gpudyn_ggarray_view_t v1, gpudyn_ggarray_view_t v2,
                          gpudyn_ggarray_view_t v3, unsigned long long n, unsigned rounds, unsigned long long* failed) {
    __shared__ storage temp;
    const gpudyn_ggarray_view_t views[4] = {v0, v1, v2, v3};
    const unsigned long long first = (unsigned long long)blockIdx.x * rounds * blockDim.x;
    for (unsigned r = 0; r < rounds; ++r) {
        const unsigned long long i = first + (unsigned long long)r * blockDim.x + threadIdx.x;
        for (unsigned k = 0; k < 4; ++k) {
            const bool ok = gpudyn::ggarray_ref<u32>{views[k]}.push_back(temp, i < n, u32((k << 28) + i));
            if (i < n && !ok) atomicAdd(failed, 1ull);
        }
    }
}

// Every element x (global index < size, read with at()): i = x - tag must be
// below n and expected (expect[i] != 0; all i when expect is null); its bit in
// `seen` is set, and a bit found set already is a duplicate.
__global__ void check_values(gpudyn_ggarray_view_t v, unsigned long long size, u32 tag, unsigned long long n,
                             const uint8_t* expect, unsigned* seen, unsigned long long* counts) {
    const gpudyn::ggarray_ref<u32> a{v};
    for (unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; j < size;
         j += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long i = u32(a.at(j) - tag);
        if (i >= n || (expect != nullptr && expect[i] == 0)) {
            atomicAdd(counts + 0, 1ull);
            continue;
        }
        const unsigned bit = 1u << (i % 32);
        if (atomicOr(seen + i / 32, bit) & bit) atomicAdd(counts + 1, 1ull);
    }
}

// One element a thread, grid-stride, the natural form: pushes tag + i for i in [lo, hi).
__global__ void push_each(gpudyn_ggarray_view_t v, unsigned long long lo, unsigned long long hi, u32 tag,
                          unsigned long long* failed) {
    const gpudyn::ggarray_ref<u32> a{v};
    for (unsigned long long i = lo + blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < hi;
         i += (unsigned long long)gridDim.x * blockDim.x)
        if (!a.push_back(u32(tag + i))) atomicAdd(failed, 1ull);
}

// ---- host helpers ----------------------------------------------------------

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

static unsigned grid_blocks() {
    int dev = 0, sms = 0;
    CUDA_OK(cudaGetDevice(&dev));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return unsigned(sms) * 8; // 8 blocks of 256 threads per SM: full occupancy, many LFVectors busy
}

static gpudyn_ggarray_view_t view_of(gpudyn_ggarray_t g) {
    gpudyn_ggarray_view_t v;
    memset(&v, 0, sizeof(v));
    CHECK_OK(gpudyn_ggarray_get_view(g, &v, NULL));
    return v;
}

// Launches push_range over [lo, hi); returns the pushes that returned false.
static unsigned long long push(gpudyn_ggarray_t g, unsigned long long lo, unsigned long long hi, u32 tag,
                               const uint8_t* skip, uint8_t* stored) {
    unsigned long long* failed = nullptr;
    CUDA_OK(cudaMalloc(&failed, sizeof(*failed)));
    CUDA_OK(cudaMemset(failed, 0, sizeof(*failed)));
    const unsigned grid = grid_blocks();
    const unsigned long long per_block = (hi - lo + grid - 1) / grid;
    const unsigned rounds = unsigned((per_block + kThreads - 1) / kThreads);
    push_range<<<grid, kThreads>>>(view_of(g), lo, hi, rounds, tag, skip, stored, failed);
    CUDA_OK(cudaGetLastError());
    unsigned long long f = ~0ull;
    CUDA_OK(cudaMemcpy(&f, failed, sizeof(f), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(failed));
    return f;
}

static uint32_t status_word(gpudyn_ggarray_t g) {
    uint32_t s = ~0u;
    CHECK_OK(gpudyn_ggarray_get_status(g, &s, NULL));
    return s;
}

// True when g holds exactly {tag + i : i < n, expect[i]} (all i < n when
// expect is null), each once; `count` is the size of that set.
static bool holds_exactly(gpudyn_ggarray_t g, u32 tag, unsigned long long n, const uint8_t* expect,
                          unsigned long long count, const char* what) {
    uint64_t size = 0;
    CHECK_OK(gpudyn_ggarray_size(g, &size, NULL));
    unsigned* seen = nullptr;
    unsigned long long* counts = nullptr; // [0] unexpected values, [1] duplicates
    const size_t words = size_t(n / 32 + 1);
    CUDA_OK(cudaMalloc(&seen, words * sizeof(unsigned)));
    CUDA_OK(cudaMemset(seen, 0, words * sizeof(unsigned)));
    CUDA_OK(cudaMalloc(&counts, 2 * sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(counts, 0, 2 * sizeof(unsigned long long)));
    check_values<<<grid_blocks(), kThreads>>>(view_of(g), size, tag, n, expect, seen, counts);
    CUDA_OK(cudaGetLastError());
    unsigned long long c[2] = {~0ull, ~0ull};
    CUDA_OK(cudaMemcpy(c, counts, sizeof(c), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(seen));
    CUDA_OK(cudaFree(counts));
    const bool ok = size == count && c[0] == 0 && c[1] == 0;
    if (!ok)
        fprintf(stderr, "%s: size %llu (expected %llu), %llu unexpected value(s), %llu duplicate(s)\n", what,
                (unsigned long long)size, count, c[0], c[1]);
    return ok;
}

static gpudyn_ggarray_t make(uint64_t budget, uint64_t max_budget, gpudyn_heap_t heap, uint32_t lfvectors,
                             uint64_t pool_bytes) {
    gpudyn_ggarray_options_t o;
    CHECK_OK(gpudyn_ggarray_options_init(&o));
    o.num_lfvectors = lfvectors;
    o.budget_bytes = budget;
    o.max_budget_bytes = max_budget;
    o.heap = heap;
    o.pool_bytes = pool_bytes;
    gpudyn_ggarray_t g = NULL;
    CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
    return g;
}

// ---- 1 ---------------------------------------------------------------------
static void grow_after_cuda_malloc() {
    // n values of 4 bytes: 1.1e9 is 4.4 GB (>= 4 GiB).  Budget: the buckets hold
    // up to 2x the elements, plus room for the heap's page runs.
    const unsigned long long n = g_small ? (1ull << 21) : 1100000000ull;
    const uint64_t budget = g_small ? (64ull << 20) : (16ull << 30);
    gpudyn_ggarray_t g = make(budget, budget, NULL, 512, 0);
    uint64_t b = 0, m = 0;
    CHECK_OK(gpudyn_ggarray_get_budget(g, &b, &m));
    CHECK(b >= budget && m >= b);
    CHECK(push(g, 0, n, 0, NULL, NULL) == 0);
    CHECK(status_word(g) == 0);
    CHECK(holds_exactly(g, 0, n, NULL, n, "1: 4 GB grown in one kernel"));
    uint64_t bytes = 0;
    CHECK_OK(gpudyn_ggarray_allocated_bytes(g, &bytes, NULL));
    const uint64_t first_buckets = 512ull * 1024 * 4;
    CHECK(bytes >= n * 4 && bytes <= 2 * n * 4 + first_buckets); // every bucket from the heap, 2x bound
    CHECK_OK(gpudyn_ggarray_destroy(g));
}

// ---- 2 ---------------------------------------------------------------------
static void budget_runs_out_mid_kernel() {
    const unsigned long long n1 = g_small ? (1ull << 18) : (1ull << 20); // first launch: fits
    const unsigned long long n = g_small ? (2ull << 20) : (8ull << 20);  // 8 MB (32 MB) in all
    const uint64_t budget = g_small ? (4ull << 20) : (16ull << 20);      // half of it
    const uint64_t raised = 256ull << 20;
    // No pool: every bucket comes from the heap.
    gpudyn_ggarray_t g = make(budget, raised, NULL, 64, ~0ull);
    uint8_t* stored = nullptr;
    CUDA_OK(cudaMalloc(&stored, n));
    CUDA_OK(cudaMemset(stored, 0, n));
    CHECK(push(g, 0, n1, 0, NULL, stored) == 0);
    CHECK(status_word(g) == 0);
    const unsigned long long failed = push(g, n1, n, 0, NULL, stored);
    CHECK(failed > 0); // the budget ran out in this kernel...
    CHECK((status_word(g) & GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED) != 0);
    std::vector<uint8_t> host(n);
    CUDA_OK(cudaMemcpy(host.data(), stored, n, cudaMemcpyDeviceToHost));
    unsigned long long kept = 0, early = 0;
    for (unsigned long long i = 0; i < n; ++i) {
        kept += host[i];
        early += i < n1 && host[i];
    }
    CHECK(early == n1); // the first launch's elements are all there
    // ...after some pushes of it succeeded: every push either stored or said false
    CHECK(kept > n1 && kept + failed == n);
    CHECK(holds_exactly(g, 0, n, stored, kept, "2: after the budget ran out"));
    // A larger budget: the next launch stores what failed.
    uint64_t b = 0;
    CHECK_OK(gpudyn_ggarray_set_budget(g, raised, NULL));
    CHECK_OK(gpudyn_ggarray_get_budget(g, &b, NULL));
    CHECK(b >= raised);
    // set_budget lifted the seals the failed buckets left (no clear_status
    // first); the status bits stay until clear_status.
    CHECK(push(g, 0, n, 0, stored, stored) == 0);
    CHECK(status_word(g) == GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED);
    CHECK_OK(gpudyn_ggarray_clear_status(g, NULL));
    CHECK(status_word(g) == 0);
    CHECK(holds_exactly(g, 0, n, NULL, n, "2: after set_budget"));
    CHECK_INVALID(gpudyn_ggarray_set_budget(g, raised + (1ull << 30), NULL), "budget_bytes");
    CUDA_OK(cudaFree(stored));
    CHECK_OK(gpudyn_ggarray_destroy(g));
}

// ---- 3 ---------------------------------------------------------------------
static void side_by_side() {
    const unsigned long long n = g_small ? (1ull << 18) : (2ull << 20);
    gpudyn_heap_options_t ho;
    CHECK_OK(gpudyn_heap_options_init(&ho));
    ho.initial_bytes = 64ull << 20;
    ho.max_bytes = 256ull << 20;
    gpudyn_heap_t heap = NULL;
    CHECK_OK(gpudyn_heap_create(&heap, &ho, NULL));
    gpudyn_ggarray_t g[4] = {make(32ull << 20, 0, NULL, 32, 0), make(32ull << 20, 0, NULL, 32, 0),
                             make(0, 0, heap, 32, 0), make(0, 0, heap, 32, 0)};
    { // the given heap's mapping is the budget of both arrays that share it
        gpudyn_heap_stats_t st;
        memset(&st, 0, sizeof(st));
        st.struct_size = sizeof(st);
        CHECK_OK(gpudyn_heap_get_stats(heap, &st, NULL));
        uint64_t b = 0, m = 0;
        CHECK_OK(gpudyn_ggarray_get_budget(g[2], &b, &m));
        CHECK(b == st.bytes_mapped && m == st.bytes_max);
        gpudyn_ggarray_options_t o;
        CHECK_OK(gpudyn_ggarray_options_init(&o));
        o.heap = heap;
        o.budget_bytes = 1 << 20;
        gpudyn_ggarray_t bad = NULL;
        CHECK_INVALID(gpudyn_ggarray_create(&bad, &o, NULL), "budget_bytes");
        CHECK(bad == NULL);
    }
    unsigned long long* failed = nullptr;
    CUDA_OK(cudaMalloc(&failed, sizeof(*failed)));
    CUDA_OK(cudaMemset(failed, 0, sizeof(*failed)));
    const unsigned grid = grid_blocks();
    const unsigned rounds = unsigned(((n + grid - 1) / grid + kThreads - 1) / kThreads);
    push_four<<<grid, kThreads>>>(view_of(g[0]), view_of(g[1]), view_of(g[2]), view_of(g[3]), n, rounds, failed);
    CUDA_OK(cudaGetLastError());
    unsigned long long f = ~0ull;
    CUDA_OK(cudaMemcpy(&f, failed, sizeof(f), cudaMemcpyDeviceToHost));
    CHECK(f == 0);
    CUDA_OK(cudaFree(failed));
    for (u32 k = 0; k < 4; ++k) {
        char what[64];
        snprintf(what, sizeof(what), "3: array %u of 4", k);
        CHECK(holds_exactly(g[k], k << 28, n, NULL, n, what));
    }
    // clear keeps the buckets: the same pushes again take no new memory
    uint64_t before = 0, after = 0;
    CHECK_OK(gpudyn_ggarray_allocated_bytes(g[0], &before, NULL));
    CHECK_OK(gpudyn_ggarray_clear(g[0], NULL));
    CHECK(push(g[0], 0, n, 0, NULL, NULL) == 0);
    CHECK_OK(gpudyn_ggarray_allocated_bytes(g[0], &after, NULL));
    CHECK(before > 0 && after == before);
    CHECK(holds_exactly(g[0], 0, n, NULL, n, "3: after clear"));
    // the shared heap holds the buckets of two arrays: it refuses destroy
    gpudyn_heap_stats_t st;
    memset(&st, 0, sizeof(st));
    st.struct_size = sizeof(st);
    CHECK_OK(gpudyn_heap_get_stats(heap, &st, NULL));
    CHECK(st.allocations > 0 && st.bytes_allocated >= 2 * n * 4);
    CHECK_INVALID(gpudyn_heap_destroy(heap), "heap");
    for (int k = 0; k < 4; ++k) CHECK_OK(gpudyn_ggarray_destroy(g[k]));
    // destroy gave every bucket back (stream-ordered: get_stats waits for it)
    CHECK_OK(gpudyn_heap_get_stats(heap, &st, NULL));
    CHECK(st.allocations == 0 && st.bytes_allocated == 0 && st.bad_frees == 0);
    CHECK_OK(gpudyn_heap_destroy(heap));
}

// ---- 4 ---------------------------------------------------------------------
static void older_options() {
    gpudyn_ggarray_options_t o;
    CHECK_OK(gpudyn_ggarray_options_init(&o));
    o.struct_size = offsetof(gpudyn_ggarray_options_t, max_budget_bytes); // a caller built before the field
    o.max_budget_bytes = 1;                                               // beyond its struct_size: never read
    o.heap = reinterpret_cast<gpudyn_heap_t>(0x10);                       // same
    o.num_lfvectors = 8;
    gpudyn_ggarray_t g = NULL;
    CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
    uint64_t b = 0, m = 0;
    CHECK_OK(gpudyn_ggarray_get_budget(g, &b, &m));
    CHECK(b > 0 && m >= b); // the defaults
    CHECK(push(g, 0, 100000, 0, NULL, NULL) == 0);
    CHECK(holds_exactly(g, 0, 100000, NULL, 100000, "4: older options"));
    CHECK_OK(gpudyn_ggarray_destroy(g));
    o.struct_size = offsetof(gpudyn_ggarray_options_t, max_budget_bytes) - 8;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &o, NULL), "struct_size");
}

static uint64_t held_bytes(gpudyn_ggarray_t g) {
    uint64_t b = ~0ull;
    CHECK_OK(gpudyn_ggarray_allocated_bytes(g, &b, NULL));
    return b;
}
static size_t free_bytes() {
    size_t f = 0, t = 0;
    CUDA_OK(cudaMemGetInfo(&f, &t));
    return f;
}
// Destroyed arrays' mappings go back on the library's host thread once their
// work is done; then gpudyn_trim hands the reserve to the driver.
static void settle_and_trim() {
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < 50; ++i) {
        uint64_t released = 0;
        CHECK_OK(gpudyn_trim(0, &released));
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

// ---- 5 ---------------------------------------------------------------------
static void default_array_takes_3_2_gb() {
    const unsigned long long n = g_small ? (4ull << 20) : 800000000ull; // 3.2 GB of uint32
    settle_and_trim();
    const size_t free_before = free_bytes();
    gpudyn_ggarray_options_t o;
    CHECK_OK(gpudyn_ggarray_options_init(&o)); // every default: no budget named
    gpudyn_ggarray_t g = NULL;
    CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
    unsigned long long* failed = nullptr;
    CUDA_OK(cudaMalloc(&failed, sizeof(*failed)));
    CUDA_OK(cudaMemset(failed, 0, sizeof(*failed)));
    push_each<<<grid_blocks(), kThreads>>>(view_of(g), 0, n, 7, failed);
    CUDA_OK(cudaGetLastError());
    unsigned long long f = ~0ull;
    CUDA_OK(cudaMemcpy(&f, failed, sizeof(f), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(failed));
    CHECK(f == 0);
    CHECK(status_word(g) == 0);
    CHECK(holds_exactly(g, 7, n, NULL, n, "5: 3.2 GB into a default array"));
    const uint64_t held = held_bytes(g);
    const uint64_t first_buckets = 512ull * 1024 * 4, granule = 2ull << 20;
    if (!(held >= n * 4 && (premapped || held <= 2 * n * 4 + first_buckets + granule)))
        fprintf(stderr, "5: holds %llu bytes for %llu bytes of elements\n", (unsigned long long)held, n * 4);
    CHECK(held >= n * 4 && (premapped || held <= 2 * n * 4 + first_buckets + granule));
    CHECK_OK(gpudyn_ggarray_destroy(g));
    settle_and_trim();
    const size_t free_after = free_bytes();
    if (free_after + (64ull << 20) < free_before)
        fprintf(stderr, "5: %zu bytes free before, %zu after destroy and trim\n", free_before, free_after);
    CHECK(free_after + (64ull << 20) >= free_before);
}

// ---- 6 ---------------------------------------------------------------------
static void small_output_clear_and_trim() {
    const unsigned long long n = 1ull << 20; // 4 MB of uint32
    gpudyn_ggarray_t g = make(0, 0, NULL, 512, 0);
    CHECK(premapped || held_bytes(g) == 0); // nothing taken up front
    CHECK(push(g, 0, n, 0, NULL, NULL) == 0);
    const uint64_t held = held_bytes(g);
    const uint64_t first_buckets = 512ull * 1024 * 4, granule = 2ull << 20;
    CHECK(held >= n * 4 && (premapped || held <= 2 * n * 4 + first_buckets + granule));
    CHECK_OK(gpudyn_ggarray_clear(g, NULL));
    CHECK(push(g, 0, n, 0, NULL, NULL) == 0); // the same output again: the buckets it had
    CHECK(held_bytes(g) == held);             // (premapped: the same too)
    CHECK(holds_exactly(g, 0, n, NULL, n, "6: after clear"));
    CHECK_OK(gpudyn_ggarray_clear(g, NULL));
    CHECK_OK(gpudyn_ggarray_trim(g, NULL));
    CHECK(held_bytes(g) == 0);
    uint64_t cap = ~0ull, size = ~0ull;
    CHECK_OK(gpudyn_ggarray_capacity(g, &cap, NULL));
    CHECK_OK(gpudyn_ggarray_size(g, &size, NULL));
    CHECK(cap == 0 && size == 0);
    CHECK(push(g, 0, n, 3, NULL, NULL) == 0); // grows again after the trim
    CHECK(holds_exactly(g, 3, n, NULL, n, "6: after trim"));
    CHECK_OK(gpudyn_ggarray_trim(g, NULL)); // not empty: only the mapping past its last bucket
    CHECK(holds_exactly(g, 3, n, NULL, n, "6: after a trim of a full array"));
    CHECK_OK(gpudyn_ggarray_destroy(g));
}

// ---- 7 ---------------------------------------------------------------------
static void out_of_memory_in_a_loop() {
    const unsigned long long chunk = g_small ? (1ull << 20) : (32ull << 20); // values a round (128 MB)
    const unsigned rounds = 8;
    const unsigned long long n = chunk * rounds;
    const size_t left = g_small ? (24ull << 20) : (320ull << 20); // what the blocker leaves
    uint8_t* stored = nullptr;
    CUDA_OK(cudaMalloc(&stored, n));
    CUDA_OK(cudaMemset(stored, 0, n));
    // Under a sanitizer the arena is mapped before each launch (GPUDYN_ARENA_PREMAP:
    // the tools flag memory mapped while a kernel runs), so the device cannot run
    // out mid-kernel there: a small budget runs out instead, and is raised after.
    gpudyn_ggarray_t g = g_small ? make(left, 4 * left, NULL, 512, 0) : make(0, 0, NULL, 512, 0);
    settle_and_trim();
    void* blocker = nullptr;
    const size_t f = free_bytes();
    if (!g_small) CUDA_OK(cudaMalloc(&blocker, f > left ? f - left : 1));
    unsigned long long failed = 0;
    unsigned first_failure = rounds;
    for (unsigned r = 0; r < rounds; ++r) { // produce, round after round, with no host fix-up
        const unsigned long long fr = push(g, r * chunk, (r + 1) * chunk, 0, NULL, stored);
        if (fr != 0 && first_failure == rounds) first_failure = r;
        failed += fr;
    }
    CHECK(first_failure > 0 && first_failure < rounds); // some rounds fit, the device ran out in one
    CHECK(failed > 0);
    CHECK((status_word(g) & GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED) != 0);
    if (blocker) CUDA_OK(cudaFree(blocker)); // more memory now
    else CHECK_OK(gpudyn_ggarray_set_budget(g, 4 * left, NULL));
    std::vector<uint8_t> host(n);
    CUDA_OK(cudaMemcpy(host.data(), stored, n, cudaMemcpyDeviceToHost));
    unsigned long long kept = 0;
    for (unsigned long long i = 0; i < n; ++i) kept += host[i];
    CHECK(kept + failed == n);
    CHECK(holds_exactly(g, 0, n, stored, kept, "7: after the device ran out")); // nothing lost
    CHECK_OK(gpudyn_ggarray_clear_status(g, NULL));
    CHECK(push(g, 0, n, 0, stored, stored) == 0); // the rest, now that there is memory
    CHECK(status_word(g) == 0);
    CHECK(holds_exactly(g, 0, n, NULL, n, "7: after memory came back"));
    CUDA_OK(cudaFree(stored));
    CHECK_OK(gpudyn_ggarray_destroy(g));
}

int main(void) {
    REQUIRE_DEVICE();
    g_small = getenv("GPUDYN_SANITIZER") != nullptr;
    premapped = getenv("GPUDYN_ARENA_PREMAP") != nullptr;
    // First: an unrelated kernel that uses CUDA's device malloc, so CUDA's malloc
    // heap is fixed for the rest of the process (at its default, far below 4 GB).
    unsigned long long* got = nullptr;
    CUDA_OK(cudaMalloc(&got, sizeof(*got)));
    CUDA_OK(cudaMemset(got, 0, sizeof(*got)));
    cuda_malloc_kernel<<<64, 256>>>(got);
    CUDA_OK(cudaDeviceSynchronize());
    unsigned long long n_got = 0;
    CUDA_OK(cudaMemcpy(&n_got, got, sizeof(n_got), cudaMemcpyDeviceToHost));
    CHECK(n_got > 0);
    CUDA_OK(cudaFree(got));
    size_t limit = 0;
    CUDA_OK(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize));
    CHECK(limit < (1ull << 30));
    CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, size_t(8) << 30) != cudaSuccess); // frozen now
    (void)cudaGetLastError();
    STEP(grow_after_cuda_malloc());
    STEP(budget_runs_out_mid_kernel());
    STEP(side_by_side());
    STEP(older_options());
    STEP(default_array_takes_3_2_gb());
    STEP(small_output_clear_and_trim());
    STEP(out_of_memory_in_a_loop());
    return TEST_RESULT();
}
