// gpudyn_bench_apps --out FILE.json --graph GRAPH.bin [--quick] [--check-every N]
//
// Breadth-first search in CUDA C++ (issue 40, item 4a): the C++ half of
// `gpudyn bench apps` (python/gpudyn/bench/apps.py generates the Graph500
// Kronecker graph, draws the search keys, computes the host reference levels,
// writes them to GRAPH.bin and runs this program on them, so both languages
// search the same graph and are checked against the same reference).
//
// GRAPH.bin (little endian): "GDBFS001", u64 n, u64 nnz, u64 k; int64 row[n+1];
// int32 col[nnz] (undirected CSR, no self-loops or duplicates, rows sorted);
// int32 keys[k]; int32 reference levels[k][n] (-1: unreached).
//
// Every BFS is level-synchronous and top-down, one kernel shape (expand) for
// three frontier stores, each with a thread per frontier vertex (thread) and a
// warp per frontier vertex (warp):
//   gpudyn       next frontier pushed with ggarray_ref<int>::push_back into a
//                GGArray (default options); the next level's kernel reads the
//                frontier in place (ranged_size, at; grid-stride, the host never
//                reads the count); per level the host calls get_view on the
//                consumed array (stream-ordered: its ranges kernel) and clear
//                after the kernel; a device word (atomicMax of the deepest level
//                claimed) is read every --check-every levels to stop;
//   worst        an n-vertex int32 buffer per frontier and one counter, lanes
//                that emit together aggregated into one atomicAdd; the counter
//                read every --check-every levels;
//   worst_plain  the same with one atomicAdd per vertex;
//   two_pass     count kernel (claims, counts per frontier vertex),
//                cub::DeviceScan::InclusiveSum, the total to the host, an exact
//                output, write kernel; every buffer from cudaMallocAsync on the
//                default pool (its memory kept between levels: what a CUB user
//                does).
// Timed with CUDA events around a whole search (parent/level reset included),
// one warm-up search per variant, then one search per key (the JSON has each).
// Every search is validated on the device against the reference levels (equal
// levels) and the Graph500 rules on the parent tree (root its own parent at
// level 0; each tree edge in the graph; level(v) = level(parent) + 1; every edge
// spans at most one level or has both ends unreached); a failure is recorded
// in the JSON ("validated": false, "failures") and on stderr, and the program
// still exits 0 once the JSON is written (the driver fails the run's
// "every BFS validated" target; an exit status would lose the details).
// Memory held beyond the graph and parent/level: gpudyn: its two arrays'
// allocated_bytes plus 1 KiB per LFVector (a bound on the bookkeeping), with
// the cudaMemGetInfo deltas (after create, after the searches) beside; worst: its buffers;
// two_pass: the largest over levels of frontier + counts + offsets + output +
// scan temporary storage.
// Runtime at scale 22 on an H200: reading the file ~1 s, each variant ~0.2 s.
#include <gpudyn/ggarray.cuh>

#include <cub/cub.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_check.hpp" // CUDA(), GD()

using u64 = unsigned long long;

