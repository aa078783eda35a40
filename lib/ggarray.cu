// C ABI of the GGArray.  The structure and its algorithms are in
// include/gpudyn/ggarray.cuh, its bulk kernels in
// include/gpudyn/detail/ggarray/kernels.cuh; this file owns the bookkeeping
// memory, the bucket pool and the growth arena the other buckets are bumped
// off (the budget: runs of the device's stream-ordered pool, or of a heap it
// shares), and launches the kernels.
#include "array_common.cuh"

#include <algorithm>
#include <cstddef>
#include <cstring>

using namespace gpudyn;
using namespace gpudyn::detail;
using namespace gpudyn::ggarray_detail; // the bulk kernels

namespace {

constexpr unsigned kMaxBuckets = GPUDYN_GGARRAY_MAX_BUCKETS;
// Paper §VI-B: 32 and 512 LFVectors were the best; 512 is the default.
constexpr uint32_t kDefaultLfvectors = 512;
// Upper bound on LFVectors: compute_ranges scans them with one block.
constexpr uint32_t kMaxLfvectors = 65536;
// Default first bucket: 1024 elements, a multiple of every warp's coalesced width.
constexpr uint64_t kDefaultFirstBucket = 1024;
// Smallest first bucket: a warp of 32 elements, so span starts stay aligned to 32 elements.
constexpr uint64_t kMinFirstBucket = 32;
constexpr unsigned kThreads = 256;        // bookkeeping kernels (one thread per bucket / LFVector)
constexpr unsigned kRangesThreads = 1024; // one block scans all LFVector sizes
// options->pool_bytes that turns the bucket pool off.
constexpr uint64_t kNoPool = ~0ull;
// Smallest budget: 2 MiB (smaller budgets are rounded up to it); also the
// smallest run an array takes from a heap it shares.
constexpr uint64_t kMinBudget = uint64_t(1) << 21;
// The default budget and range follow gpudyn_heap_create's defaults for this page.
constexpr uint64_t kOwnHeapPage = uint64_t(1) << 12;
// Words of the arena record (ggarray.cuh's arena_record) and two more for the
// host's gpudyn_heap_malloc of a run (its size and pointer, device arrays).
constexpr size_t kArenaWords = 8, kArenaIoWords = 2;
static_assert(sizeof(arena_record) == kArenaWords * sizeof(uint64_t), "the arena record's words");
// struct_size of the options before max_budget_bytes and heap: still accepted.
constexpr size_t kOptionsV1Size = offsetof(gpudyn_ggarray_options_t, max_budget_bytes);
static_assert(kOptionsV1Size == 40 && sizeof(gpudyn_ggarray_options_t) == 56, "the published layouts' sizes");

unsigned blocks_for(unsigned long long n, unsigned threads) { return unsigned((n + threads - 1) / threads); }

} // namespace

struct gpudyn_ggarray_s {
    handle_state hs; // device, call ordering, lock
    uint32_t element_size = 0;
    uint32_t lfvectors = 0;
    uint32_t log2_first = 0;
    void* block = nullptr;           // one allocation for all bookkeeping below
    uint64_t* sizes = nullptr;       // [L] reservation counters
    uint64_t* failed = nullptr;      // [L] lowest failed start (~0: none)
    uint64_t* ranges = nullptr;      // [L+1]
    uint64_t* snapshot = nullptr;    // [L] sizes before a push, for rollback
    uint64_t* buckets = nullptr;     // [L*kMaxBuckets]
    uint32_t* state = nullptr;       // [L*kMaxBuckets]
    uint32_t* growth = nullptr;      // [L] ready prefix | seal
    uint64_t* status = nullptr;      // [1] (low 32 bits used): users' kernels
    uint64_t* host_status = nullptr; // [1] the host's own pushes and reserves (reported by their return)
    uint64_t* allocated = nullptr;   // [1]
    uint64_t* scratch = nullptr;     // [1] capacity sum, element count, kept count
    uint64_t* arena = nullptr;       // [kArenaWords + kArenaIoWords] the growth arena's record
    uint64_t* window = nullptr;      // [L] the bucket each LFVector's pushes go to (0: none)
    vmm_range pool;                  // bucket pool (pool.base == 0: none)
    uint32_t pool_max_rows = 0;      // bucket rows that fit the pool's virtual range
    uint32_t pool_rows = 0;          // bucket rows mapped
    uint64_t known_size = 0;         // the size as of the last host call that read or set it
    uint64_t device_bytes = 0;       // the device's memory (fixed: reserve checks against it without a driver query)
    gpudyn_heap_t heap = nullptr;    // a heap the array shares (options.heap), else nullptr: an own arena
    uint64_t budget = 0;             // own arena: bytes of its runs (before the first: what it will take)
    uint64_t max_budget = 0;         // own arena: the most set_budget may raise `budget` to
    std::vector<uint64_t> runs;      // the runs taken as arenas (the last is current): the device's
                                     // stream-ordered pool's (own arena) or the given heap's
    uint64_t last_run = 0;           // bytes of the current run
    bool grows = false;              // own arena mapped as kernels reach it (VMM), else one run of the budget
    bool budget_up_front = false;    // growing arena with budget_bytes given: the budget is mapped when opened
    growth_arena* growing = nullptr; // that arena once a kernel could need it
    bool viewed = false;             // get_view was called (the first one opens or adopts the arena)
    gpudyn_heap_view_t heap_view{};

    // Bytes of bucket rows 0..rows-1 in the pool: element_size * first * L * (2^rows - 1).
    unsigned __int128 pool_row_end(uint32_t rows) const {
        return ((unsigned __int128)element_size << log2_first) * lfvectors * (((unsigned __int128)1 << rows) - 1);
    }

