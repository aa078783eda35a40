// The per-thread device API of the three arrays (ggarray_ref, static_array_ref,
// vmm_array_ref) from users' kernels, against a host reference:
//   A  divergent pushes: odd lanes only, early-returning threads, one thread
//      per block, 2-D and 3-D blocks (partial last warps), loops whose trip
//      count differs per lane, several values per thread (push_back(values, n),
//      n = 0 included), push_back(flags, values) from two branches, and
//      GGArray's push_back_to(l, x) with lanes of one warp aiming at different
//      LFVectors.  Every push returns true and every pushed
//      value (unique per thread and item) is stored exactly once; the GGArray
//      grows inside the kernel (32-element first buckets: groups straddle
//      buckets) from the pool (after reserve) and from its heap (no pool);
//      the device-side size() agrees with the host; spans visit every element
//      in place (each incremented once).
//   B  exhaustion in the middle of a kernel: a static and a VMM array fill up,
//      a GGArray without pool runs out of its budget: the status says
//      so, the heap is asked for each bucket at most once (a sealed LFVector
//      refuses without retrying the heap), the elements stored before the
//      kernel are intact, the stored values
//      are exactly those whose push returned true (none duplicated, none lost);
//      a later host push does not reset the status, clear_status does and the
//      array takes pushes again; clear() zeroes the status.
//   C  a view bound with the wrong element type, or of another version, is
//      refused by every push (per-thread and block-level) and by size(), and
//      the counters stay exactly as they were; the wrong element type sets
//      STATUS_WRONG_ELEMENT_SIZE (and nothing else), another version no bit.
//   D  lanes desynchronized before they push (the shape of gpudyn.numba's
//      "several structures" kernel): each thread first takes 32 bytes from a
//      gpudyn heap (malloc aggregates whatever lanes arrive together), then
//      waits a lane-dependent time inside a lane-dependent branch (a clock
//      spin or a __nanosleep), so the lanes of a warp reach push_back in
//      several partial groups at different moments, while buckets are being
//      grown.  int32 and int64, many blocks, a fresh GGArray growing inside the
//      kernel (default layout, and 3 LFVectors of 32-element first buckets:
//      groups straddle buckets and wait on each other's allocations), a
//      static and a VMM array: every push returns true, every value (t + 1,
//      never 0) is stored exactly once, no slot is left unwritten (0).
//   E  lanes of one warp pushing at the same call site into DIFFERENT arrays
//      (bucketing: ref{views[bin(t)]}.push_back(x), three arrays of one kind,
//      plus a fourth view that is refused): one push, several values, flags
//      and values, and GGArray's push_back_to with one l for all.  Lanes of
//      one array share a reservation; no array's counter takes another's
//      elements (each array holds exactly its bin's values), the refused
//      view's lanes get false and the others true.
//   F  the window moves on while blocks wait: one LFVector of 32-element first
//      buckets; every block pushes once (the window names the first buckets),
//      then the odd blocks push many values (the LFVector grows through
//      several buckets and the window moves on) while the even blocks wait for
//      them (a bounded spin), then the even blocks push again.  Every push
//      returns true, every value is stored exactly once, and a second launch
//      pushes into the grown array the same way.
#include <gpudyn/ggarray.cuh>
#include <gpudyn/heap.cuh>
#include <gpudyn/vmm_array.cuh>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" // the shared helpers this test does not call
extern "C" {
#include "ggarray_test_util.h"
}
#pragma GCC diagnostic pop

#include <algorithm>
#include <iterator>
#include <cstdlib>
#include <type_traits>
#include <vector>

// Budget of B's GGArray (its own arena's memory): one kernel's pushes
// must exhaust it.
static const uint64_t kBudgetBytes = 64ull << 20;
// Under compute-sanitizer kernels run 10-100x slower: A runs 1/16 of the
// threads and B's GGArray part a 8 MiB budget (GPUDYN_SANITIZER set).
static bool g_sanitized = false;

// Values are t * kItems + j (thread t, item j < kItems): unique per push.
static const unsigned kItems = 8;

