// GPU correctness of the GGArray, static and VMM arrays through the C ABI and
// through the device API from a user's kernel:
//   A  every structure x algorithm x element size: stored multiset == input
//      (all, then mask-selected), flatten == copy_to_host;
//   B  the precursor's "insert a copy of x if x < 90";
//   C  user kernels with odd block shapes (100 threads, 8x4x3) push_back with
//      every algorithm, tile by tile and by chunk (push_back_chunk, masked, one
//      reservation per block); at() and span reads agree with flatten;
//   E  one block's chunk keeps input order with the scans (push_back_chunk into
//      a static array and a one-LFVector GGArray with 32-element first buckets,
//      so tiles straddle buckets), for odd block shapes and item counts;
//   F  per-thread push_back(values, n): each thread's values stay contiguous and
//      in order, 4- and 8-byte elements, runs of 0-37 (the 16-byte store path
//      and its unaligned head and tail), GGArray with 32-element first buckets
//      (runs cross buckets) and a static array;
//   D  growth over 10 doublings from 1e6 int32 (to 1.024e9): every value present
//      exactly once (checked on the device), GGArray bytes <= 2x elements + first buckets.
#include <gpudyn/ggarray.cuh>
#include <gpudyn/vmm_array.cuh>

extern "C" {
#include "ggarray_test_util.h"
}