    gpudyn_ggarray_view_t view() const {
        gpudyn_ggarray_view_t v{};
        v.version = GPUDYN_GGARRAY_VIEW_VERSION;
        v.element_size = element_size;
        v.num_lfvectors = lfvectors;
        v.log2_first_bucket = log2_first;
        v.sizes = reinterpret_cast<uint64_t>(sizes);
        v.failed_at = reinterpret_cast<uint64_t>(failed);
        v.growth = reinterpret_cast<uint64_t>(growth);
        v.ranges = reinterpret_cast<uint64_t>(ranges);
        v.buckets = reinterpret_cast<uint64_t>(buckets);
        v.bucket_state = reinterpret_cast<uint64_t>(state);
        v.status = reinterpret_cast<uint64_t>(status);
        v.allocated_bytes = reinterpret_cast<uint64_t>(allocated);
        v.pool = static_cast<uint64_t>(pool.base);
        v.pool_rows = pool.base ? pool_rows : 0;
        v.heap = heap_view;
        v.arena = reinterpret_cast<uint64_t>(arena);
        v.window = reinterpret_cast<uint64_t>(window);
        return v;
    }
    // The view of the host's own pushes and reserves: failures go to host_status.
    gpudyn_ggarray_view_t host_view() const {
        gpudyn_ggarray_view_t v = view();
        v.status = reinterpret_cast<uint64_t>(host_status);
        return v;
    }
    size_t sizes_bytes() const { return size_t(lfvectors) * sizeof(uint64_t); }
    // Elements per LFVector for `total` elements: ceil(total / L), without the
    // overflow of (total + L - 1) / L near UINT64_MAX.
    unsigned long long per_lfvector(unsigned long long total) const {
        return total / lfvectors + (total % lfvectors != 0);
    }
    // True when kMaxBuckets buckets of an LFVector can hold `per` elements.
    bool buckets_hold(unsigned long long per) const { return (per >> log2_first) < (1ull << (kMaxBuckets - 1)); }
    // Bucket rows that hold `per` elements per LFVector: the smallest R with first * (2^R - 1) >= per.
    uint32_t rows_for(unsigned long long per) const {
        uint32_t need = 0;
        while ((((1ull << need) - 1ull) << log2_first) < per) ++need;
        return need;
    }
    // Maps pool rows (host calls only) until `rows` are mapped or the pool's
    // range is full; OUT_OF_MEMORY changes nothing.
    void map_pool_rows(uint32_t rows) {
        if (pool.base == 0 || pool_rows >= rows || pool_rows >= pool_max_rows) return;
        pool.map_to(uint64_t(pool_row_end(std::min(rows, pool_max_rows))));
        while (pool_rows < pool_max_rows && pool_row_end(pool_rows + 1) <= pool.mapped) ++pool_rows;
    }
    void update_ranges(cudaStream_t s) const {
        ranges_kernel<unsigned char><<<1, kRangesThreads, 0, s>>>(view(), nullptr);
        GPUDYN_CHECK_LAUNCH("ranges_kernel");
    }
    // True when rows 0..rows-1 are all mapped in the pool (no heap needed for them).
    bool pool_covers(uint32_t rows) const { return rows <= (pool.base ? pool_rows : 0u); }