__host__ __device__ inline unsigned mix(unsigned x) { // "lowbias32" (C. Wellons, hash-prospector)
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

enum pattern {
    kOddLanes,
    kEarlyReturn,
    kLoneThread,
    kParity,
    kLoops,
    kMany,
    kTargets,
    kFlagged,
    kPatterns
};
static const char* const pattern_name[] = {"odd lanes", "early return",   "lone thread",  "parity (2-D/3-D)",
                                           "loops",     "several values", "push_back_to", "flags and values"};

// Items thread t (rank r in its block of `threads`, block b, coordinates x,y,z)
// pushes with pattern p: items 0..count-1.  The same function decides on the
// device and builds the host reference.
__host__ __device__ inline unsigned items_of(int p, unsigned t, unsigned r, unsigned threads, unsigned long long b,
                                             unsigned x, unsigned y, unsigned z) {
    switch (p) {
        case kOddLanes: return (r % 32) % 2 == 1 ? 1 : 0;
        case kEarlyReturn: return mix(t) % 3 == 0 ? 0 : 1;
        case kLoneThread: return r == unsigned(b * 7 % threads) ? 1 : 0;
        case kParity: return (x + y + z) % 2 == 0 ? 1 : 0;
        case kLoops: return mix(t) % 7;
        case kMany: return t % 4 == 3 ? 0 : mix(t) % 6;
        case kTargets: return t % 2;
        case kFlagged: return t % 5 == 4 ? 0 : mix(t) % (kItems + 1);
    }
    return 0;
}

template <class Ref>
__device__ bool push_to(const Ref& a, unsigned, int v) {
    return a.push_back(v);
}
__device__ bool push_to(const gpudyn::ggarray_ref<int>& a, unsigned t, int v) {
    return a.push_back_to(mix(t + 1) % a.num_lfvectors(), v);
}

// ok[t * kItems + j] = 1 when the push of item j of thread t returned true.
template <class Ref, class View>
__global__ void push_kernel(View view, int p, unsigned char* ok) {
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned r = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned long long b = blockIdx.x + (unsigned long long)gridDim.x * blockIdx.y;
    const unsigned t = unsigned(b * threads + r);
    const unsigned k = items_of(p, t, r, threads, b, threadIdx.x, threadIdx.y, threadIdx.z);
    const Ref a{view};
    if (p == kEarlyReturn && k == 0) return; // neighbours gone: the rest of the warp still pushes
    if (p == kMany) {
        int v[kItems];
        for (unsigned j = 0; j < k; ++j) v[j] = int(t * kItems + j);
        if (t % 4 == 3) return; // these threads leave (k == 0 for them)
        const bool stored = a.push_back(v, k);
        for (unsigned j = 0; j < k; ++j) ok[t * kItems + j] = stored;
        return;
    }
    if (p == kFlagged) { // push_back(flags, values): items j < k flagged, two branches, early leavers
        if (t % 5 == 4) return;
        bool f[kItems];
        int v[kItems];
        for (unsigned j = 0; j < kItems; ++j) {
            f[j] = j < k;
            v[j] = int(t * kItems + j);
        }
        bool stored;
        if (t % 2 == 0) stored = a.push_back(f, v);
        else stored = a.push_back(f, v);
        for (unsigned j = 0; j < k; ++j) ok[t * kItems + j] = stored;
        return;
    }
    for (unsigned j = 0; j < k; ++j) { // trip count differs per lane with kLoops
        const int v = int(t * kItems + j);
        const bool stored = p == kTargets ? push_to(a, t, v) : a.push_back(v);
        ok[t * kItems + j] = stored;
    }
}

// Device size() (one thread) -> *out.
template <class Ref, class View>
__global__ void size_kernel(View view, unsigned long long* out) {
    *out = Ref{view}.size();
}

// Every element visited once in place (block b: its part of [0, n)): +1.
template <class Ref, class View>
__global__ void bump_spans(View view, unsigned long long n) {
    const Ref a{view};
    const unsigned long long part = (n + gridDim.x - 1) / gridDim.x;
    a.for_each_span(blockIdx.x * part, (blockIdx.x + 1) * part, [&](int* p, unsigned long long m, unsigned long long) {
        for (unsigned long long i = threadIdx.x; i < m; i += blockDim.x) p[i] += 1;
    });
}

// ---- one interface over the three kinds' views ----
struct views {
    gpudyn_ggarray_view_t g;
    gpudyn_static_array_view_t s;
    gpudyn_vmm_array_view_t v;
};
static views get_views(any_array* a) {
    views w;
    memset(&w, 0, sizeof(w));
    if (a->kind == KIND_GGARRAY) CHECK_OK(gpudyn_ggarray_get_view(a->g, &w.g, NULL));
    else if (a->kind == KIND_STATIC) CHECK_OK(gpudyn_static_array_get_view(a->s, &w.s));
    else CHECK_OK(gpudyn_vmm_array_get_view(a->v, &w.v));
    return w;
}
static uint32_t any_status(any_array* a) {
    uint32_t s = ~0u;
    if (a->kind == KIND_GGARRAY) CHECK_OK(gpudyn_ggarray_get_status(a->g, &s, NULL));
    else if (a->kind == KIND_STATIC) CHECK_OK(gpudyn_static_array_get_status(a->s, &s, NULL));
    else CHECK_OK(gpudyn_vmm_array_get_status(a->v, &s, NULL));
    return s;
}
static void any_clear_status(any_array* a) {
    if (a->kind == KIND_GGARRAY) CHECK_OK(gpudyn_ggarray_clear_status(a->g, NULL));
    else if (a->kind == KIND_STATIC) CHECK_OK(gpudyn_static_array_clear_status(a->s, NULL));
    else CHECK_OK(gpudyn_vmm_array_clear_status(a->v, NULL));
}
static void any_clear(any_array* a) {
    if (a->kind == KIND_GGARRAY) CHECK_OK(gpudyn_ggarray_clear(a->g, NULL));
    else if (a->kind == KIND_STATIC) CHECK_OK(gpudyn_static_array_clear(a->s, NULL));
    else CHECK_OK(gpudyn_vmm_array_clear(a->v, NULL));
}

template <class F>
static void with_ref(any_array* a, F&& f) {
    const views w = get_views(a);
    if (a->kind == KIND_GGARRAY) f(gpudyn::ggarray_ref<int>{w.g}, w.g);
    else if (a->kind == KIND_STATIC) f(gpudyn::static_array_ref<int>{w.s}, w.s);
    else f(gpudyn::vmm_array_ref<int>{w.v}, w.v);
}

static void launch_pattern(any_array* a, int p, dim3 grid, dim3 block, unsigned char* ok) {
    with_ref(a, [&](auto ref, auto view) { push_kernel<decltype(ref)><<<grid, block>>>(view, p, ok); });
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

static std::vector<int> contents(any_array* a) {
    const uint64_t n = any_size(a);
    std::vector<int> out(n);
    if (n) CHECK_OK(any_to_host(a, out.data(), n * 4));
    std::sort(out.begin(), out.end());
    return out;
}

// Sorted values whose ok flag is set, plus `before`.
static std::vector<int> stored_reference(const std::vector<unsigned char>& ok, std::vector<int> before) {
    for (size_t i = 0; i < ok.size(); ++i)
        if (ok[i]) before.push_back(int(i));
    std::sort(before.begin(), before.end());
    return before;
}

static void report(bool bad, const char* part, any_array* a, const char* what, const char* detail) {
    if (!bad) return;
    fprintf(stderr, "%s: %s (%s): %s\n", part, kind_name[a->kind], detail, what);
    ++gpudyn_test_failures;
}

// ---- A ----
static void test_divergent(array_kind kind, bool pooled) {
    const unsigned blocks = g_sanitized ? 40 : 640;
    for (int p = 0; p < kPatterns; ++p) {
        if (p == kTargets && kind != KIND_GGARRAY) continue;
        for (int shape = 0; shape < (p == kParity ? 2 : 1); ++shape) {
            dim3 block(128);
            if (p == kLoneThread) block = dim3(96);
            if (p == kParity) block = shape == 0 ? dim3(10, 7) : dim3(6, 5, 3); // 70 / 90 threads: partial warps
            const dim3 grid(blocks / 8, 8); // 2-D grid: the block's LFVector is its linear index
            const unsigned threads = block.x * block.y * block.z;
            const unsigned total = blocks * threads;
            // Host reference: every (t, j) the kernel pushes.
            std::vector<unsigned char> expect(size_t(total) * kItems, 0);
            uint64_t pushes = 0;
            for (unsigned long long b = 0; b < blocks; ++b)
                for (unsigned z = 0; z < block.z; ++z)
                    for (unsigned y = 0; y < block.y; ++y)
                        for (unsigned x = 0; x < block.x; ++x) {
                            const unsigned r = x + block.x * (y + block.y * z), t = unsigned(b * threads + r);
                            const unsigned k = items_of(p, t, r, threads, b, x, y, z);
                            for (unsigned j = 0; j < k; ++j) expect[size_t(t) * kItems + j] = 1;
                            pushes += k;
                        }
            any_array a;
            // Capacity for every push; the GGArray: 3 LFVectors, 32-element first buckets.
            // (any_create reserves `pushes + 1` in a GGArray: the pool rows; 0: none, buckets from the heap.)
            CHECK_OK(any_create(&a, kind, 4, kind == KIND_GGARRAY && !pooled ? 0 : pushes + 1, 3, 32));
            unsigned char* dok = nullptr;
            CHECK(cudaMalloc(&dok, expect.size()) == cudaSuccess);
            CHECK(cudaMemset(dok, 0, expect.size()) == cudaSuccess);
            launch_pattern(&a, p, grid, block, dok);
            std::vector<unsigned char> ok(expect.size());
            CHECK(cudaMemcpy(ok.data(), dok, ok.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
            char detail[96];
            snprintf(detail, sizeof detail, "%s, block %ux%ux%u%s", pattern_name[p], block.x, block.y, block.z,
                     kind == KIND_GGARRAY ? (pooled ? ", pool" : ", heap") : "");
            report(ok != expect, "A", &a, "a push returned false, or a thread pushed what it should not", detail);
            report(any_status(&a) != 0, "A", &a, "status set without a failure", detail);
            const std::vector<int> want = stored_reference(expect, {});
            report(contents(&a) != want, "A", &a, "stored values differ from the pushed ones", detail);
            // Device size() against the host's.
            unsigned long long* dsize = nullptr;
            CHECK(cudaMalloc(&dsize, 8) == cudaSuccess);
            with_ref(&a, [&](auto ref, auto view) { size_kernel<decltype(ref)><<<1, 1>>>(view, dsize); });
            unsigned long long dn = 0;
            CHECK(cudaMemcpy(&dn, dsize, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
            report(dn != want.size(), "A", &a, "device size() differs from the number pushed", detail);
            // Spans: every element +1, in place (GGArray: the view's ranges, taken after the pushes).
            with_ref(&a, [&](auto ref, auto view) { bump_spans<decltype(ref)><<<7, 64>>>(view, want.size()); });
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            std::vector<int> plus = want;
            for (int& v : plus) ++v;
            report(contents(&a) != plus, "A", &a, "spans did not visit every element exactly once", detail);
            cudaFree(dsize);
            cudaFree(dok);
            any_destroy(&a);
        }
    }
}

// ---- B ----
// Bucket requests its growth arena refused (the arena record's word 5).
static uint64_t arena_refusals(any_array* a) {
    const views w = get_views(a);
    uint64_t n = ~0ull;
    if (w.g.arena == 0) return n;
    CHECK(cudaMemcpy(&n, reinterpret_cast<const uint64_t*>(w.g.arena) + 5, sizeof(n), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
    return n;
}

// Fills an array with host pushes of `before` values (-1 - i: never a kernel
// value), then one kernel's pushes (pattern kLoops or kMany) that cannot all fit.
// `budget`: the GGArray's budget_bytes (the others' capacity is `capacity`).
static void test_exhaustion(array_kind kind, int p, unsigned blocks, uint64_t capacity, uint64_t budget) {
    const dim3 block(128), grid(blocks);
    const unsigned total = blocks * block.x;
    std::vector<int> before(1000);
    for (size_t i = 0; i < before.size(); ++i) before[i] = -1 - int(i);
    any_array a;
    if (kind == KIND_GGARRAY) { // no pool: every bucket from the (small) budget
        memset(&a, 0, sizeof(a));
        a.kind = kind;
        a.element_size = 4;
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        o.num_lfvectors = 4;
        o.pool_bytes = ~0ull;
        o.budget_bytes = budget;
        o.max_budget_bytes = budget;
        CHECK_OK(gpudyn_ggarray_create(&a.g, &o, NULL));
    } else if (kind == KIND_VMM) { // max_capacity = capacity: the mapping's rounding adds nothing
        memset(&a, 0, sizeof(a));
        a.kind = kind;
        a.element_size = 4;
        gpudyn_vmm_array_options_t o;
        gpudyn_vmm_array_options_init(&o);
        o.initial_capacity = capacity;
        o.max_capacity = capacity;
        CHECK_OK(gpudyn_vmm_array_create(&a.v, &o, NULL));
    } else {
        CHECK_OK(any_create(&a, kind, 4, capacity, 4, 1024));
    }
    int* dbefore = nullptr;
    CHECK(cudaMalloc(&dbefore, before.size() * 4) == cudaSuccess);
    CHECK(cudaMemcpy(dbefore, before.data(), before.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_OK(any_push(&a, dbefore, before.size(), NULL, GPUDYN_INSERT_WARP_SCAN));
    unsigned char* dok = nullptr;
    const size_t slots = size_t(total) * kItems;
    CHECK(cudaMalloc(&dok, slots) == cudaSuccess);
    CHECK(cudaMemset(dok, 0, slots) == cudaSuccess);
    // The GGArray's arena counts the bucket requests it refused.
    const uint64_t refused_before = kind == KIND_GGARRAY ? arena_refusals(&a) : 0;
    launch_pattern(&a, p, grid, block, dok);
    if (kind == KIND_GGARRAY) {
        // Once a bucket found no memory its LFVector is sealed, and every later
        // reservation that needs it fails without asking the arena again: each
        // bucket of each LFVector fails at most once in the kernel, not once
        // per refused reservation (hundreds of thousands here, which made the
        // exhausted kernel crawl, one failing request after the other).
        const uint64_t failures = arena_refusals(&a) - refused_before;
        const uint64_t bound = 2ull * 4 * GPUDYN_GGARRAY_MAX_BUCKETS; // 4 LFVectors
        if (failures == 0 || failures > bound) {
            fprintf(stderr, "B: ggarray (%s): %llu refused arena requests in the kernel, expected 1..%llu\n",
                    pattern_name[p], (unsigned long long)failures, (unsigned long long)bound);
            ++gpudyn_test_failures;
        }
    }
    std::vector<unsigned char> ok(slots);
    CHECK(cudaMemcpy(ok.data(), dok, slots, cudaMemcpyDeviceToHost) == cudaSuccess);
    uint64_t stored = 0;
    for (unsigned char c : ok) stored += c;
    const char* detail = pattern_name[p];
    const uint32_t want_bit =
        kind == KIND_GGARRAY ? GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED : GPUDYN_ARRAY_STATUS_CAPACITY_EXCEEDED;
    uint32_t st = any_status(&a);
    report((st & want_bit) == 0, "B", &a, "status does not report the exhaustion", detail);
    uint64_t pushed = 0;
    for (unsigned t = 0; t < total; ++t) pushed += items_of(p, t, t % block.x, block.x, t / block.x, t % block.x, 0, 0);
    report(stored == 0 || stored >= pushed, "B", &a, "expected some pushes to succeed and some to fail", detail);
    const std::vector<int> want = stored_reference(ok, before);
    report(any_size(&a) != want.size(), "B", &a, "size differs from the pushes that returned true", detail);
    report(contents(&a) != want, "B", &a, "stored values differ from the pushes that returned true", detail);
    // A later host push keeps the status whether it fits or not (the array is
    // nearly full: either may happen); clear_status zeroes it.
    const gpudyn_status_t hs = any_push(&a, dbefore, 1, NULL, GPUDYN_INSERT_WARP_SCAN);
    report(hs != GPUDYN_SUCCESS && hs != GPUDYN_ERROR_OUT_OF_MEMORY, "B", &a, "host push failed otherwise", detail);
    const uint64_t held = want.size() + (hs == GPUDYN_SUCCESS ? 1 : 0);
    report(any_status(&a) != st, "B", &a, "a host push_back changed the status", detail);
    report(any_size(&a) != held, "B", &a, "a host push lost or duplicated elements", detail);
    any_clear_status(&a);
    report(any_status(&a) != 0, "B", &a, "clear_status left status bits", detail);
    report(any_size(&a) != held, "B", &a, "size changed across clear_status", detail);
    any_clear(&a);
    report(any_size(&a) != 0, "B", &a, "clear left elements", detail);
    // After clear the array takes a kernel's pushes again (those that fit).
    CHECK(cudaMemset(dok, 0, slots) == cudaSuccess);
    launch_pattern(&a, kLoneThread, dim3(4), dim3(64), dok);
    report(any_size(&a) != 4, "B", &a, "pushes after clear failed", detail);
    cudaFree(dok);
    cudaFree(dbefore);
    any_destroy(&a);
}

// ---- C ----
template <class T>
struct tag {
    using type = T;
};
template <class Wrong, class View>
__global__ void wrong_kernel(View view, unsigned* trues, unsigned long long* sizes_seen) {
    __shared__ gpudyn::push_storage<128> temp;
    const Wrong a{view};
    typename Wrong::value_type v[2] = {};
    unsigned t = 0;
    t += a.push_back(v[0]);
    t += a.push_back(v, 2);
    t += a.push_back(temp, true, v[0]); // block-level: every thread calls
    if (t) atomicAdd(trues, t);
    if (threadIdx.x == 0) atomicAdd(sizes_seen, a.size());
}
// The device words a push touches but the status: counters, failed-at (raw copies).
static std::vector<uint64_t> words(any_array* a) {
    const views w = get_views(a);
    std::vector<uint64_t> out;
    auto grab = [&](uint64_t addr, size_t bytes) { // as bytes, one uint64 each
        std::vector<unsigned char> h(bytes);
        CHECK(cudaMemcpy(h.data(), reinterpret_cast<void*>(addr), bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
        out.insert(out.end(), h.begin(), h.end());
    };
    if (a->kind == KIND_GGARRAY) {
        grab(w.g.sizes, 8 * w.g.num_lfvectors);
        grab(w.g.failed_at, 8 * w.g.num_lfvectors);
        grab(w.g.growth, 4 * w.g.num_lfvectors);
        grab(w.g.bucket_state, 4 * w.g.num_lfvectors * GPUDYN_GGARRAY_MAX_BUCKETS);
    } else if (a->kind == KIND_STATIC) {
        grab(w.s.size, 8);
        grab(w.s.failed_at, 8);
    } else {
        grab(w.v.size, 8);
        grab(w.v.failed_at, 8);
    }
    return out;
}
// `status`: the status bits the refusal must leave (then cleared).
template <class F>
static void refused(any_array* a, uint32_t status, const char* detail, F&& launch) {
    unsigned* trues = nullptr;
    unsigned long long* seen = nullptr;
    CHECK(cudaMalloc(&trues, 4) == cudaSuccess);
    CHECK(cudaMalloc(&seen, 8) == cudaSuccess);
    CHECK(cudaMemset(trues, 0, 4) == cudaSuccess);
    CHECK(cudaMemset(seen, 0, 8) == cudaSuccess);
    const std::vector<uint64_t> w0 = words(a);
    launch(trues, seen);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    unsigned t = 1;
    unsigned long long s = 1;
    CHECK(cudaMemcpy(&t, trues, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemcpy(&s, seen, 8, cudaMemcpyDeviceToHost) == cudaSuccess);
    report(t != 0, "C", a, "a refused view stored", detail);
    report(s != 0, "C", a, "a refused view's size() is not 0", detail);
    report(words(a) != w0, "C", a, "a refused view touched the counters", detail);
    report(any_status(a) != status, "C", a,
           status ? "a ref of the wrong element size did not set STATUS_WRONG_ELEMENT_SIZE alone"
                  : "a view of another version set a status bit",
           detail);
    any_clear_status(a);
    cudaFree(trues);
    cudaFree(seen);
}
static void test_refused(array_kind kind) {
    any_array a;
    CHECK_OK(any_create(&a, kind, 4, 4096, 3, 32));
    int* d = nullptr;
    CHECK(cudaMalloc(&d, 40) == cudaSuccess);
    CHECK(cudaMemset(d, 0, 40) == cudaSuccess);
    CHECK_OK(any_push(&a, d, 10, NULL, GPUDYN_INSERT_WARP_SCAN));
    const views w = get_views(&a);
    views bad = w;
    bad.g.version += 1;
    bad.s.version += 1;
    bad.v.version += 1;
    auto run = [&](auto wrong_tag, const views& vw, uint32_t status, const char* detail) {
        using W = typename decltype(wrong_tag)::type;
        refused(&a, status, detail, [&](unsigned* t, unsigned long long* s) {
            if (kind == KIND_GGARRAY) wrong_kernel<gpudyn::ggarray_ref<W>><<<5, 128>>>(vw.g, t, s);
            else if (kind == KIND_STATIC) wrong_kernel<gpudyn::static_array_ref<W>><<<5, 128>>>(vw.s, t, s);
            else wrong_kernel<gpudyn::vmm_array_ref<W>><<<5, 128>>>(vw.v, t, s);
        });
    };
    run(tag<long long>{}, w, GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE, "element type long long");
    run(tag<short>{}, w, GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE, "element type short");
    run(tag<int>{}, bad, 0, "view version + 1");
    report(any_size(&a) != 10, "C", &a, "size changed", "after refused views");
    report(any_status(&a) != 0, "C", &a, "status set", "after refused views");
    // The right view still works after all of it.
    unsigned char* dok = nullptr;
    CHECK(cudaMalloc(&dok, 64 * kItems) == cudaSuccess);
    launch_pattern(&a, kLoneThread, dim3(1), dim3(64), dok);
    report(any_size(&a) != 11, "C", &a, "the right view no longer pushes", "after refused views");
    cudaFree(dok);
    cudaFree(d);
    any_destroy(&a);
}

// ---- D ----
// Thread t (t % 5 != 0) mallocs 32 bytes from `heap`, then waits a lane-dependent
// time in a lane-dependent branch, then pushes t + 1 (0 is never pushed: a 0 read
// back is a slot that was reserved and never written).  ok[t] = the push's result.
template <class Ref, class View>
__global__ void desync_kernel(View view, gpudyn_heap_view_t heap, unsigned n, unsigned char* ok) {
    using T = typename Ref::value_type;
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n || t % 5 == 0) return;
    void* p = gpudyn::heap_ref{heap}.malloc(32);
    const unsigned h = mix(t);
    if (h & 1u) {
        const long long start = clock64(), wait = (long long)(h >> 1) % 4000; // up to ~2 us
        while (clock64() - start < wait) {}
    } else if (h & 2u) {
        __nanosleep((threadIdx.x % 32u) * 64u);
    }
    const Ref a{view};
    bool stored = false;
    if (p != nullptr) {
        *static_cast<unsigned*>(p) = t; // the block is the thread's: use it
        stored = a.push_back(T(t) + T(1));
    }
    ok[t] = stored ? 1 : 2; // 0: the thread never got here
}

template <class T>
static void desync_run(any_array* a, gpudyn_heap_view_t hv, unsigned n, unsigned char* dok) {
    const unsigned threads = 256, blocks = (n + threads - 1) / threads;
    const views w = get_views(a);
    if (a->kind == KIND_GGARRAY) desync_kernel<gpudyn::ggarray_ref<T>><<<blocks, threads>>>(w.g, hv, n, dok);
    else if (a->kind == KIND_STATIC) desync_kernel<gpudyn::static_array_ref<T>><<<blocks, threads>>>(w.s, hv, n, dok);
    else desync_kernel<gpudyn::vmm_array_ref<T>><<<blocks, threads>>>(w.v, hv, n, dok);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
}

template <class T>
static void desync_check(any_array* a, unsigned n, const std::vector<unsigned char>& ok, const char* detail) {
    std::vector<T> want;
    bool all_true = true;
    for (unsigned t = 0; t < n; ++t) {
        if (t % 5 == 0) {
            all_true = all_true && ok[t] == 0;
            continue;
        }
        all_true = all_true && ok[t] == 1;
        want.push_back(T(t) + T(1));
    }
    report(!all_true, "D", a, "a push returned false (or a thread skipped its push)", detail);
    const uint64_t size = any_size(a);
    std::vector<T> got(size);
    if (size) CHECK_OK(any_to_host(a, got.data(), size * sizeof(T)));
    std::sort(got.begin(), got.end());
    const size_t zeros = size_t(std::count(got.begin(), got.end(), T(0)));
    std::vector<T> missing;
    std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
    if (got != want) {
        fprintf(stderr, "D: %s (%s): size %llu, expected %zu; %zu slots never written (0), %zu values missing\n",
                kind_name[a->kind], detail, (unsigned long long)size, want.size(), zeros, missing.size());
        ++gpudyn_test_failures;
    }
    report(any_status(a) != 0, "D", a, "status set without a failure", detail);
}

// `small`: a GGArray of 3 LFVectors with 32-element first buckets (many
// growths during the kernel, groups straddling buckets); else default options.
static void test_desync(array_kind kind, unsigned element_size, bool small) {
    if (small && kind != KIND_GGARRAY) return;
    const unsigned n = g_sanitized ? 4096 : 200000;
    gpudyn_heap_options_t ho;
    CHECK_OK(gpudyn_heap_options_init(&ho));
    ho.initial_bytes = 64ull << 20;
    gpudyn_heap_t heap = nullptr;
    CHECK_OK(gpudyn_heap_create(&heap, &ho, NULL));
    gpudyn_heap_view_t hv;
    CHECK_OK(gpudyn_heap_get_view(heap, &hv));
    for (int rep = 0; rep < 3; ++rep) {
        any_array a;
        // A fresh array: the GGArray grows inside the kernel (no reserve); the
        // contiguous ones hold every push.
        if (kind == KIND_GGARRAY && !small) {
            memset(&a, 0, sizeof a);
            a.kind = KIND_GGARRAY;
            a.element_size = element_size;
            gpudyn_ggarray_options_t o;
            CHECK_OK(gpudyn_ggarray_options_init(&o));
            o.element_size = element_size;
            CHECK_OK(gpudyn_ggarray_create(&a.g, &o, NULL));
        } else {
            CHECK_OK(any_create(&a, kind, element_size, kind == KIND_GGARRAY ? 0 : n, 3, 32));
        }
        unsigned char* dok = nullptr;
        CHECK(cudaMalloc(&dok, n) == cudaSuccess);
        CHECK(cudaMemset(dok, 0, n) == cudaSuccess);
        if (element_size == 4) desync_run<int>(&a, hv, n, dok);
        else desync_run<long long>(&a, hv, n, dok);
        std::vector<unsigned char> ok(n);
        CHECK(cudaMemcpy(ok.data(), dok, n, cudaMemcpyDeviceToHost) == cudaSuccess);
        char detail[96];
        snprintf(
            detail, sizeof detail, "desynchronized lanes, int%u%s, run %d", element_size * 8,
            kind == KIND_GGARRAY ? (small ? ", 3 LFVectors of 32-element first buckets" : ", default options") : "",
            rep);
        if (element_size == 4) desync_check<int>(&a, n, ok, detail);
        else desync_check<long long>(&a, n, ok, detail);
        cudaFree(dok);
        any_destroy(&a);
        // The heap's blocks of this run: back, so every run mallocs from a like heap.
        CHECK_OK(gpudyn_heap_reset(heap, NULL));
    }
    CHECK_OK(gpudyn_heap_destroy(heap));
}

// ---- F ----
static const unsigned kWindowThreads = 256, kWindowBurst = 16;
// Values: phase 0 pushes t + 1, phase 1 (odd blocks) t * kWindowBurst + j + 1 +
// kWindowOffset, phase 2 (even blocks) t + 1 + 2 * kWindowOffset: all distinct.
static const long long kWindowOffset = 1ll << 32;
__global__ void window_kernel(gpudyn_ggarray_view_t view, unsigned* done, unsigned odd_blocks, long long spin,
                              unsigned char* ok) {
    const gpudyn::ggarray_ref<long long> a{view};
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    bool good = a.push_back((long long)t + 1);
    if (blockIdx.x % 2 == 1) {
        for (unsigned j = 0; j < kWindowBurst; ++j)
            good = a.push_back((long long)t * kWindowBurst + j + 1 + kWindowOffset) && good;
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(done, 1u);
        }
    } else {
        // Wait (bounded: blocks need not all be resident) for the odd blocks' growth.
        if (threadIdx.x == 0) {
            const long long start = clock64();
            while (*static_cast<volatile unsigned*>(done) < odd_blocks && clock64() - start < spin) {}
        }
        __syncthreads();
        good = a.push_back((long long)t + 1 + 2 * kWindowOffset) && good;
    }
    ok[t] = good ? 1 : 2;
}

static void test_window_moved_on(void) {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    const unsigned blocks = unsigned(2 * sms), n = blocks * kWindowThreads, odd = blocks / 2;
    any_array a;
    CHECK_OK(any_create(&a, KIND_GGARRAY, 8, 0, 1, 32));
    unsigned* done = nullptr;
    unsigned char* dok = nullptr;
    CHECK(cudaMalloc(&done, sizeof(unsigned)) == cudaSuccess);
    CHECK(cudaMalloc(&dok, n) == cudaSuccess);
    std::vector<long long> want;
    for (int launch = 0; launch < 2; ++launch) {
        CHECK(cudaMemset(done, 0, sizeof(unsigned)) == cudaSuccess);
        CHECK(cudaMemset(dok, 0, n) == cudaSuccess);
        const views w = get_views(&a);
        // (About a second of spin at most; 1/32 of it under a sanitizer, whose
        // kernels may not keep every block resident.)
        window_kernel<<<blocks, kWindowThreads>>>(w.g, done, odd, g_sanitized ? 1ll << 26 : 1ll << 31, dok);
        CHECK(cudaGetLastError() == cudaSuccess);
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        std::vector<unsigned char> ok(n);
        CHECK(cudaMemcpy(ok.data(), dok, n, cudaMemcpyDeviceToHost) == cudaSuccess);
        const bool all_true = std::all_of(ok.begin(), ok.end(), [](unsigned char c) { return c == 1; });
        report(!all_true, "F", &a, "a push returned false (or a thread skipped its push)", "window moved on");
        for (unsigned t = 0; t < n; ++t) {
            want.push_back((long long)t + 1);
            if ((t / kWindowThreads) % 2 == 1)
                for (unsigned j = 0; j < kWindowBurst; ++j)
                    want.push_back((long long)t * kWindowBurst + j + 1 + kWindowOffset);
            else want.push_back((long long)t + 1 + 2 * kWindowOffset);
        }
        std::sort(want.begin(), want.end());
        const uint64_t size = any_size(&a);
        std::vector<long long> got(size);
        if (size) CHECK_OK(any_to_host(&a, got.data(), size * sizeof(long long)));
        std::sort(got.begin(), got.end());
        if (got != want) {
            fprintf(stderr, "F: launch %d: size %llu, expected %zu (a value lost or stored twice)\n", launch,
                    (unsigned long long)size, want.size());
            ++gpudyn_test_failures;
        }
        report(any_status(&a) != 0, "F", &a, "status set without a failure", "window moved on");
    }
    cudaFree(dok);
    cudaFree(done);
    any_destroy(&a);
}

// ---- E ----
static const unsigned kBins = 3; // arrays; bin kBins is the refused view
__host__ __device__ inline unsigned bin_of(unsigned t) { return mix(t * 3u + 1u) % (kBins + 1); }
__host__ __device__ inline unsigned bin_items(unsigned t) { return 1 + t % 3; }
enum bin_mode {
    kBinOne,
    kBinMany,
    kBinFlagged,
    kBinTo,
    kBinModes
};
static const char* const bin_mode_name[] = {"push_back(x)", "push_back(values, n)", "push_back(flags, values)",
                                            "push_back_to(1, x)"};

template <class Ref>
__device__ bool bin_push_to(const Ref& a, int v) {
    return a.push_back(v);
}
__device__ bool bin_push_to(const gpudyn::ggarray_ref<int>& a, int v) { return a.push_back_to(1, v); }

template <class Ref, class View>
__global__ void bins_kernel(const View* views, unsigned n, int mode, unsigned char* ok) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const Ref a{views[bin_of(t)]};
    const unsigned k = bin_items(t);
    int v[3];
    bool f[3];
    for (unsigned j = 0; j < 3; ++j) {
        v[j] = int(t * 3 + j);
        f[j] = j < k;
    }
    bool stored;
    if (mode == kBinOne) stored = a.push_back(v[0]);
    else if (mode == kBinMany) stored = a.push_back(v, k);
    else if (mode == kBinFlagged) stored = a.push_back(f, v);
    else stored = bin_push_to(a, v[0]);
    ok[t] = stored ? 1 : 2;
}

static void test_several_arrays(array_kind kind, int mode) {
    const unsigned n = g_sanitized ? 4096 : 1u << 16;
    any_array arr[kBins];
    for (unsigned b = 0; b < kBins; ++b) CHECK_OK(any_create(&arr[b], kind, 4, 3ull * n + 1, 3, 32));
    views w[kBins + 1];
    for (unsigned b = 0; b < kBins; ++b) w[b] = get_views(&arr[b]);
    w[kBins] = w[0];
    w[kBins].g.version = w[kBins].s.version = w[kBins].v.version = 0xdead; // refused by every push
    std::vector<std::vector<int>> want(kBins);
    std::vector<unsigned char> want_ok(n);
    for (unsigned t = 0; t < n; ++t) {
        const unsigned b = bin_of(t);
        want_ok[t] = b < kBins ? 1 : 2;
        if (b == kBins) continue;
        const unsigned k = mode == kBinMany || mode == kBinFlagged ? bin_items(t) : 1;
        for (unsigned j = 0; j < k; ++j) want[b].push_back(int(t * 3 + j));
    }
    unsigned char* dok = nullptr;
    void* dviews = nullptr;
    CHECK(cudaMalloc(&dok, n) == cudaSuccess);
    CHECK(cudaMemset(dok, 0, n) == cudaSuccess);
    CHECK(cudaMalloc(&dviews, sizeof(w)) == cudaSuccess);
    auto launch = [&](auto ref, auto member) {
        using View = std::remove_reference_t<decltype(w[0].*member)>;
        View hv[kBins + 1];
        for (unsigned b = 0; b <= kBins; ++b) hv[b] = w[b].*member;
        CHECK(cudaMemcpy(dviews, hv, sizeof(hv), cudaMemcpyHostToDevice) == cudaSuccess);
        bins_kernel<decltype(ref)><<<(n + 255) / 256, 256>>>(static_cast<const View*>(dviews), n, mode, dok);
    };
    if (kind == KIND_GGARRAY) launch(gpudyn::ggarray_ref<int>{w[0].g}, &views::g);
    else if (kind == KIND_STATIC) launch(gpudyn::static_array_ref<int>{w[0].s}, &views::s);
    else launch(gpudyn::vmm_array_ref<int>{w[0].v}, &views::v);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    std::vector<unsigned char> ok(n);
    CHECK(cudaMemcpy(ok.data(), dok, n, cudaMemcpyDeviceToHost) == cudaSuccess);
    report(ok != want_ok, "E", &arr[0],
           "a push's result is not true for an array's lanes and false for the refused "
           "view's",
           bin_mode_name[mode]);
    for (unsigned b = 0; b < kBins; ++b) {
        std::sort(want[b].begin(), want[b].end());
        report(contents(&arr[b]) != want[b], "E", &arr[b], "an array does not hold exactly its bin's values",
               bin_mode_name[mode]);
        report(any_status(&arr[b]) != 0, "E", &arr[b], "status set", bin_mode_name[mode]);
        any_destroy(&arr[b]);
    }
    CHECK(cudaFree(dok) == cudaSuccess);
    CHECK(cudaFree(dviews) == cudaSuccess);
}

int main(void) {
    REQUIRE_DEVICE();
    g_sanitized = getenv("GPUDYN_SANITIZER") != NULL && getenv("GPUDYN_SANITIZER")[0] != '\0';
    STEP(for (int k = 0; k < 3; ++k) test_divergent(array_kind(k), true));
    STEP(test_divergent(KIND_GGARRAY, false));
    // B: the contiguous arrays hold 1/8 of what the kernel pushes; the GGArray
    // gets twice its budget in int32 values (1/4 of the threads push nothing).
    STEP(for (int k = 1; k < 3; ++k) for (int p : {int(kLoops), int(kMany)})
             test_exhaustion(array_kind(k), p, 256, 30000, 0));
    const uint64_t budget = g_sanitized ? (8ull << 20) : kBudgetBytes;
    STEP(test_exhaustion(KIND_GGARRAY, kMany, unsigned(budget * 2 / 4 / 128 / 2), 0, budget));
    STEP(for (int k = 0; k < 3; ++k) test_refused(array_kind(k)));
    STEP(for (int k = 0; k < 3; ++k) for (unsigned size : {4u, 8u}) test_desync(array_kind(k), size, false));
    STEP(for (unsigned size : {4u, 8u}) test_desync(KIND_GGARRAY, size, true));
    STEP(for (int k = 0; k < 3; ++k) for (int m = 0; m < kBinModes; ++m) if (m != kBinTo || k == KIND_GGARRAY)
             test_several_arrays(array_kind(k), m));
    STEP(test_window_moved_on());
    return TEST_RESULT();
}