namespace {

// ---- configuration (defaults in one place; the Python driver has the same) --------
constexpr unsigned kBlock = 256; // threads a block, every kernel
constexpr unsigned kWarp = 32;
// Grid of the grid-stride kernels: blocks of 256 threads per SM filling the 2048
// resident threads of an sm_80/sm_90 SM (more blocks only queue).
constexpr unsigned kBlocksPerSm = 8;
constexpr int kCheckEvery = 4;          // levels between host reads of the stop word
constexpr u64 kDefaultLfvectors = 512;  // a default GGArray's num_lfvectors (the frontiers use the defaults)
constexpr u64 kBookkeepingBound = 1024; // bytes per LFVector bounding a GGArray's bookkeeping (~520)
constexpr char kMagic[8] = {'G', 'D', 'B', 'F', 'S', '0', '0', '1'};

int g_sms = 0;
int g_done = 0, g_total = 1;
std::vector<std::string> g_failures;

void progress(const std::string& label) { fprintf(stderr, "progress %d %d %s\n", ++g_done, g_total, label.c_str()); }

// ---- frontier sources and sinks ----------------------------------------------------
// A source gives the count (one thread of each block reads it) and item i; a sink
// takes one vertex (false: refused).
struct gg_source {
    gpudyn_ggarray_view_t view;
    __device__ u64 count() const { return gpudyn::ggarray_ref<int>{view}.ranged_size(); }
    __device__ int item(u64 i) const { return gpudyn::ggarray_ref<int>{view}.at(i); }
};
struct gg_sink {
    gpudyn_ggarray_view_t view;
    __device__ bool push(int v) const { return gpudyn::ggarray_ref<int>{view}.push_back(v); }
};
struct buf_source {
    const int* buf;
    const unsigned* n;
    __device__ u64 count() const { return *n; }
    __device__ int item(u64 i) const { return buf[i]; }
};
struct buf_sink_plain {
    int* buf;
    unsigned* n;
    __device__ bool push(int v) const {
        buf[atomicAdd(n, 1u)] = v;
        return true;
    }
};
struct buf_sink_aggregated {
    int* buf;
    unsigned* n;
    // The lanes emitting together take one range with their leader's atomicAdd.
    __device__ bool push(int v) const {
        const unsigned mask = __activemask();
        const unsigned lane = threadIdx.x % kWarp;
        const unsigned rank = __popc(mask & ((1u << lane) - 1u));
        const int leader = __ffs(mask) - 1;
        unsigned base = 0;
        if (rank == 0) base = atomicAdd(n, unsigned(__popc(mask)));
        base = __shfl_sync(mask, base, leader);
        buf[base + rank] = v;
        return true;
    }
};

// ---- one level ---------------------------------------------------------------------
// Each frontier item claims its unvisited neighbours (CAS on parent) and pushes
// them.  active (nullptr: unused) is raised to depth + 1 by every warp that
// claimed a vertex.  Grid-stride: every lane reaches the vote at the end.
template <bool Warp, class Src, class Sink>
__global__ void __launch_bounds__(kBlock) expand(Src src, Sink sink, const long long* row, const int* col, int* parent,
                                                 int* level, int depth, int* active, unsigned* failed) {
    __shared__ u64 total;
    if (threadIdx.x == 0) total = src.count();
    __syncthreads();
    const u64 n = total;
    bool claimed = false;
    const u64 lane = Warp ? threadIdx.x % kWarp : 0;
    const u64 step = Warp ? kWarp : 1;
    const u64 stride = u64(gridDim.x) * blockDim.x / step;
    for (u64 i = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / step; i < n; i += stride) {
        const int u = src.item(i);
        const long long end = row[u + 1];
        for (long long e = row[u] + lane; e < end; e += step) {
            const int v = col[e];
            if (parent[v] == -1 && atomicCAS(parent + v, -1, u) == -1) {
                level[v] = depth + 1;
                claimed = true;
                if (!sink.push(v)) atomicAdd(failed, 1u);
            }
        }
    }
    if (active != nullptr && __any_sync(0xffffffffu, claimed) && threadIdx.x % kWarp == 0) atomicMax(active, depth + 1);
}

// ---- two-pass ----------------------------------------------------------------------
template <bool Warp>
__global__ void __launch_bounds__(kBlock) count_pass(const int* front, u64 n, const long long* row, const int* col,
                                                     int* parent, int* level, int depth, unsigned* counts) {
    const unsigned lane = Warp ? threadIdx.x % kWarp : 0;
    const u64 step = Warp ? kWarp : 1;
    const u64 stride = u64(gridDim.x) * blockDim.x / step;
    for (u64 i = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / step; i < n; i += stride) {
        const int u = front[i];
        unsigned c = 0;
        const long long end = row[u + 1];
        for (long long e = row[u] + lane; e < end; e += step) {
            const int v = col[e];
            if (parent[v] == -1 && atomicCAS(parent + v, -1, u) == -1) {
                level[v] = depth + 1;
                ++c;
            }
        }
        if (Warp) {
            for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
            if (lane == 0) counts[i] = c;
        } else {
            counts[i] = c;
        }
    }
}
// The CSR has no duplicates: v is written once, by the u that claimed it.
template <bool Warp>
__global__ void __launch_bounds__(kBlock)
    write_pass(const int* front, u64 n, const unsigned* ends, const unsigned* counts, const long long* row,
               const int* col, const int* parent, int* out) {
    const unsigned lane = threadIdx.x % kWarp;
    const u64 step = Warp ? kWarp : 1;
    const u64 stride = u64(gridDim.x) * blockDim.x / step;
    for (u64 i = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / step; i < n; i += stride) {
        const int u = front[i];
        unsigned o = ends[i] - counts[i];
        const long long end = row[u + 1];
        if (Warp) {
            for (long long e0 = row[u]; e0 < end; e0 += kWarp) { // the same trip count in every lane
                const long long e = e0 + lane;
                const int v = e < end ? col[e] : 0;
                const bool mine = e < end && parent[v] == u;
                const unsigned b = __ballot_sync(0xffffffffu, mine);
                if (mine) out[o + __popc(b & ((1u << lane) - 1u))] = v;
                o += __popc(b);
            }
        } else {
            for (long long e = row[u]; e < end; ++e)
                if (parent[col[e]] == u) out[o++] = col[e];
        }
    }
}

// ---- validation on the device --------------------------------------------------------
struct check_counts {
    unsigned long long levels_differ, parent_out_of_range, tree_edge_missing, tree_level, edge_span;
};
__global__ void __launch_bounds__(kBlock)
    validate_kernel(const long long* row, const int* col, const int* parent, const int* level, const int* ref, u64 n,
                    int root, check_counts* out) {
    for (u64 v = blockIdx.x * u64(blockDim.x) + threadIdx.x; v < n; v += u64(gridDim.x) * blockDim.x) {
        const int lv = level[v];
        if (lv != ref[v]) atomicAdd(&out->levels_differ, 1ull);
        const int p = parent[v];
        if (lv < 0) {
            if (p != -1) atomicAdd(&out->parent_out_of_range, 1ull);
        } else if (int(v) != root) {
            if (p < 0 || u64(p) >= n) {
                atomicAdd(&out->parent_out_of_range, 1ull);
            } else {
                if (level[p] + 1 != lv) atomicAdd(&out->tree_level, 1ull);
                long long lo = row[p], hi = row[p + 1]; // v among p's sorted neighbours
                while (lo < hi) {
                    const long long mid = (lo + hi) / 2;
                    if (col[mid] < int(v)) lo = mid + 1;
                    else hi = mid;
                }
                if (lo >= row[p + 1] || col[lo] != int(v)) atomicAdd(&out->tree_edge_missing, 1ull);
            }
        }
        for (long long e = row[v]; e < row[v + 1]; ++e) {
            const int lw = level[col[e]];
            if ((lv < 0) != (lw < 0) || (lv >= 0 && (lv - lw > 1 || lw - lv > 1))) atomicAdd(&out->edge_span, 1ull);
        }
    }
}

// ---- the graph and the BFS state -------------------------------------------------------
struct graph {
    u64 n = 0, nnz = 0;
    long long* row = nullptr;
    int* col = nullptr;
    int* parent = nullptr;
    int* level = nullptr;
    std::vector<int> keys;
    int* ref = nullptr; // k x n reference levels
};

void reset(const graph& g, int root) {
    CUDA(cudaMemsetAsync(g.parent, 0xff, g.n * sizeof(int)));
    CUDA(cudaMemsetAsync(g.level, 0xff, g.n * sizeof(int)));
    const int zero = 0;
    CUDA(cudaMemcpyAsync(g.parent + root, &root, sizeof(int), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpyAsync(g.level + root, &zero, sizeof(int), cudaMemcpyHostToDevice));
}

unsigned full_grid() { return unsigned(g_sms) * kBlocksPerSm; }
unsigned grid_for(u64 items, u64 per_item) {
    const u64 b = (items * per_item + kBlock - 1) / kBlock;
    return unsigned(std::max<u64>(1, std::min<u64>(b, full_grid())));
}

template <class T>
T read_scalar(const T* p) {
    T x;
    CUDA(cudaMemcpy(&x, p, sizeof(T), cudaMemcpyDeviceToHost)); // the host waits here
    return x;
}

u64 free_device_bytes() {
    CUDA(cudaDeviceSynchronize());
    int dev = 0;
    CUDA(cudaGetDevice(&dev));
    cudaMemPool_t pool;
    CUDA(cudaDeviceGetDefaultMemPool(&pool, dev));
    CUDA(cudaMemPoolTrimTo(pool, 0));
    size_t free_b = 0, total = 0;
    CUDA(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

// Per-variant tallies.
struct tally {
    u64 host_reads = 0, levels = 0;
    void zero() { host_reads = levels = 0; }
};

// ---- variants ----------------------------------------------------------------------------
__global__ void seed_frontier(gpudyn_ggarray_view_t v, int root) { gpudyn::ggarray_ref<int>{v}.push_back(root); }

struct gg_bfs {
    const graph& g;
    bool warp;
    int check_every;
    gpudyn_ggarray_t a[2] = {nullptr, nullptr};
    gpudyn_ggarray_view_t view[2];
    int* active = nullptr;
    unsigned* failed = nullptr;
    tally t;
    gg_bfs(const graph& g_, bool w, int every) : g(g_), warp(w), check_every(every) {
        CUDA(cudaMalloc(&active, sizeof(int)));
        CUDA(cudaMalloc(&failed, sizeof(unsigned)));
        CUDA(cudaMemset(failed, 0, sizeof(unsigned)));
    }
    void open() {
        for (int i = 0; i < 2; ++i) {
            gpudyn_ggarray_options_t o;
            GD(gpudyn_ggarray_options_init(&o));
            o.element_size = sizeof(int);
            GD(gpudyn_ggarray_create(&a[i], &o, nullptr));
            GD(gpudyn_ggarray_get_view(a[i], &view[i], nullptr));
        }
    }
    ~gg_bfs() {
        for (auto* x : a) gpudyn_ggarray_destroy(x);
        cudaFree(active);
        cudaFree(failed);
    }
    template <bool W>
    void level(int cur, int depth) {
        expand<W><<<full_grid(), kBlock>>>(gg_source{view[cur]}, gg_sink{view[1 - cur]}, g.row, g.col, g.parent,
                                           g.level, depth, active, failed);
    }
    void search(int root) {
        reset(g, root);
        CUDA(cudaMemsetAsync(active, 0, sizeof(int)));
        for (auto* x : a) GD(gpudyn_ggarray_clear(x, nullptr));
        seed_frontier<<<1, 1>>>(view[0], root);
        CUDA(cudaGetLastError());
        for (int cur = 0, depth = 0;; cur = 1 - cur) {
            GD(gpudyn_ggarray_get_view(a[cur], &view[cur], nullptr)); // ranges for at(): stream-ordered
            if (warp) level<true>(cur, depth);
            else level<false>(cur, depth);
            CUDA(cudaGetLastError());
            GD(gpudyn_ggarray_clear(a[cur], nullptr));
            ++depth, ++t.levels;
            if (depth % check_every == 0) {
                ++t.host_reads;
                if (read_scalar(active) < depth) break;
            }
        }
    }
};

struct worst_bfs {
    const graph& g;
    bool warp, plain;
    int check_every;
    int* buf[2] = {nullptr, nullptr};
    unsigned* cnt = nullptr; // two counters
    tally t;
    worst_bfs(const graph& g_, bool w, bool p, int every) : g(g_), warp(w), plain(p), check_every(every) {
        for (auto& b : buf) CUDA(cudaMalloc(&b, g.n * sizeof(int)));
        CUDA(cudaMalloc(&cnt, 2 * sizeof(unsigned)));
    }
    ~worst_bfs() {
        for (auto* b : buf) cudaFree(b);
        cudaFree(cnt);
    }
    u64 held_bytes() const { return 2 * g.n * sizeof(int) + 2 * sizeof(unsigned); }
    template <bool W, class Sink>
    void level(int cur, int depth) {
        expand<W><<<full_grid(), kBlock>>>(buf_source{buf[cur], cnt + cur}, Sink{buf[1 - cur], cnt + 1 - cur}, g.row,
                                           g.col, g.parent, g.level, depth, nullptr, nullptr);
    }
    void search(int root) {
        reset(g, root);
        const unsigned one[2] = {1u, 0u};
        CUDA(cudaMemcpyAsync(buf[0], &root, sizeof(int), cudaMemcpyHostToDevice));
        CUDA(cudaMemcpyAsync(cnt, one, sizeof(one), cudaMemcpyHostToDevice));
        for (int cur = 0, depth = 0;; cur = 1 - cur) {
            if (warp) plain ? level<true, buf_sink_plain>(cur, depth) : level<true, buf_sink_aggregated>(cur, depth);
            else plain ? level<false, buf_sink_plain>(cur, depth) : level<false, buf_sink_aggregated>(cur, depth);
            CUDA(cudaGetLastError());
            ++depth, ++t.levels;
            if (depth % check_every == 0) {
                ++t.host_reads;
                if (read_scalar(cnt + 1 - cur) == 0) break;
            }
            CUDA(cudaMemsetAsync(cnt + cur, 0, sizeof(unsigned))); // after the launch that read it
        }
    }
};

struct two_pass_bfs {
    const graph& g;
    bool warp;
    u64 peak = 0;
    tally t;
    two_pass_bfs(const graph& g_, bool w) : g(g_), warp(w) {}
    void search(int root) {
        reset(g, root);
        int* front = nullptr;
        CUDA(cudaMallocAsync(&front, sizeof(int), nullptr));
        CUDA(cudaMemcpyAsync(front, &root, sizeof(int), cudaMemcpyHostToDevice));
        const u64 per = warp ? kWarp : 1;
        for (u64 n = 1, depth = 0; n; ++depth) {
            unsigned *counts = nullptr, *ends = nullptr;
            CUDA(cudaMallocAsync(&counts, n * sizeof(unsigned), nullptr));
            CUDA(cudaMallocAsync(&ends, n * sizeof(unsigned), nullptr));
            if (warp)
                count_pass<true>
                    <<<grid_for(n, per), kBlock>>>(front, n, g.row, g.col, g.parent, g.level, int(depth), counts);
            else
                count_pass<false>
                    <<<grid_for(n, per), kBlock>>>(front, n, g.row, g.col, g.parent, g.level, int(depth), counts);
            CUDA(cudaGetLastError());
            size_t temp_bytes = 0;
            CUDA(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, counts, ends, int(n)));
            void* temp = nullptr;
            CUDA(cudaMallocAsync(&temp, temp_bytes, nullptr));
            CUDA(cub::DeviceScan::InclusiveSum(temp, temp_bytes, counts, ends, int(n)));
            const u64 total = read_scalar(ends + n - 1); // to the host, to size the output
            ++t.host_reads;
            int* out = nullptr;
            CUDA(cudaMallocAsync(&out, std::max<u64>(total, 1) * sizeof(int), nullptr));
            peak = std::max<u64>(peak, sizeof(int) * (3 * n + total) + temp_bytes);
            if (total) {
                if (warp)
                    write_pass<true><<<grid_for(n, per), kBlock>>>(front, n, ends, counts, g.row, g.col, g.parent, out);
                else
                    write_pass<false>
                        <<<grid_for(n, per), kBlock>>>(front, n, ends, counts, g.row, g.col, g.parent, out);
                CUDA(cudaGetLastError());
            }
            CUDA(cudaFreeAsync(temp, nullptr));
            CUDA(cudaFreeAsync(counts, nullptr));
            CUDA(cudaFreeAsync(ends, nullptr));
            CUDA(cudaFreeAsync(front, nullptr));
            front = out;
            n = total;
            ++t.levels;
        }
        CUDA(cudaFreeAsync(front, nullptr));
    }
};

// ---- JSON --------------------------------------------------------------------------------
std::string jnum(double v) {
    char b[64];
    snprintf(b, sizeof b, "%.6g", v);
    return b;
}
std::string jlist(const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + jnum(v[i]);
    return s + "]";
}

// One variant: warm-up, one timed search per key, each validated.
template <class V>
std::string measure(const char* name, const graph& g, V& v, const std::string& extra_before,
                    std::string (*extra_after)(V&) = nullptr) {
    v.search(g.keys[0]); // warm-up (module load, pool, buckets)
    CUDA(cudaDeviceSynchronize());
    v.t.zero();
    cudaEvent_t start, stop;
    CUDA(cudaEventCreate(&start));
    CUDA(cudaEventCreate(&stop));
    check_counts* dc = nullptr;
    CUDA(cudaMalloc(&dc, sizeof(check_counts)));
    std::vector<double> ms;
    std::string errors;
    for (size_t k = 0; k < g.keys.size(); ++k) {
        CUDA(cudaEventRecord(start));
        v.search(g.keys[k]);
        CUDA(cudaEventRecord(stop));
        CUDA(cudaEventSynchronize(stop));
        float t = 0;
        CUDA(cudaEventElapsedTime(&t, start, stop));
        ms.push_back(t);
        CUDA(cudaMemset(dc, 0, sizeof(check_counts)));
        validate_kernel<<<grid_for(g.n, 1), kBlock>>>(g.row, g.col, g.parent, g.level, g.ref + k * g.n, g.n, g.keys[k],
                                                      dc);
        CUDA(cudaGetLastError());
        check_counts c;
        CUDA(cudaMemcpy(&c, dc, sizeof(c), cudaMemcpyDeviceToHost));
        const int root = g.keys[k];
        const int proot = read_scalar(g.parent + root), lroot = read_scalar(g.level + root);
        const bool bad_root = proot != root || lroot != 0;
        if (c.levels_differ || c.parent_out_of_range || c.tree_edge_missing || c.tree_level || c.edge_span ||
            bad_root) {
            char b[256];
            snprintf(b, sizeof b,
                     "key %d: levels_differ %llu, root %d, parent_out_of_range %llu, tree_edge_missing "
                     "%llu, tree_level %llu, edge_span %llu",
                     root, c.levels_differ, int(bad_root), c.parent_out_of_range, c.tree_edge_missing, c.tree_level,
                     c.edge_span);
            if (errors.size() < 1500) errors += (errors.empty() ? "" : "; ") + std::string(b);
        }
    }
    cudaFree(dc);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (!errors.empty()) g_failures.push_back(std::string(name) + ": " + errors);
    const double keys = double(g.keys.size());
    std::string s = "{\"variant\": \"" + std::string(name) + "\", \"ms\": " + jlist(ms) +
                    ", \"host_reads_per_search\": " + jnum(v.t.host_reads / keys) +
                    ", \"levels_per_search\": " + jnum(v.t.levels / keys) +
                    ", \"validated\": " + (errors.empty() ? "true" : "false") + ", \"errors\": \"" + errors + "\"" +
                    extra_before;
    if (extra_after) s += extra_after(v);
    progress(name);
    return s + "}";
}

std::string gg_after(gg_bfs& v) {
    uint64_t alloc = 0, budget = 0, bytes = 0, mx = 0;
    uint32_t st = 0, status_any = 0;
    for (auto* a : v.a) {
        GD(gpudyn_ggarray_allocated_bytes(a, &bytes, nullptr));
        alloc += bytes;
        GD(gpudyn_ggarray_get_budget(a, &bytes, &mx));
        budget += bytes;
        GD(gpudyn_ggarray_get_status(a, &st, nullptr));
        status_any |= st;
    }
    const unsigned failed = read_scalar(v.failed);
    if (failed || status_any)
        g_failures.push_back("gpudyn: " + std::to_string(failed) + " pushes refused, status " +
                             std::to_string(status_any));
    return ", \"allocated_bytes\": " + std::to_string(alloc) + ", \"budget_bytes\": " + std::to_string(budget) +
           ", \"push_failures\": " + std::to_string(failed) + ", \"status\": " + std::to_string(status_any);
}

bool read_graph(const char* path, graph& g, std::vector<long long>& row, std::vector<int>& col, std::vector<int>& ref) {
    FILE* f = fopen(path, "rb");
    if (!f) return false;
    char magic[8];
    u64 hdr[3];
    bool ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, kMagic, 8) && fread(hdr, sizeof(u64), 3, f) == 3;
    if (ok) {
        g.n = hdr[0], g.nnz = hdr[1];
        row.resize(g.n + 1), col.resize(g.nnz), g.keys.resize(hdr[2]), ref.resize(hdr[2] * g.n);
        ok = fread(row.data(), sizeof(long long), row.size(), f) == row.size() &&
             fread(col.data(), sizeof(int), col.size(), f) == col.size() &&
             fread(g.keys.data(), sizeof(int), g.keys.size(), f) == g.keys.size() &&
             fread(ref.data(), sizeof(int), ref.size(), f) == ref.size() && !g.keys.empty() &&
             row[g.n] == (long long)g.nnz;
    }
    fclose(f);
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    const char* out = nullptr;
    const char* graph_path = nullptr;
    bool quick = false;
    int check_every = kCheckEvery;
    const char* usage = "usage: %s --out FILE.json --graph GRAPH.bin [--quick] [--check-every N]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--graph") && i + 1 < argc) graph_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--check-every") && i + 1 < argc) {
            char* end = nullptr;
            const long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "gpudyn_bench_apps: argument '--check-every' is '%s', expected a number >= 1\n",
                        argv[i]);
                return 2;
            }
            check_every = int(v);
        } else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "gpudyn_bench_apps: --out FILE.json is required\n");
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    if (!graph_path) {
        fprintf(stderr, "gpudyn_bench_apps: --graph GRAPH.bin is required (`gpudyn bench apps` writes it)\n");
        return 2;
    }
    graph g;
    std::vector<long long> row;
    std::vector<int> col, ref;
    if (!read_graph(graph_path, g, row, col, ref)) {
        fprintf(stderr, "gpudyn_bench_apps: argument '--graph' is '%s': not a readable graph file\n", graph_path);
        return 2;
    }
    int32_t devices = 0;
    if (gpudyn_get_device_count(&devices) != GPUDYN_SUCCESS || devices == 0) {
        fprintf(stderr, "gpudyn_bench_apps: no CUDA device: %s\nthis benchmark runs on a GPU; nothing was measured\n",
                gpudyn_last_error_message());
        return 77;
    }
    int dev = 0;
    CUDA(cudaGetDevice(&dev));
    CUDA(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    cudaMemPool_t pool; // the two-pass's buffers: memory kept between levels, as a CUB user would
    CUDA(cudaDeviceGetDefaultMemPool(&pool, dev));
    u64 keep = ~0ull;
    CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CUDA(cudaMalloc(&g.row, row.size() * sizeof(long long)));
    CUDA(cudaMalloc(&g.col, std::max<size_t>(col.size(), 1) * sizeof(int)));
    CUDA(cudaMalloc(&g.ref, ref.size() * sizeof(int)));
    CUDA(cudaMalloc(&g.parent, g.n * sizeof(int)));
    CUDA(cudaMalloc(&g.level, g.n * sizeof(int)));
    CUDA(cudaMemcpy(g.row, row.data(), row.size() * sizeof(long long), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(g.col, col.data(), col.size() * sizeof(int), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(g.ref, ref.data(), ref.size() * sizeof(int), cudaMemcpyHostToDevice));
    g_total = 8;

    std::vector<std::string> parts;
    for (int w = 0; w < 2; ++w) {
        const bool warp = w == 1;
        const std::string m = warp ? "warp" : "thread";
        const std::string mapping = ", \"mapping\": \"" + m + "\"";
        {
            gg_bfs v(g, warp, check_every);
            const u64 free0 = free_device_bytes();
            v.open();
            const u64 free_open = free_device_bytes();
            const std::string name = "gpudyn_" + m;
            // The arrays' device memory, read after the searches (clear keeps buckets: held = peak).
            std::string s =
                measure(name.c_str(), g, v, mapping + ", \"check_every\": " + std::to_string(check_every), &gg_after);
            const u64 free1 = free_device_bytes();
            uint64_t alloc = 0, bytes = 0;
            for (auto* a : v.a) {
                GD(gpudyn_ggarray_allocated_bytes(a, &bytes, nullptr));
                alloc += bytes;
            }
            const uint64_t delta = free0 > free1 ? free0 - free1 : 0;
            const uint64_t delta_open = free0 > free_open ? free0 - free_open : 0;
            // Counted as the baselines are (their buffers' bytes): buckets and mapped arena, plus a
            // bound on the bookkeeping; the cudaMemGetInfo deltas, recorded beside, also count what
            // the stream-ordered pool and the context take in whole chunks.
            const uint64_t held = alloc + kBookkeepingBound * kDefaultLfvectors * 2;
            s.pop_back();
            s += ", \"device_bytes_delta\": " + std::to_string(delta) +
                 ", \"device_bytes_delta_open\": " + std::to_string(delta_open) +
                 ", \"held_bytes\": " + std::to_string(held) + ", \"peak_bytes\": " + std::to_string(held) + "}";
            parts.push_back("\"" + name + "\": " + s);
        }
        for (int plain = 0; plain < 2; ++plain) {
            worst_bfs v(g, warp, plain == 1, check_every);
            const std::string name = (plain ? "worst_plain_" : "worst_") + m;
            const std::string held = std::to_string(v.held_bytes());
            parts.push_back("\"" + name + "\": " +
                            measure(name.c_str(), g, v,
                                    mapping + ", \"check_every\": " + std::to_string(check_every) +
                                        ", \"held_bytes\": " + held + ", \"peak_bytes\": " + held));
        }
        {
            two_pass_bfs v(g, warp);
            const std::string name = "two_pass_" + m;
            std::string s = measure(name.c_str(), g, v, mapping);
            s.pop_back();
            s += ", \"held_bytes\": " + std::to_string(v.peak) + ", \"peak_bytes\": " + std::to_string(v.peak) + "}";
            parts.push_back("\"" + name + "\": " + s);
        }
    }
    std::string fl = "[";
    for (size_t i = 0; i < g_failures.size(); ++i) {
        std::string e;
        for (char c : g_failures[i]) e += (c == '"' || c == '\\') ? '_' : c;
        fl += (i ? ", \"" : "\"") + e + "\"";
        fprintf(stderr, "gpudyn_bench_apps: FAILED %s\n", g_failures[i].c_str());
    }
    fl += "]";
    std::string vs = "{";
    for (size_t i = 0; i < parts.size(); ++i) vs += (i ? ", " : "") + parts[i];
    vs += "}";
    FILE* f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "gpudyn_bench_apps: cannot write %s\n", out);
        return 1;
    }
    fprintf(f,
            "{\"quick\": %s, \"n\": %llu, \"nnz\": %llu, \"keys\": %zu, \"sms\": %d, \"block\": %u, "
            "\"blocks_per_sm\": %u, \"check_every\": %d, \"validated\": %s, \"failures\": %s, \"variants\": %s}\n",
            quick ? "true" : "false", g.n, g.nnz, g.keys.size(), g_sms, kBlock, kBlocksPerSm, check_every,
            g_failures.empty() ? "true" : "false", fl.c_str(), vs.c_str());
    fclose(f);
    cudaFree(g.row);
    cudaFree(g.col);
    cudaFree(g.ref);
    cudaFree(g.parent);
    cudaFree(g.level);
    return 0;
}