    // The growth arena, ready for kernels queued on `stream` after this call.
    // Own arena: one run of the budget from the device's stream-ordered pool
    // (cudaMallocAsync) the first time, so an array created and destroyed
    // per launch costs what any stream-ordered allocation costs (nothing
    // once the pool keeps its memory: cudaMemPoolAttrReleaseThreshold);
    // OUT_OF_MEMORY naming budget_bytes, and the array stays without one.
    // Shared heap: a run of it is taken when the array has none, or when the
    // current one has less than `need` bytes left, or a kernel was refused a
    // bucket since the last look (reading the record synchronizes `stream`);
    // the run is the array's share of the heap's free memory (the free bytes
    // over the arrays using the heap that hold no run, this one counted when it
    // takes another, plus one: the heap's own mallocs, from kernels and the
    // host, keep a share as large, so an array alone takes half, then half of
    // what is left), at least 2 MiB, twice the largest refused request and
    // `need`.  A heap with no such run left keeps the current arena (kernels
    // then fail their buckets, as an own arena's do once the budget is used).
    // True when it started a new run after a refused bucket (the caller lifts
    // the seals the refusal left).
    // Growing own arena: opened the first time (its virtual range is the
    // max budget, nothing mapped); then only told a launch may come (true
    // when the host thread had refused a bucket for want of device memory:
    // the caller lifts the seals, since the memory may be there now).
    bool ensure_arena(cudaStream_t stream, uint64_t need = 0) {
        if (grows) {
            if (growing == nullptr) {
                growing = growth_arena_open(hs.device, max_budget, !budget_up_front);
                try {
                    if (budget_up_front) map_budget(budget, "the array's budget");
                    // arena_record: taken, base, size (the budget), refused, end, refusals, mailbox, mapped.
                    const uint64_t rec[kArenaWords] = {0, uint64_t(growth_arena_base(growing)), budget, 0, 0,
                                                       0, growth_arena_mailbox(growing),        0};
                    GPUDYN_CUDA(cudaMemcpyAsync(arena, rec, sizeof(rec), cudaMemcpyHostToDevice, stream));
                } catch (...) {
                    // As before the first arena: the array stays without one, the next call tries again.
                    growth_arena_close(growing, stream);
                    growing = nullptr;
                    throw;
                }
            }
            return growth_arena_prepare(growing);
        }
        if (!heap) {
            if (runs.empty()) add_own_run(stream, budget, "the array's budget");
            return false;
        }
        uint64_t rec[kArenaWords] = {0, 0, 0, 0, 0, 0};
        if (!runs.empty()) {
            GPUDYN_CUDA(cudaMemcpyAsync(rec, arena, sizeof(rec), cudaMemcpyDeviceToHost, stream));
            GPUDYN_CUDA(cudaStreamSynchronize(stream));
            const uint64_t left = rec[2] - std::min(rec[4], rec[2]);
            if (rec[3] == 0 && left >= std::max<uint64_t>(need, 1)) return false;
        }
        gpudyn_heap_stats_t st{};
        st.struct_size = sizeof(st);
        if (gpudyn_heap_get_stats(heap, &st, reinterpret_cast<gpudyn_stream_t>(stream)) != GPUDYN_SUCCESS)
            raise(GPUDYN_ERROR_INTERNAL, "the given heap's stats: %s", gpudyn_last_error_message());
        const uint64_t free_b = st.bytes_mapped - std::min(st.bytes_held, st.bytes_mapped);
        // The arrays with no run yet, this one when it takes another, and the heap's own mallocs.
        const uint64_t share = free_b / (heap_arena_share(heap, 0) + (runs.empty() ? 0u : 1u) + 1u);
        const uint64_t floor = std::max({kMinBudget, need, 2 * rec[3]});
        uint64_t want = std::min(std::max(share, floor), st.largest_free_bytes);
        if (want < floor) return false; // no such run now: kernels fail their buckets, the status says so
        uint64_t got = 0;
        // A run as large as the share (at most the largest the heap can give),
        // else smaller ones down to the floor (work on other streams may take
        // memory in between).
        for (;;) {
            GPUDYN_CUDA(cudaMemcpyAsync(arena + kArenaWords, &want, sizeof(want), cudaMemcpyHostToDevice, stream));
            if (gpudyn_heap_malloc(heap, arena + kArenaWords, arena + kArenaWords + 1, 1,
                                   reinterpret_cast<gpudyn_stream_t>(stream)) == GPUDYN_SUCCESS)
                got = read_u64(arena + kArenaWords + 1, stream);
            if (got != 0 || want == floor) break;
            want = std::max(floor, want / 2);
        }
        if (got == 0) return false; // kernels fail their buckets; the status says so
        if (runs.empty()) heap_arena_share(heap, +1);
        start_run(stream, got, want);
        return rec[3] != 0;
    }
    // A budget given at create is mapped whole when the arena opens (and when
    // raised): kernels within it never wait for the host (OUT_OF_MEMORY, naming
    // `what`, when the device has not the memory; the budget stays as it was).
    void map_budget(uint64_t bytes, const char* what) {
        try {
            growth_arena_map(growing, bytes);
        } catch (const error& e) {
            raise(e.status, "%s (budget_bytes %llu, max_budget_bytes %llu): %s", what, (unsigned long long)budget,
                  (unsigned long long)max_budget, e.message.c_str());
        }
    }
    // Own arena: a run of `bytes` from the stream-ordered pool becomes the
    // current arena (OUT_OF_MEMORY, naming `what`, changes nothing).
    void add_own_run(cudaStream_t stream, uint64_t bytes, const char* what) {
        void* p = nullptr;
        try {
            device_alloc(&p, bytes, stream, what);
        } catch (const error& e) {
            raise(e.status, "%s (budget_bytes %llu, max_budget_bytes %llu): %s", what, (unsigned long long)budget,
                  (unsigned long long)max_budget, e.message.c_str());
        }
        start_run(stream, reinterpret_cast<uint64_t>(p), bytes);
    }
    // Run [base, base + bytes) becomes the current arena for kernels queued on
    // `stream` after this call (the count of refusals stays); what the last run
    // did not hand out stays unused.
    void start_run(cudaStream_t stream, uint64_t base, uint64_t bytes) {
        runs.push_back(base);
        last_run = bytes;
        const uint64_t fresh[kArenaWords - 1] = {0, base, bytes, 0, 0}; // arena_record up to `refusals`
        GPUDYN_CUDA(cudaMemcpyAsync(arena, fresh, sizeof(fresh), cudaMemcpyHostToDevice, stream));
    }
    // Upper bound on the arena bytes that buckets of rows [pool rows, rows) of
    // every LFVector take (their alignment included).
    uint64_t arena_bytes_for(uint32_t rows) const {
        const uint32_t from = pool.base ? std::min(pool_rows, rows) : 0u;
        if (rows <= from) return 0;
        const unsigned __int128 b = pool_row_end(rows) - pool_row_end(from) + (unsigned __int128)lfvectors * rows * 256;
        return b > ~0ull ? ~0ull : uint64_t(b);
    }
    // Budget now (the own arena's runs, or the shared heap's mapped bytes) and the most it may be raised to.
    void budget_of(uint64_t* now, uint64_t* max) const {
        if (heap) {
            heap_sizes(heap, now, max);
        } else {
            *now = budget;
            *max = max_budget;
        }
    }
    // What an out-of-memory message adds: where the buckets came from and how to get more.
    std::string budget_hint() const {
        uint64_t now = 0, max = 0;
        budget_of(&now, &max);
        char buf[320];
        if (grows)
            snprintf(buf, sizeof(buf),
                     "a bucket found no memory: the device had none left (the arena maps %llu bytes) or the "
                     "budget (%llu bytes, at most %llu) is used up; free device memory, or raise the budget with "
                     "gpudyn_ggarray_set_budget",
                     (unsigned long long)(growing ? growth_arena_mapped(growing) : 0), (unsigned long long)now,
                     (unsigned long long)max);
        else if (heap)
            snprintf(buf, sizeof(buf),
                     "the array's run of the given heap (%llu bytes; the heap maps %llu, at most %llu) is used up; "
                     "the next get_view, reserve or push_back takes another when the heap has the memory (raise it "
                     "with gpudyn_ggarray_set_budget or gpudyn_heap_grow)",
                     (unsigned long long)last_run, (unsigned long long)now, (unsigned long long)max);
        else
            snprintf(buf, sizeof(buf),
                     "the budget (%llu bytes for the array's buckets, at most %llu) is used up; raise it with "
                     "gpudyn_ggarray_set_budget",
                     (unsigned long long)now, (unsigned long long)max);
        return buf;
    }
    // Elements held now (sum over the LFVectors); synchronizes.
    uint64_t count_elements(cudaStream_t s) {
        ranges_kernel<unsigned char>
            <<<1, kRangesThreads, 0, s>>>(view(), reinterpret_cast<unsigned long long*>(scratch));
        GPUDYN_CHECK_LAUNCH("ranges_kernel");
        known_size = read_u64(scratch, s);
        return known_size;
    }
    // An adopted arena (growth_arena_open) maps what the array that closed it
    // took; what this array's buckets did not take goes back here.  `s` is idle
    // (the caller synchronized it or found it so).
    void give_back_ahead(cudaStream_t s) {
        if (!growing || !growth_arena_ahead(growing)) return;
        if (growth_arena_give_back(growing, read_u64(arena + 4, s))) {
            const uint64_t zero = 0; // the device's lower bound of what is mapped
            GPUDYN_CUDA(cudaMemcpyAsync(arena + 7, &zero, sizeof(zero), cudaMemcpyHostToDevice, s));
        }
    }
    // The same when `s` has no work left (a stream-ordered call: clear, and
    // get_view after the first, which precedes the launch the adoption is for).
    void give_back_if_idle(cudaStream_t s) {
        if (!growing || !growth_arena_ahead(growing)) return;
        if (cudaStreamQuery(s) == cudaSuccess) give_back_ahead(s);
        else cudaGetLastError();
    }
    // For array_get_status / array_clear_status: the users' status word; fold (keep).
    uint64_t* user_status() const { return status; }
    // Also resumes the arena after a refused bucket: bumps go on from the end
    // of the last bucket handed out (a refusal left `taken` past it).  With
    // `clear` also the ranges and the users' status are zeroed.
    void fold(cudaStream_t s, fold_mode mode = fold_mode::keep, const uint64_t* from = nullptr) const {
        dispatch_element(element_size, [&](auto tag) {
            using T = typename decltype(tag)::type;
            // L + 1 threads at least: the clear zeroes ranges[0..L].
            fold_kernel<T><<<blocks_for(uint64_t(lfvectors) + 1, kThreads), kThreads, 0, s>>>(
                view(), reinterpret_cast<const unsigned long long*>(from), mode);
            GPUDYN_CHECK_LAUNCH("fold_kernel");
        });
    }
};

