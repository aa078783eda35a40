// vmm_probe: where the time of growing by host-side VMM mapping goes.
// Times (host wall clock, median of kReps, fresh range each) of making memory
// usable: cuMemCreate / cuMemMap / cuMemSetAccess separately, 2 GiB split into
// several handles (sequential and from parallel host threads), and power-of-two
// vs VMM-array-like sizes at aligned and unaligned virtual addresses.  Prints
// one JSON object.
// Build: nvcc -O2 -std=c++17 vmm_probe.cu -lcuda -o vmm_probe
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CU(x)                                                              \
    do {                                                                   \
        CUresult r_ = (x);                                                 \
        if (r_ != CUDA_SUCCESS) {                                          \
            const char* n_;                                                \
            cuGetErrorName(r_, &n_);                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, n_); \
            exit(2);                                                       \
        }                                                                  \
    } while (0)

constexpr size_t kGiB = 1ull << 30;
constexpr size_t kBytes = 2 * kGiB;
constexpr int kReps = 9;

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static CUmemAllocationProp prop() {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

struct parts_result {
    double create, map, access, total;
};

// Makes `bytes` usable in `parts` handles at `offset` into a range aligned to
// `align`; `threads`: one host thread per part.
static parts_result run(int parts, bool threads, size_t align, size_t bytes = kBytes, size_t offset = 0) {
    CUdeviceptr range = 0;
    const size_t reserve = 2 * kBytes + offset + align;
    CU(cuMemAddressReserve(&range, reserve, align, 0, 0));
    const CUdeviceptr base = range + offset;
    const size_t each = bytes / parts;
    std::vector<CUmemGenericAllocationHandle> h(parts);
    CUmemAllocationProp p = prop();
    CUmemAccessDesc acc{};
    acc.location = p.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    parts_result r{};
    CU(cuCtxSynchronize());
    auto t0 = clk::now();
    if (threads) {
        CUcontext ctx;
        CU(cuCtxGetCurrent(&ctx));
        std::vector<std::thread> th;
        for (int i = 0; i < parts; ++i)
            th.emplace_back([&, i] {
                CU(cuCtxSetCurrent(ctx));
                CU(cuMemCreate(&h[i], each, &p, 0));
                CU(cuMemMap(base + i * each, each, 0, h[i], 0));
                CU(cuMemSetAccess(base + i * each, each, &acc, 1));
            });
        for (auto& t : th) t.join();
        r.total = ms_since(t0);
    } else {
        for (int i = 0; i < parts; ++i) CU(cuMemCreate(&h[i], each, &p, 0));
        r.create = ms_since(t0);
        auto t1 = clk::now();
        for (int i = 0; i < parts; ++i) CU(cuMemMap(base + i * each, each, 0, h[i], 0));
        r.map = ms_since(t1);
        auto t2 = clk::now();
        CU(cuMemSetAccess(base, each * parts, &acc, 1));
        r.access = ms_since(t2);
        r.total = ms_since(t0);
    }
    CU(cuMemUnmap(base, each * parts));
    for (auto x : h) CU(cuMemRelease(x));
    CU(cuMemAddressFree(range, reserve));
    return r;
}

int main() {
    CU(cuInit(0));
    CUdevice d;
    CU(cuDeviceGet(&d, 0));
    CUcontext ctx;
    CU(cuDevicePrimaryCtxRetain(&ctx, d));
    CU(cuCtxSetCurrent(ctx));
    CUmemAllocationProp p = prop();
    size_t gmin = 0, grec = 0;
    CU(cuMemGetAllocationGranularity(&gmin, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CU(cuMemGetAllocationGranularity(&grec, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    printf("{\"bytes\": %zu, \"granularity_min\": %zu, \"granularity_recommended\": %zu", kBytes, gmin, grec);
    struct cfg {
        const char* name;
        int parts;
        bool threads;
        size_t align, bytes, offset;
    };
    const size_t vmm_like = 2048000000ull / gmin * gmin; // the VMM array's last doubling of int32
    const cfg cfgs[] = {{"one_handle", 1, false, 0, kBytes, 0},
                        {"four_handles", 4, false, 0, kBytes, 0},
                        {"four_handles_threads", 4, true, 0, kBytes, 0},
                        {"pow2_aligned", 1, false, kBytes, kBytes, 0},
                        {"pow2_offset_2m_1023", 1, false, kBytes, kBytes, gmin * 1023},
                        {"vmm_like_aligned", 1, false, kBytes, vmm_like, 0},
                        {"vmm_like_offset", 1, false, kBytes, vmm_like, 2048000000ull / gmin * gmin},
                        {"one_gib_aligned", 1, false, kBytes, kGiB, 0},
                        {"one_gib_offset_2m", 1, false, kBytes, kGiB, gmin},
                        {"pow2_aligned_again", 1, false, kBytes, kBytes, 0},
                        {"pow2_offset_again", 1, false, kBytes, kBytes, gmin * 1023}};
    run(1, false, 0); // warm-up
    for (const cfg& c : cfgs) {
        std::vector<double> cr, mp, ac, tt;
        for (int i = 0; i < kReps; ++i) {
            parts_result r = run(c.parts, c.threads, c.align, c.bytes, c.offset);
            cr.push_back(r.create);
            mp.push_back(r.map);
            ac.push_back(r.access);
            tt.push_back(r.total);
        }
        printf(
            ",\n \"%s\": {\"bytes\": %zu, \"create_ms\": %.4f, \"map_ms\": %.4f, \"access_ms\": %.4f, \"total_ms\": %.4f}",
            c.name, c.bytes, median(cr), median(mp), median(ac), median(tt));
    }
    printf("}\n");
    return 0;
}