#include <algorithm>
#include <vector>

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull; // SplitMix64 (Steele, Lea, Flood 2014)
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void* to_device(const void* host, size_t bytes) {
    void* d = nullptr;
    CHECK_OK(gpudyn_device_alloc(&d, bytes ? bytes : 1, NULL));
    if (bytes) CHECK_OK(gpudyn_memcpy(d, host, bytes, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
    return d;
}

static const gpudyn_insert_algo_t kAlgos[] = {GPUDYN_INSERT_ATOMIC, GPUDYN_INSERT_WARP_SCAN, GPUDYN_INSERT_TENSOR_SCAN};
static const uint32_t kSizes[] = {1, 2, 4, 8, 16};

// ---- A ----
static void test_multiset(array_kind kind, gpudyn_insert_algo_t algo, uint32_t es, uint32_t lfv, uint64_t first) {
    const uint64_t n = 100003; // prime: partial tiles and warps everywhere
    std::vector<uint8_t> in(n * es), mask(n);
    for (uint64_t i = 0; i < n; ++i) {
        for (uint32_t b = 0; b < es; b += 8) {
            uint64_t r = splitmix(i * 3 + b);
            memcpy(&in[i * es + b], &r, es - b < 8 ? es - b : 8);
        }
        mask[i] = (splitmix(i) % 3) == 0;
    }
    any_array a;
    CHECK_OK(any_create(&a, kind, es, 2 * n, lfv, first));
    void* din = to_device(in.data(), in.size());
    void* dmask = to_device(mask.data(), n);
    CHECK_OK(any_push(&a, din, n, NULL, algo));
    CHECK(any_size(&a) == n);
    std::vector<uint8_t> out(n * es), ref;
    CHECK_OK(any_to_host(&a, out.data(), out.size()));
    ref = in;
    if (!same_multiset(out.data(), ref.data(), n, es)) {
        fprintf(stderr, "A: %s algo %d size %u: stored multiset differs from input\n", kind_name[kind], int(algo), es);
        ++gpudyn_test_failures;
    }
    // mask-selected second push
    CHECK_OK(any_push(&a, din, n, (const uint8_t*)dmask, algo));
    uint64_t sel = 0;
    std::vector<uint8_t> expect(in);
    for (uint64_t i = 0; i < n; ++i)
        if (mask[i]) {
            expect.insert(expect.end(), in.begin() + i * es, in.begin() + (i + 1) * es);
            ++sel;
        }
    const uint64_t total = n + sel;
    CHECK(any_size(&a) == total);
    out.assign(total * es, 0);
    CHECK_OK(any_to_host(&a, out.data(), out.size()));
    std::vector<uint8_t> flat(total * es, 0xab);
    void* dflat = nullptr;
    CHECK_OK(gpudyn_device_alloc(&dflat, total * es, NULL));
    CHECK_OK(any_flatten(&a, dflat, total * es));
    CHECK_OK(gpudyn_memcpy(flat.data(), dflat, total * es, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(gpudyn_stream_synchronize(NULL));
    if (memcmp(flat.data(), out.data(), out.size()) != 0) {
        fprintf(stderr, "A: %s algo %d size %u: flatten differs from copy_to_host\n", kind_name[kind], int(algo), es);
        ++gpudyn_test_failures;
    }
    if (!same_multiset(out.data(), expect.data(), total, es)) {
        fprintf(stderr, "A: %s algo %d size %u: multiset after masked push differs\n", kind_name[kind], int(algo), es);
        ++gpudyn_test_failures;
    }
    // too-small destination is refused, naming the argument
    CHECK_INVALID(any_flatten(&a, dflat, es), "dst_bytes");
    gpudyn_device_free(dflat, NULL);
    gpudyn_device_free(din, NULL);
    gpudyn_device_free(dmask, NULL);
    any_destroy(&a);
}

// ---- C: device API from a user kernel ----
// Chunk source: the block's slice of the input, flagged when x < 90.
struct below90 {
    const int* in;
    __device__ bool all_flagged() const { return false; }
    __device__ bool flag(unsigned long long j) const { return in[j] < 90; }
    __device__ int value(unsigned long long j) const { return in[j]; }
};
// 1024-thread blocks: the growth path (a call into the heap) takes the kernel
// past 64 registers a thread, so the bound is stated (see ggarray.cuh, "Registers").
template <gpudyn::insert_algo A>
__global__ void __launch_bounds__(1024)
    user_push(gpudyn_ggarray_view_t gv, gpudyn_static_array_view_t sv, const int* in, unsigned n, unsigned rounds,
              int* fails, bool chunked) {
    // Sized for the largest block of the tests (1024); the calls deduce it.
    __shared__ gpudyn::push_storage<gpudyn::kMaxBlockThreads, A> tg;
    __shared__ gpudyn::push_storage<gpudyn::kMaxBlockThreads, A> ts;
    gpudyn::ggarray_ref<int> g{gv};
    gpudyn::static_array_ref<int> s{sv};
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    const unsigned rank = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (chunked) { // 2 items per thread: the chunk is 1.5 tiles (a partial last tile)
        const unsigned lo = blockIdx.x * rounds * threads;
        const unsigned m = lo >= n ? 0u : (n - lo < rounds * threads ? n - lo : rounds * threads);
        const below90 src{in + lo};
        if (!g.push_back_chunk<2>(tg, m, src)) atomicAdd(fails, 1);
        if (!s.push_back_chunk<2>(ts, m, src)) atomicAdd(fails, 1);
        return;
    }
    for (unsigned r = 0; r < rounds; ++r) {
        const unsigned i = (blockIdx.x * rounds + r) * threads + rank;
        const int x = i < n ? in[i] : 0;
        const bool take = i < n && x < 90;
        if (!g.push_back(tg, take, x)) atomicAdd(fails, 1);
        if (!s.push_back(ts, take, x)) atomicAdd(fails, 1);
    }
}

__global__ void read_at(gpudyn_ggarray_view_t gv, int* out, unsigned long long n) {
    gpudyn::ggarray_ref<int> g{gv};
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        out[i] = g.at(i);
}
__global__ void read_spans(gpudyn_ggarray_view_t gv, int* out, unsigned long long chunk) {
    gpudyn::ggarray_ref<int> g{gv};
    const unsigned long long lo = blockIdx.x * chunk;
    g.for_each_span(lo, lo + chunk, [&](const int* p, unsigned long long m, unsigned long long first) {
        for (unsigned long long i = threadIdx.x; i < m; i += blockDim.x) out[first + i] = p[i];
    });
}

// A GGArray and a static array that one user kernel fills from the same input.
struct pair_fixture {
    any_array g, s;
    gpudyn_ggarray_view_t gv;
    gpudyn_static_array_view_t sv;
    int* din = nullptr;
    int* dfails = nullptr;
    pair_fixture(const std::vector<int>& in, uint32_t lfvectors) {
        CHECK_OK(any_create(&g, KIND_GGARRAY, 4, 0, lfvectors, 32));
        CHECK_OK(any_create(&s, KIND_STATIC, 4, in.size(), 0, 0));
        CHECK_OK(gpudyn_ggarray_get_view(g.g, &gv, NULL));
        CHECK_OK(gpudyn_static_array_get_view(s.s, &sv));
        din = (int*)to_device(in.data(), in.size() * 4);
        dfails = (int*)to_device("\0\0\0\0", 4);
    }
    // After the launch: the kernel ran and no push_back reported failure.
    void check_launch() {
        CHECK(cudaDeviceSynchronize() == cudaSuccess);
        int fails = -1;
        cudaMemcpy(&fails, dfails, 4, cudaMemcpyDeviceToHost);
        CHECK(fails == 0);
    }
    ~pair_fixture() {
        cudaFree(din);
        cudaFree(dfails);
        any_destroy(&g);
        any_destroy(&s);
    }
};

template <gpudyn::insert_algo A>
static void test_user_kernel(dim3 block, int algo_id, bool chunked) {
    const unsigned rounds = 3, blocks = 37;
    const unsigned threads = block.x * block.y * block.z;
    const unsigned n = blocks * rounds * threads - 17; // last block partly idle
    std::vector<int> in(n);
    for (unsigned i = 0; i < n; ++i) in[i] = int(splitmix(i) % 100);
    pair_fixture f(in, 5);
    any_array &g = f.g, &s = f.s;
    gpudyn_ggarray_view_t& gv = f.gv;
    user_push<A><<<blocks, block>>>(f.gv, f.sv, f.din, n, rounds, f.dfails, chunked);
    f.check_launch();
    std::vector<int> expect;
    for (int x : in)
        if (x < 90) expect.push_back(x);
    const uint64_t m = expect.size();
    CHECK(any_size(&g) == m);
    CHECK(any_size(&s) == m);
    std::vector<int> og(m), os(m), e2 = expect;
    CHECK_OK(any_to_host(&g, og.data(), m * 4));
    CHECK_OK(any_to_host(&s, os.data(), m * 4));
    if (!same_multiset(og.data(), expect.data(), m, 4) || !same_multiset(os.data(), e2.data(), m, 4)) {
        fprintf(stderr, "C: algo %d block %ux%ux%u chunked %d: multiset differs\n", algo_id, block.x, block.y, block.z,
                int(chunked));
        ++gpudyn_test_failures;
    }
    // at() and spans against flatten (same order: LFVector after LFVector)
    std::vector<int> flat(m), viaat(m), viaspan(m);
    CHECK_OK(any_to_host(&g, flat.data(), m * 4));
    int* dout = nullptr;
    cudaMalloc(&dout, m * 4);
    CHECK_OK(gpudyn_ggarray_get_view(g.g, &gv, NULL));
    read_at<<<64, 128>>>(gv, dout, m);
    cudaMemcpy(viaat.data(), dout, m * 4, cudaMemcpyDeviceToHost);
    read_spans<<<16, 96>>>(gv, dout, (m + 15) / 16);
    cudaMemcpy(viaspan.data(), dout, m * 4, cudaMemcpyDeviceToHost);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(memcmp(flat.data(), viaat.data(), m * 4) == 0);
    CHECK(memcmp(flat.data(), viaspan.data(), m * 4) == 0);
    cudaFree(dout);
}

// ---- E: chunk order ----
template <gpudyn::insert_algo A, int Items>
__global__ void __launch_bounds__(1024)
    chunk_in_order(gpudyn_ggarray_view_t gv, gpudyn_static_array_view_t sv, const int* in, unsigned n, int* fails) {
    __shared__ gpudyn::push_storage<gpudyn::kMaxBlockThreads, A> t;
    gpudyn::ggarray_ref<int> g{gv};
    gpudyn::static_array_ref<int> s{sv};
    const below90 src{in};
    if (!g.push_back_chunk_to<Items>(0, t, n, src)) atomicAdd(fails, 1);
    if (!s.push_back_chunk<Items>(t, n, src)) atomicAdd(fails, 1);
}

// n = 100003: many tiles a warp (counted, then stored); n <= threads x Items:
// one tile a warp (read once); odd n leaves the last tile (and warp) partial.
template <gpudyn::insert_algo A, int Items>
static void test_chunk_order(dim3 block, unsigned n = 100003) {
    std::vector<int> in(n), expect;
    for (unsigned i = 0; i < n; ++i) in[i] = int(splitmix(i + 77) % 100);
    for (int x : in)
        if (x < 90) expect.push_back(x);
    pair_fixture f(in, 1);
    any_array &g = f.g, &s = f.s;
    chunk_in_order<A, Items><<<1, block>>>(f.gv, f.sv, f.din, n, f.dfails);
    f.check_launch();
    const uint64_t m = expect.size();
    CHECK(any_size(&g) == m);
    CHECK(any_size(&s) == m);
    std::vector<int> og(m), os(m);
    CHECK_OK(any_to_host(&g, og.data(), m * 4));
    CHECK_OK(any_to_host(&s, os.data(), m * 4));
    if (A == gpudyn::insert_algo::atomic) { // order inside a tile is arbitrary: compare as multisets
        std::sort(og.begin(), og.end());
        std::sort(os.begin(), os.end());
        std::sort(expect.begin(), expect.end());
    }
    if (og != expect || os != expect) {
        fprintf(stderr, "E: algo %d items %d block %ux%ux%u: order differs (ggarray %d, static %d)\n", int(A), Items,
                block.x, block.y, block.z, int(og != expect), int(os != expect));
        ++gpudyn_test_failures;
    }
}

// ---- D: growth ----
__global__ void iota(unsigned* p, unsigned long long n, unsigned long long start) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = unsigned(start + i);
}
// Marks each value in a bitmap; counts values out of range and repeats.
__global__ void mark(const unsigned* v, unsigned long long n, unsigned* bits, unsigned long long* bad) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned x = v[i];
        if (x >= n) {
            atomicAdd(bad, 1ull);
            continue;
        }
        const unsigned bit = 1u << (x & 31);
        if (atomicOr(&bits[x >> 5], bit) & bit) atomicAdd(bad, 1ull);
    }
}

static void test_growth(array_kind kind, gpudyn_insert_algo_t algo) {
    const uint64_t start = 1000000, doublings = 10, final_n = start << doublings;
    any_array a;
    CHECK_OK(any_create(&a, kind, 4, kind == KIND_STATIC ? final_n : 0, 512, 1024));
    unsigned* vals = nullptr;
    CHECK(cudaMalloc(&vals, (final_n / 2) * 4) == cudaSuccess);
    uint64_t n = 0;
    for (uint64_t step = 0; step <= doublings; ++step) {
        const uint64_t add = step == 0 ? start : n; // 1e6, then double
        CHECK_OK(any_reserve(&a, n + add));
        iota<<<1024, 256>>>(vals, add, n);
        CHECK_OK(any_push(&a, vals, add, NULL, algo));
        n += add;
        if (any_size(&a) != n) {
            fprintf(stderr, "D: %s algo %d: size %llu after step %llu, expected %llu\n", kind_name[kind], int(algo),
                    (unsigned long long)any_size(&a), (unsigned long long)step, (unsigned long long)n);
            ++gpudyn_test_failures;
            break;
        }
    }
    cudaFree(vals);
    CHECK(n == final_n);
    unsigned* flat = nullptr;
    unsigned* bits = nullptr;
    unsigned long long* bad = nullptr;
    CHECK(cudaMalloc(&flat, n * 4) == cudaSuccess);
    CHECK(cudaMalloc(&bits, (n / 32 + 1) * 4) == cudaSuccess);
    CHECK(cudaMalloc(&bad, 8) == cudaSuccess);
    cudaMemset(bits, 0, (n / 32 + 1) * 4);
    cudaMemset(bad, 0, 8);
    CHECK_OK(any_flatten(&a, flat, n * 4));
    mark<<<2048, 256>>>(flat, n, bits, bad);
    unsigned long long nbad = ~0ull;
    cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost);
    if (nbad != 0) {
        fprintf(stderr, "D: %s algo %d: %llu value(s) repeated or out of range\n", kind_name[kind], int(algo), nbad);
        ++gpudyn_test_failures;
    }
    if (kind == KIND_GGARRAY) {
        uint64_t bytes = 0, cap = 0;
        CHECK_OK(gpudyn_ggarray_allocated_bytes(a.g, &bytes, NULL));
        CHECK_OK(gpudyn_ggarray_capacity(a.g, &cap, NULL));
        const uint64_t first_buckets = 512ull * 1024 * 4;
        // bytes >= capacity: a pool slice whose bucket push_back had taken from the heap stays mapped
        CHECK(cap >= n && cap * 4 <= bytes);
        if (bytes > 2 * n * 4 + first_buckets) {
            fprintf(stderr, "D: GGArray allocated %llu bytes for %llu bytes of elements (> 2x + first buckets)\n",
                    (unsigned long long)bytes, (unsigned long long)(n * 4));
            ++gpudyn_test_failures;
        }
    }
    cudaFree(flat);
    cudaFree(bits);
    cudaFree(bad);
    any_destroy(&a);
}