namespace {

template <class F>
void with_type(const gpudyn_ggarray_s* a, F&& f) {
    dispatch_element(a->element_size, f);
}

// The options with every field the caller's struct_size does not cover at its default.
gpudyn_ggarray_options_t read_options(const gpudyn_ggarray_options_t* options) {
    require_address(options, "options");
    // The published layouts only: a size between them would copy part of a field
    // (half of `heap`: issue 39, item 3).
    const size_t known[] = {kOptionsV1Size, sizeof(gpudyn_ggarray_options_t)};
    require_known_struct_size(options->struct_size, "options", known, 2);
    gpudyn_ggarray_options_t o;
    gpudyn_ggarray_options_init(&o);
    std::memcpy(&o, options, std::min<size_t>(options->struct_size, sizeof(o)));
    o.struct_size = sizeof(o);
    return o;
}

} // namespace

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_ggarray_options_init(gpudyn_ggarray_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        *options = gpudyn_ggarray_options_t{};
        options->struct_size = sizeof(*options);
        options->element_size = 4;
        options->num_lfvectors = kDefaultLfvectors;
        options->first_bucket_elements = kDefaultFirstBucket;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_create(gpudyn_ggarray_t* array, const gpudyn_ggarray_options_t* options,
                                                 gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        *array = nullptr;
        const gpudyn_ggarray_options_t opt = read_options(options);
        const gpudyn_ggarray_options_t* const o = &opt;
        require_element_size(o->element_size, "options->element_size");
        GPUDYN_REQUIRE(o->num_lfvectors >= 1 && o->num_lfvectors <= kMaxLfvectors,
                       "options->num_lfvectors is %u, expected 1..%u", unsigned(o->num_lfvectors),
                       unsigned(kMaxLfvectors));
        const uint64_t first = o->first_bucket_elements;
        GPUDYN_REQUIRE(first >= kMinFirstBucket && first <= (1ull << 30) && (first & (first - 1)) == 0,
                       "options->first_bucket_elements is %llu, expected a power of two in [%llu, 2^30]",
                       (unsigned long long)first, (unsigned long long)kMinFirstBucket);
        GPUDYN_REQUIRE(o->reserved == 0, "options->reserved is %u, expected 0", unsigned(o->reserved));
        GPUDYN_REQUIRE(o->heap == nullptr || (o->budget_bytes == 0 && o->max_budget_bytes == 0),
                       "options->budget_bytes is %llu and options->max_budget_bytes %llu, expected 0 with "
                       "options->heap (the given heap's mapping is the budget)",
                       (unsigned long long)o->budget_bytes, (unsigned long long)o->max_budget_bytes);
        GPUDYN_REQUIRE(o->max_budget_bytes == 0 || o->budget_bytes <= o->max_budget_bytes,
                       "options->budget_bytes is %llu, more than options->max_budget_bytes (%llu)",
                       (unsigned long long)o->budget_bytes, (unsigned long long)o->max_budget_bytes);
        if (o->heap != nullptr) require_handle(o->heap, handle_kind::heap, "options->heap"); // not dereferenced else
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        uint64_t budget = o->budget_bytes, max_budget = o->max_budget_bytes;
        const bool grows = o->heap == nullptr && vmm_supported(device);
        size_t free_b = 0, total_b = 0;
        GPUDYN_CUDA(cudaMemGetInfo(&free_b, &total_b));
        if (o->heap) {
            const int heap_device = heap_state(o->heap).device;
            GPUDYN_REQUIRE(heap_device == device, "options->heap belongs to device %d, the array to device %d",
                           heap_device, device);
        } else {
            GPUDYN_REQUIRE(max_budget <= total_b,
                           "options->max_budget_bytes is %llu, more than the device's memory (%zu bytes)",
                           (unsigned long long)max_budget, total_b);
            GPUDYN_REQUIRE(budget <= total_b,
                           "options->budget_bytes is %llu, more than the device's memory (%zu bytes)",
                           (unsigned long long)budget, total_b);
            if (budget != 0) budget = std::max(budget, kMinBudget);
            if (max_budget != 0) max_budget = std::max(max_budget, kMinBudget);
            if (grows) {
                // Nothing is taken up front: the budget only bounds what kernels
                // may map, so by default it is all the device's memory.
                if (budget != 0) heap_resolve_sizes(kOwnHeapPage, &budget, &max_budget);
                if (max_budget == 0) max_budget = total_b;
                if (budget == 0) budget = max_budget;
            } else {
                heap_resolve_sizes(kOwnHeapPage, &budget, &max_budget); // the heap's defaults for that page
            }
        }
        auto* h = new gpudyn_ggarray_s{};
        h->element_size = o->element_size;
        h->lfvectors = o->num_lfvectors;
        h->budget = budget;
        h->max_budget = max_budget;
        h->grows = grows;
        h->budget_up_front = grows && o->budget_bytes != 0;
        h->device_bytes = total_b;
        while ((1ull << h->log2_first) < first) ++h->log2_first;
        const size_t L = h->lfvectors;
        const size_t u64s = 5 * L + 1 + L * kMaxBuckets + 4 + kArenaWords + kArenaIoWords;
        const size_t bytes = u64s * sizeof(uint64_t) + (L * kMaxBuckets + L) * sizeof(uint32_t);
        try {
            h->hs.init();
            device_alloc(&h->block, bytes, s, "the GGArray's bookkeeping");
            GPUDYN_CUDA(cudaMemsetAsync(h->block, 0, bytes, s));
            uint64_t* p = static_cast<uint64_t*>(h->block);
            h->sizes = p;
            p += L;
            h->failed = p;
            p += L;
            h->ranges = p;
            p += L + 1;
            h->snapshot = p;
            p += L;
            h->buckets = p;
            p += L * kMaxBuckets;
            h->status = p++;
            h->host_status = p++;
            h->allocated = p++;
            h->scratch = p++;
            h->arena = p;
            p += kArenaWords + kArenaIoWords;
            h->window = p;
            p += L; // zero: no window until a fold or a push sets one
            h->state = reinterpret_cast<uint32_t*>(p);
            h->growth = h->state + L * kMaxBuckets;
            GPUDYN_CUDA(cudaMemsetAsync(h->failed, 0xff, L * sizeof(uint64_t), s)); // no failure
            if (o->pool_bytes != kNoPool) {
                try {
                    h->pool.reserve(device, o->pool_bytes, "options->pool_bytes");
                } catch (const error& e) {
                    if (e.status != GPUDYN_ERROR_NOT_SUPPORTED) throw;
                    h->pool = vmm_range{}; // no VMM: every bucket from the heap
                }
                while (h->pool_max_rows < kMaxBuckets && h->pool_row_end(h->pool_max_rows + 1) <= h->pool.reserved)
                    ++h->pool_max_rows;
            }
            if (o->heap) {
                if (gpudyn_heap_get_view(o->heap, &h->heap_view) != GPUDYN_SUCCESS)
                    raise(GPUDYN_ERROR_INVALID_ARGUMENT, "options->heap: %s", gpudyn_last_error_message());
            }
            dispatch_element(h->element_size, [](auto tag) {
                using T = typename decltype(tag)::type;
                preload_push<T, ggarray_ref<T>>();
                preload_kernels(&fold_kernel<T>, &grow_kernel<T>, &capacity_kernel<T>, &flatten_kernel<T>,
                                &ranges_kernel<unsigned char, gpudyn_ggarray_view_t>, &count_kernel<uint8_t>);
            });
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::ggarray);
        } catch (...) {
            h->pool.release();
            if (h->block) cudaFreeAsync(h->block, s);
            h->hs.release();
            delete h;
            throw;
        }
        if (o->heap) {
            h->heap = o->heap;
            heap_add_user(o->heap, +1);
        }
        *array = h;
    });
}

// Frees the buckets and the bookkeeping stream-ordered after the array's last
// call, on the library's stream of the array's device: no device
// synchronization (the pool's mapping waits for the array's own event before
// it is unmapped).  A failure leaves the handle owning
// what it still holds.
GPUDYN_API gpudyn_status_t gpudyn_ggarray_destroy(gpudyn_ggarray_t array) {
    GPUDYN_ABI_RELEASE({
        if (array == nullptr) return;
        require_handle(array, handle_kind::ggarray, "array"); // destroyed, foreign, garbage: refused
        {
            handle_call call(array->hs);
            cudaStream_t s = array->hs.release_stream();
            const gpudyn_stream_t on_s = reinterpret_cast<gpudyn_stream_t>(s);
            if (array->heap && !array->runs.empty() && array->block) {
                // The runs go back to the given heap after the array's last work
                // (the heap's free is ordered on `s`); their pointers from the
                // record's spare words, one run at a time.
                // Each run leaves the list once freed, so a destroy retried after a
                // failure frees only the rest.
                while (!array->runs.empty()) {
                    const uint64_t r = array->runs.back();
                    GPUDYN_CUDA(cudaMemcpyAsync(array->arena + kArenaWords, &r, sizeof(r), cudaMemcpyHostToDevice, s));
                    const gpudyn_status_t st = gpudyn_heap_free(array->heap, array->arena + kArenaWords, 1, on_s);
                    if (st != GPUDYN_SUCCESS) raise(st, "the given heap: %s", gpudyn_last_error_message());
                    array->runs.pop_back();
                }
                heap_arena_share(array->heap, -1);
            }
            if (array->growing) {
                // Unmapped by the library's host thread once the array's last work is done.
                growth_arena_close(array->growing, s);
                array->growing = nullptr;
            }
            if (!array->heap) {
                // The own arena's runs go back to the stream-ordered pool after the array's last work.
                while (!array->runs.empty()) {
                    GPUDYN_CUDA(cudaFreeAsync(reinterpret_cast<void*>(array->runs.back()), s));
                    array->runs.pop_back();
                }
            }
            if (array->block) {
                // The frees are on `s`; the event now follows them (the pool's unmapping waits for it).
                GPUDYN_CUDA(cudaFreeAsync(array->block, s));
                array->block = nullptr;
                GPUDYN_CUDA(cudaEventRecord(array->hs.done, s));
            }
            if (array->heap) {
                heap_add_user(array->heap, -1);
                array->heap = nullptr;
            }
            if (array->pool.base) {
                // The mappings are not stream-ordered: wait for the calls (and frees) that used them.
                GPUDYN_CUDA(cudaEventSynchronize(array->hs.done));
                array->pool.release();
            }
        }
        array->hs.release();
        unregister_handle(array);
        delete array;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_reserve(gpudyn_ggarray_t array, uint64_t capacity, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        cudaStream_t s = call.stream();
        const unsigned long long per = array->per_lfvector(capacity);
        GPUDYN_REQUIRE(array->buckets_hold(per),
                       "argument 'capacity' is %llu, more than %u buckets per LFVector can hold",
                       (unsigned long long)capacity, kMaxBuckets);
        if (capacity == 0) return;
        // More bytes than the device has can never be reserved: say so before any
        // kernel (the heap or the pool would fail only after a kernel or a mapping).
        if (capacity > array->device_bytes / array->element_size)
            raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                  "argument 'capacity' is %llu elements of %u bytes, more than the device's %llu bytes",
                  (unsigned long long)capacity, unsigned(array->element_size), (unsigned long long)array->device_bytes);
        const uint32_t need = array->rows_for(per);
        try {
            array->map_pool_rows(need); // host calls only; OOM keeps everything
        } catch (const error& e) {
            raise(e.status, "argument 'capacity' is %llu: %s", (unsigned long long)capacity, e.message.c_str());
        }
        // A user kernel's failed reservation is given back and its seals lifted
        // first: a sealed LFVector may use the new rows, and the grow kernel
        // below would otherwise refuse its buckets at the seal.
        array->fold(s, fold_mode::keep);
        if (array->pool_covers(need)) return; // all in the pool: no kernel
        try {
            array->ensure_arena(s, array->arena_bytes_for(need));
        } catch (const error& e) {
            raise(e.status, "argument 'capacity' is %llu: %s", (unsigned long long)capacity, e.message.c_str());
        }
        // Our failures go to host_status (the users' status bits stay); the fold
        // after the kernel lifts the seals a failed bucket left.
        GPUDYN_CUDA(cudaMemsetAsync(array->host_status, 0, sizeof(uint64_t), s));
        const unsigned long long n = (unsigned long long)array->lfvectors * kMaxBuckets;
        with_type(array, [&](auto tag) {
            using T = typename decltype(tag)::type;
            grow_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>(array->host_view(), per);
            GPUDYN_CHECK_LAUNCH("grow_kernel");
        });
        array->fold(s, fold_mode::keep);
        const uint32_t st = read_status(reinterpret_cast<const uint32_t*>(array->host_status), s);
        if (st != 0)
            raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                  "argument 'capacity' is %llu: the arena could not give every bucket beyond the pool (status %u): %s",
                  (unsigned long long)capacity, unsigned(st), array->budget_hint().c_str());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_push_back(gpudyn_ggarray_t array, const void* values, uint64_t count,
                                                    const uint8_t* mask, gpudyn_insert_algo_t algorithm,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        require_push_args(values, count, algorithm);
        handle_call call(array->hs, stream);
        if (count == 0) return;
        buffer_bytes(count, array->element_size, "count", "values");
        require_push_buffers(array->hs.device, values, count, array->element_size, mask);
        cudaStream_t s = call.stream();
        // The parts deal the LFVectors on from the known size (they stay within
        // one element of each other), so the rows this call needs are known on
        // the host: map them first (no heap needed).  If user kernels pushed
        // since, an LFVector beyond them takes its extra buckets from the heap,
        // as a user kernel's push does.
        const uint32_t L = array->lfvectors;
        const bulk_plan plan = push_plan(count, L, unsigned(array->known_size % L));
        GPUDYN_REQUIRE(count <= ~0ull - array->known_size,
                       "argument 'count' is %llu: with the %llu elements present the size overflows 64 bits",
                       (unsigned long long)count, (unsigned long long)array->known_size);
        // Rows for the elements kept, not for every candidate: a mask is counted first.
        uint64_t kept = count;
        if (mask != nullptr) {
            GPUDYN_CUDA(cudaMemsetAsync(array->scratch, 0, sizeof(uint64_t), s));
            count_kernel<<<grid_for(count, kThreads, 8), kThreads, 0, s>>>(
                mask, count, reinterpret_cast<unsigned long long*>(array->scratch));
            GPUDYN_CHECK_LAUNCH("count_kernel");
            kept = read_u64(array->scratch, s);
            if (kept == 0) return;
        }
        const unsigned long long per = array->per_lfvector(array->known_size + kept);
        try {
            if (array->buckets_hold(per)) array->map_pool_rows(array->rows_for(per)); // no pool: nothing
        } catch (const error& e) {
            // No physical memory for the rows: the kernel still tries the heap.
            if (e.status != GPUDYN_ERROR_OUT_OF_MEMORY) throw;
        }
        // Rows the pool does not cover come from the arena (made ready now if need be).
        if (!array->buckets_hold(per)) {
            array->ensure_arena(s);
        } else {
            const uint32_t rows = array->rows_for(per);
            if (!array->pool_covers(rows)) array->ensure_arena(s, array->arena_bytes_for(rows));
        }
        // A user kernel's failed reservation is given back first (the status bits stay).
        array->fold(s, fold_mode::keep);
        GPUDYN_CUDA(cudaMemcpyAsync(array->snapshot, array->sizes, array->sizes_bytes(), cudaMemcpyDeviceToDevice, s));
        GPUDYN_CUDA(cudaMemsetAsync(array->host_status, 0, sizeof(uint64_t), s));
        with_type(array, [&](auto tag) {
            using T = typename decltype(tag)::type;
            launch_push<T>(ggarray_ref<T>{array->host_view()}, values, mask, count, algorithm, plan, s);
        });
        array->count_elements(s); // synchronizes: the status below is final
        const uint32_t st = read_status(reinterpret_cast<const uint32_t*>(array->host_status), s);
        if (st != 0) {
            // Blocks that reserved before the failure stored their elements: restore the sizes.
            array->fold(s, fold_mode::restore, array->snapshot);
            array->count_elements(s);
            if (st & GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED)
                raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                      "the arena could not give a bucket while inserting %llu element(s); nothing was inserted: %s",
                      (unsigned long long)count, array->budget_hint().c_str());
            raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                  "an LFVector reached GPUDYN_GGARRAY_MAX_BUCKETS while inserting %llu element(s); nothing was "
                  "inserted",
                  (unsigned long long)count);
        }
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_size(gpudyn_ggarray_t array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        GPUDYN_REQUIRE_NOT_NULL(size);
        handle_call call(array->hs, stream);
        *size = array->count_elements(call.stream()); // synchronizes
        array->give_back_ahead(call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_capacity(gpudyn_ggarray_t array, uint64_t* capacity, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        GPUDYN_REQUIRE_NOT_NULL(capacity);
        handle_call call(array->hs, stream);
        cudaStream_t s = call.stream();
        GPUDYN_CUDA(cudaMemsetAsync(array->scratch, 0, sizeof(uint64_t), s));
        with_type(array, [&](auto tag) {
            using T = typename decltype(tag)::type;
            capacity_kernel<T><<<blocks_for(array->lfvectors, kThreads), kThreads, 0, s>>>(
                array->view(), reinterpret_cast<unsigned long long*>(array->scratch));
            GPUDYN_CHECK_LAUNCH("capacity_kernel");
        });
        *capacity = read_u64(array->scratch, s);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_allocated_bytes(gpudyn_ggarray_t array, uint64_t* bytes,
                                                          gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        GPUDYN_REQUIRE_NOT_NULL(bytes);
        handle_call call(array->hs, stream);
        const uint64_t buckets = read_u64(array->allocated, call.stream()); // synchronizes
        array->give_back_ahead(call.stream());
        // A growing arena holds what it maps (at least its buckets' bytes); a
        // budget mapped up front counts its buckets, as a fixed run does.
        *bytes = (array->growing && !array->budget_up_front ? growth_arena_mapped(array->growing) : buckets) +
                 array->pool.mapped;
    });
}

namespace {
void ggarray_copy_out(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes, bool to_host, cudaStream_t s) {
    // A given dst holds dst_bytes (before any kernel; NULL is refused below unless there is nothing to copy).
    require_copy_dst(array->hs.device, dst, dst_bytes, array->element_size, to_host);
    array->update_ranges(s); // the flatten kernel walks these
    const uint64_t n = read_u64(array->ranges + array->lfvectors, s);
    array->give_back_ahead(s);
    const uint64_t bytes = n * array->element_size;
    if (bytes == 0) return;
    if (dst == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst' is NULL");
    if (dst_bytes < bytes)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst_bytes' is %llu, expected >= %llu (size %llu x %u bytes)",
              (unsigned long long)dst_bytes, (unsigned long long)bytes, (unsigned long long)n,
              unsigned(array->element_size));
    void* target = dst;
    if (to_host) GPUDYN_CUDA(cudaMallocAsync(&target, bytes, s));
    try {
        with_type(array, [&](auto tag) {
            using T = typename decltype(tag)::type;
            const uint64_t parts = (n * sizeof(T) + kFlattenPartBytes - 1) / kFlattenPartBytes;
            const unsigned grid = grid_for(parts * kFlattenThreads, kFlattenThreads, kFlattenBlocksPerSm);
            flatten_kernel<T><<<grid, kFlattenThreads, 0, s>>>(array->view(), static_cast<T*>(target), n);
            GPUDYN_CHECK_LAUNCH("flatten_kernel");
        });
        if (to_host) {
            GPUDYN_CUDA(cudaMemcpyAsync(dst, target, bytes, cudaMemcpyDeviceToHost, s));
            GPUDYN_CUDA(cudaFreeAsync(target, s));
            GPUDYN_CUDA(cudaStreamSynchronize(s));
        }
    } catch (...) {
        if (to_host) {
            cudaFreeAsync(target, s);
            cudaStreamSynchronize(s);
        }
        throw;
    }
}
} // namespace

GPUDYN_API gpudyn_status_t gpudyn_ggarray_flatten(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                  gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        ggarray_copy_out(array, dst, dst_bytes, false, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_copy_to_host(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                       gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        ggarray_copy_out(array, dst, dst_bytes, true, call.stream());
    });
}

// The count stays on the device: the ranges kernel's total (count_elements without the read).
GPUDYN_API gpudyn_status_t gpudyn_ggarray_size_async(gpudyn_ggarray_t array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        require_device_array(array->hs.device, size, 1, "size", "size");
        handle_call call(array->hs, stream);
        ranges_kernel<unsigned char>
            <<<1, kRangesThreads, 0, call.stream()>>>(array->view(), reinterpret_cast<unsigned long long*>(size));
        GPUDYN_CHECK_LAUNCH("ranges_kernel");
    });
}