static void test_vmm_and_static_overflow(void) {
    // static: beyond capacity fails whole; VMM: same until reserve maps more, pointer unchanged
    const uint64_t cap = 1000;
    std::vector<unsigned> in(1500);
    for (unsigned i = 0; i < 1500; ++i) in[i] = i;
    void* d = to_device(in.data(), in.size() * 4);
    any_array s, v;
    CHECK_OK(any_create(&s, KIND_STATIC, 4, cap, 0, 0));
    CHECK_OK(any_push(&s, d, 600, NULL, GPUDYN_INSERT_WARP_SCAN));
    CHECK_STATUS(any_push(&s, d, 600, NULL, GPUDYN_INSERT_WARP_SCAN), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(any_size(&s) == 600);
    std::vector<unsigned> out(600);
    CHECK_OK(any_to_host(&s, out.data(), 600 * 4));
    CHECK(memcmp(out.data(), in.data(), 600 * 4) == 0 || same_multiset(out.data(), in.data(), 600, 4));
    CHECK_OK(any_push(&s, d, 400, NULL, GPUDYN_INSERT_TENSOR_SCAN));
    CHECK(any_size(&s) == 1000);

    CHECK_OK(any_create(&v, KIND_VMM, 4, 1, 0, 0));
    uint64_t vcap = 0;
    CHECK_OK(gpudyn_vmm_array_capacity(v.v, &vcap));
    void* p0 = nullptr;
    void* p1 = nullptr;
    CHECK_OK(gpudyn_vmm_array_data(v.v, &p0));
    const uint64_t big = vcap + 1; // one more than mapped
    std::vector<unsigned> many(big);
    for (uint64_t i = 0; i < big; ++i) many[i] = unsigned(i);
    void* dm = to_device(many.data(), big * 4);
    CHECK_STATUS(any_push(&v, dm, big, NULL, GPUDYN_INSERT_ATOMIC), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(any_size(&v) == 0);
    CHECK_OK(gpudyn_vmm_array_reserve(v.v, big, NULL));
    CHECK_OK(gpudyn_vmm_array_data(v.v, &p1));
    CHECK(p0 == p1);
    CHECK_OK(any_push(&v, dm, big, NULL, GPUDYN_INSERT_ATOMIC));
    CHECK(any_size(&v) == big);
    std::vector<unsigned> vout(big);
    CHECK_OK(any_to_host(&v, vout.data(), big * 4));
    CHECK(same_multiset(vout.data(), many.data(), big, 4));
    gpudyn_device_free(dm, NULL);
    gpudyn_device_free(d, NULL);
    any_destroy(&s);
    any_destroy(&v);
}

// ---- F: runs of push_back(values, n) ----
// Thread t pushes n(t) = hash(t) % 38 values tag(t, j), j < n(t); some threads
// leave first.  Values: t in the high half, j in the low one.
__host__ __device__ inline unsigned run_length(unsigned t) { return (t * 2654435761u >> 7) % 38u; }
template <class T, class Ref, class View>
__global__ void push_runs(View view, unsigned threads, int* fails) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= threads || t % 7 == 5) return;
    const unsigned n = run_length(t);
    constexpr unsigned kHalf = 4u * unsigned(sizeof(T));
    T v[40];
    for (unsigned j = 0; j < n; ++j) v[j] = T((static_cast<unsigned long long>(t) << kHalf) | j);
    if (!Ref{view}.push_back(v, n)) atomicAdd(fails, 1);
}
template <class T>
static bool runs_ok(const std::vector<T>& out, unsigned threads, const char* what) {
    constexpr unsigned kHalf = 4u * unsigned(sizeof(T));
    const unsigned long long low = (1ull << kHalf) - 1ull;
    std::vector<unsigned char> seen(threads, 0);
    size_t i = 0, expect = 0;
    for (unsigned t = 0; t < threads; ++t)
        if (t % 7 != 5) expect += run_length(t);
    bool ok = out.size() == expect;
    while (ok && i < out.size()) { // a run starts with j = 0 and counts up
        const unsigned long long w = static_cast<unsigned long long>(out[i]);
        const unsigned t = unsigned(w >> kHalf);
        if ((w & low) != 0 || t >= threads || seen[t] || t % 7 == 5) ok = false;
        else {
            seen[t] = 1;
            const unsigned n = run_length(t);
            for (unsigned j = 0; ok && j < n; ++j)
                ok = i + j < out.size() &&
                     static_cast<unsigned long long>(out[i + j]) == ((static_cast<unsigned long long>(t) << kHalf) | j);
            i += n;
        }
    }
    if (!ok) fprintf(stderr, "F: %s: a thread's run is not contiguous and in order (or a run is missing)\n", what);
    return ok;
}
template <class T>
static void test_runs(void) {
    const unsigned threads = 40000, block = 128, blocks = (threads + block - 1) / block;
    int* dfails = (int*)to_device("\0\0\0\0", 4);
    any_array g, s;
    CHECK_OK(any_create(&g, KIND_GGARRAY, sizeof(T), 0, 5, 32));
    CHECK_OK(any_create(&s, KIND_STATIC, sizeof(T), 40ull * threads, 0, 0));
    gpudyn_ggarray_view_t gv;
    gpudyn_static_array_view_t sv;
    CHECK_OK(gpudyn_ggarray_get_view(g.g, &gv, NULL));
    CHECK_OK(gpudyn_static_array_get_view(s.s, &sv));
    push_runs<T, gpudyn::ggarray_ref<T>><<<blocks, block>>>(gv, threads, dfails);
    push_runs<T, gpudyn::static_array_ref<T>><<<blocks, block>>>(sv, threads, dfails);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    int fails = -1;
    cudaMemcpy(&fails, dfails, 4, cudaMemcpyDeviceToHost);
    CHECK(fails == 0);
    for (any_array* a : {&g, &s}) {
        std::vector<T> out(any_size(a));
        CHECK_OK(any_to_host(a, out.data(), out.size() * sizeof(T)));
        if (!runs_ok(out, threads, a == &g ? "ggarray" : "static")) ++gpudyn_test_failures;
    }
    any_destroy(&g);
    any_destroy(&s);
    cudaFree(dfails);
}