// The ranges, then one kernel that reads their total and copies (or refuses) on the device.
GPUDYN_API gpudyn_status_t gpudyn_ggarray_flatten_async(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                        uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        require_flatten_async_args(array->hs.device, dst, dst_bytes, array->element_size, size);
        handle_call call(array->hs, stream);
        cudaStream_t s = call.stream();
        array->update_ranges(s);
        with_type(array, [&](auto tag) {
            using T = typename decltype(tag)::type;
            launch_flatten_async<T>(ggarray_ref<T>{array->view()}, dst, dst_bytes, size, array->status, s);
        });
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_clear(gpudyn_ggarray_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        cudaStream_t s = call.stream();
        array->give_back_if_idle(s);
        array->fold(s, fold_mode::clear); // also zeroes the ranges and the status
        array->known_size = 0;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_trim(gpudyn_ggarray_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        cudaStream_t s = call.stream();
        if (array->growing) {
            if (array->count_elements(s) == 0) { // synchronizes
                with_type(array, [&](auto tag) {
                    using T = typename decltype(tag)::type;
                    drop_kernel<T><<<blocks_for(array->lfvectors, kThreads), kThreads, 0, s>>>(array->view());
                    GPUDYN_CHECK_LAUNCH("drop_kernel");
                });
                GPUDYN_CUDA(cudaStreamSynchronize(s));
                growth_arena_trim(array->growing, 0);
            } else {
                // The mapping past the last bucket handed out.
                growth_arena_trim(array->growing, read_u64(array->arena + 4, s));
                const uint64_t zero = 0; // the device's lower bound of what is mapped
                GPUDYN_CUDA(cudaMemcpyAsync(array->arena + 7, &zero, sizeof(zero), cudaMemcpyHostToDevice, s));
            }
        }
        growth_reserve_release(array->hs.device);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_view(gpudyn_ggarray_t array, gpudyn_ggarray_view_t* view,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        GPUDYN_REQUIRE_NOT_NULL(view);
        handle_call call(array->hs, stream);
        // Kernels with this view may need buckets beyond the pool.  A new run after a
        // refused bucket (the heap grew, or freed memory) also lifts the seals the
        // refusal left, so the next kernel can store the rest.
        if (array->viewed) array->give_back_if_idle(call.stream());
        if (array->ensure_arena(call.stream())) array->fold(call.stream(), fold_mode::keep);
        array->update_ranges(call.stream());
        *view = array->view();
        array->viewed = true;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_set_budget(gpudyn_ggarray_t array, uint64_t budget_bytes,
                                                     gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs, stream);
        uint64_t now = 0, max = 0;
        array->budget_of(&now, &max);
        GPUDYN_REQUIRE(budget_bytes <= max,
                       "argument 'budget_bytes' is %llu, more than the array's max_budget_bytes (%llu: the %s "
                       "range)",
                       (unsigned long long)budget_bytes, (unsigned long long)max,
                       array->heap ? "given heap's" : "array's arena");
        if (budget_bytes <= now) return;
        if (array->grows) {
            // The bound moves; a budget given at create is mapped up to it first
            // (OUT_OF_MEMORY leaves the budget as it was), otherwise memory is
            // still mapped as kernels reach it.
            const uint64_t want = std::max(budget_bytes, kMinBudget);
            if (array->growing && array->budget_up_front) {
                char what[96];
                snprintf(what, sizeof(what), "argument 'budget_bytes' is %llu", (unsigned long long)budget_bytes);
                array->map_budget(want, what);
            }
            array->budget = want;
            if (array->growing) {
                GPUDYN_CUDA(cudaMemcpyAsync(array->arena + 2, &array->budget, sizeof(uint64_t), cudaMemcpyHostToDevice,
                                            call.stream()));
                array->fold(call.stream(), fold_mode::keep); // lifts the seals the old bound left
            }
            return;
        }
        if (!array->heap) {
            const uint64_t want = std::max(budget_bytes, kMinBudget);
            if (array->runs.empty()) {
                array->budget = want; // taken when the arena is first needed
                return;
            }
            // Another run of the difference becomes the arena: kernels queued after
            // this call see it, and the seals of buckets the old run could not give
            // are lifted.
            char what[96];
            snprintf(what, sizeof(what), "argument 'budget_bytes' is %llu", (unsigned long long)budget_bytes);
            array->add_own_run(call.stream(), want - array->budget, what);
            array->budget = want;
            array->fold(call.stream(), fold_mode::keep); // also resumes the arena
            return;
        }
        // The heap's grow orders itself with the heap's calls (and, through `stream`, after ours).
        const gpudyn_status_t st =
            gpudyn_heap_grow(array->heap, budget_bytes, reinterpret_cast<gpudyn_stream_t>(call.stream()));
        if (st != GPUDYN_SUCCESS)
            raise(st, "argument 'budget_bytes' is %llu: %s", (unsigned long long)budget_bytes,
                  gpudyn_last_error_message());
        // LFVectors sealed by a bucket the old budget could not give may grow
        // again: the next launch can store the rest (the status bits stay).
        array->fold(call.stream(), fold_mode::keep);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_budget(gpudyn_ggarray_t array, uint64_t* budget_bytes,
                                                     uint64_t* max_budget_bytes) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        handle_call call(array->hs);
        uint64_t now = 0, max = 0;
        array->budget_of(&now, &max);
        if (budget_bytes) *budget_bytes = now;
        if (max_budget_bytes) *max_budget_bytes = max;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_status(gpudyn_ggarray_t array, uint32_t* status, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        array_get_status(array, status, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_ggarray_clear_status(gpudyn_ggarray_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::ggarray, "array");
        array_clear_status(array, stream);
    });
}

} // extern "C"