int main(void) {
    REQUIRE_DEVICE();
    for (int k = 0; k < 3; ++k)
        for (gpudyn_insert_algo_t algo : kAlgos)
            for (uint32_t es : kSizes) test_multiset(array_kind(k), algo, es, 512, 1024);
    for (gpudyn_insert_algo_t algo : kAlgos) test_multiset(KIND_GGARRAY, algo, 4, 7, 32); // small buckets, odd count
    printf("A done (%d failures)\n", gpudyn_test_failures);
    test_vmm_and_static_overflow();
    printf("overflow done (%d failures)\n", gpudyn_test_failures);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::atomic>(dim3(100), 0, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::warp_scan>(dim3(100), 1, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::tensor_scan>(dim3(100), 2, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::atomic>(dim3(8, 4, 3), 0, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::warp_scan>(dim3(8, 4, 3), 1, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::tensor_scan>(dim3(8, 4, 3), 2, chunked);
    for (bool chunked : {false, true}) test_user_kernel<gpudyn::insert_algo::tensor_scan>(dim3(1024), 2, chunked);
    printf("C done (%d failures)\n", gpudyn_test_failures);
    for (dim3 b : {dim3(100), dim3(8, 4, 3), dim3(1024)}) {
        test_chunk_order<gpudyn::insert_algo::warp_scan, 8>(b);
        test_chunk_order<gpudyn::insert_algo::warp_scan, 3>(b);
        test_chunk_order<gpudyn::insert_algo::tensor_scan, 8>(b);
        test_chunk_order<gpudyn::insert_algo::tensor_scan, 3>(b);
        const unsigned tile = b.x * b.y * b.z * 8; // one tile a warp, full and partial
        for (unsigned n : {tile, tile - 37, 31u}) {
            test_chunk_order<gpudyn::insert_algo::warp_scan, 8>(b, n);
            test_chunk_order<gpudyn::insert_algo::atomic, 8>(b, n);
        }
    }
    printf("E done (%d failures)\n", gpudyn_test_failures);
    test_runs<unsigned>();
    test_runs<unsigned long long>();
    test_runs<double>();
    printf("F done (%d failures)\n", gpudyn_test_failures);
    if (!getenv("GPUDYN_SANITIZER")) { // under compute-sanitizer (tests/run.sh) the 4 GB growth is left out
        for (gpudyn_insert_algo_t algo : kAlgos) test_growth(KIND_GGARRAY, algo);
        test_growth(KIND_STATIC, GPUDYN_INSERT_WARP_SCAN);
        test_growth(KIND_VMM, GPUDYN_INSERT_WARP_SCAN);
        printf("D done (%d failures)\n", gpudyn_test_failures);
    }
    return TEST_RESULT();
}
