// The growth arenas of GGArrays and the per-device reserve of physical chunks
// under them (array_common.cuh explains the roles).  One host thread per
// process answers kernels that wait for memory: it maps what an arena's
// mailbox asks for while the kernel runs, gives closed arenas back once their
// stream's work is done, and releases reserve chunks that stay unused.
// Mapping while a kernel runs is what lets memory follow the output: the host
// maps nothing ahead of a launch and a kernel can still grow into what the
// device can give.  A closed arena whose work is done stays mapped, idle, for
// a second: the next array opened on the device adopts it whole, so an array
// made and dropped every launch waits for no mapping (each one a millisecond
// or two while a kernel runs); what its buckets do not take goes back at its
// first call that finds its stream idle.
#include "array_common.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace gpudyn::detail {

using ggarray_detail::growth_mailbox;

namespace {

using steady = std::chrono::steady_clock;
// The thread polls the mailboxes this often for a while after a launch may
// have started (a view was taken), and rarely otherwise.
constexpr auto kHotFor = std::chrono::seconds(2);
constexpr auto kHotPoll = std::chrono::microseconds(20);
constexpr auto kIdlePoll = std::chrono::microseconds(500);
// Reserve chunks and closed arenas unused this long go back to the driver.
constexpr auto kReserveIdle = std::chrono::seconds(1);
// Closed arenas kept for adoption, per device (the oldest goes first).
constexpr size_t kMaxIdleArenas = 8;
constexpr unsigned kSlotsPerSlab = 256; // mailboxes per pinned slab
// Mapped before the first launch (growth_arena_prepare).
constexpr uint64_t kMinAhead = uint64_t(2) << 20;
constexpr uint64_t kNoLimit = ~uint64_t(0);

struct chunk {
    CUmemGenericAllocationHandle handle;
    uint64_t bytes;
};

uint64_t load(const unsigned long long* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void store(unsigned long long* p, uint64_t v) {
    __atomic_store_n(p, static_cast<unsigned long long>(v), __ATOMIC_RELEASE);
}

} // namespace

struct growth_arena {
    std::mutex m; // the host thread and the array's host calls
    int device = 0;
    CUdeviceptr base = 0;
    uint64_t reserved = 0;
    uint64_t granularity = 0;
    uint64_t mapped = 0;
    std::vector<chunk> chunks;    // mapped back to back from base
    growth_mailbox* mb = nullptr; // pinned, mapped into the device's address space
    uint64_t mb_device = 0;
    uint64_t failed_want = 0;      // a request that could not be mapped (not retried until prepare)
    cudaEvent_t closing = nullptr; // set by close: give back once it completed
    bool ahead = false;            // adopted: maps what another array took (given back when idle)
    std::chrono::steady_clock::time_point idle_since{}; // closed and done: kept for adoption since then
};

namespace {

class memory_source {
public:
    static memory_source& get() {
        static memory_source s;
        return s;
    }
    ~memory_source() {
        {
            std::lock_guard<std::mutex> g(m_);
            stop_ = true;
        }
        cv_.notify_all();
        // A child forked after the thread started has no such thread: leave it be
        // (joining, or destroying a joinable std::thread, would hang or abort).
        if (thread_ != nullptr && owner_ == getpid()) {
            thread_->join();
            delete thread_;
        }
        // Arenas and chunks left at exit go with the process.
    }

    void add(growth_arena* a) {
        {
            std::lock_guard<std::mutex> g(m_);
            open_.push_back(a);
            if (thread_ == nullptr) {
                owner_ = getpid();
                thread_ = new std::thread([this] { run(); });
            }
        }
        hint();
    }
    void close(growth_arena* a) {
        {
            std::lock_guard<std::mutex> g(m_);
            open_.erase(std::remove(open_.begin(), open_.end(), a), open_.end());
            closing_.push_back(a);
        }
        cv_.notify_all();
    }
    // A closed arena whose work is done: kept mapped for the next array of its
    // device (the oldest beyond kMaxIdleArenas is given back now).
    void park(growth_arena* a) {
        a->idle_since = steady::now();
        growth_arena* drop = nullptr;
        {
            std::lock_guard<std::mutex> g(m_);
            open_.erase(std::remove(open_.begin(), open_.end(), a), open_.end());
            size_t same = 0;
            for (growth_arena* i : idle_) same += i->device == a->device;
            if (same >= kMaxIdleArenas)
                for (size_t i = 0; i < idle_.size(); ++i)
                    if (idle_[i]->device == a->device) {
                        drop = idle_[i];
                        idle_.erase(idle_.begin() + i);
                        break;
                    }
            idle_.push_back(a);
        }
        if (drop) destroy(drop, true);
        cv_.notify_all();
    }
    // The newest idle arena of `device` with at least `va_bytes` of range, else nullptr.
    growth_arena* adopt(int device, uint64_t va_bytes) {
        std::lock_guard<std::mutex> g(m_);
        for (size_t i = idle_.size(); i-- > 0;)
            if (idle_[i]->device == device && idle_[i]->reserved >= va_bytes) {
                growth_arena* a = idle_[i];
                idle_.erase(idle_.begin() + i);
                return a;
            }
        return nullptr;
    }
    void hint() {
        hot_until_.store((steady::now() + kHotFor).time_since_epoch().count(), std::memory_order_relaxed);
        cv_.notify_all();
    }

    // A mailbox slot: zeroed, limit none.  Raises OUT_OF_MEMORY when no pinned memory is left.
    growth_mailbox* take_mailbox(uint64_t* device_address) {
        std::lock_guard<std::mutex> g(m_);
        if (free_slots_.empty()) {
            void* p = nullptr;
            const cudaError_t e =
                cudaHostAlloc(&p, sizeof(growth_mailbox) * kSlotsPerSlab, cudaHostAllocMapped | cudaHostAllocPortable);
            if (e != cudaSuccess) {
                cudaGetLastError();
                raise(GPUDYN_ERROR_OUT_OF_MEMORY, "no pinned host memory for a growth mailbox: %s",
                      cudaGetErrorString(e));
            }
            for (unsigned i = 0; i < kSlotsPerSlab; ++i) free_slots_.push_back(static_cast<growth_mailbox*>(p) + i);
        }
        growth_mailbox* mb = free_slots_.back();
        void* d = nullptr;
        GPUDYN_CUDA(cudaHostGetDevicePointer(&d, mb, 0));
        free_slots_.pop_back();
        *mb = growth_mailbox{0, 0, kNoLimit, 0};
        *device_address = reinterpret_cast<uint64_t>(d);
        return mb;
    }
    void give_mailbox(growth_mailbox* mb) {
        std::lock_guard<std::mutex> g(m_);
        free_slots_.push_back(mb);
    }

    // A chunk of exactly `bytes` of `device`: from the reserve, else new.
    chunk take_chunk(int device, uint64_t bytes) {
        {
            std::lock_guard<std::mutex> g(reserve_m_);
            auto& r = reserve_[device];
            for (size_t i = r.size(); i-- > 0;)
                if (r[i].c.bytes == bytes) {
                    const chunk c = r[i].c;
                    r.erase(r.begin() + i);
                    return c;
                }
        }
        CUmemAllocationProp p = device_prop(device);
        CUmemGenericAllocationHandle h{};
        CUresult e = vmm_driver().create(&h, bytes, &p, 0);
        if (e == CUDA_ERROR_OUT_OF_MEMORY && release(device) != 0) e = vmm_driver().create(&h, bytes, &p, 0);
        check_cu(e, "cuMemCreate");
        return chunk{h, bytes};
    }
    void give_chunk(int device, chunk c) {
        std::lock_guard<std::mutex> g(reserve_m_);
        reserve_[device].push_back(entry{c, steady::now()});
    }
    // Releases the device's idle arenas and reserve chunks (all, or those
    // unused since `before`); the bytes released.
    uint64_t release(int device, steady::time_point before = steady::time_point::max()) {
        uint64_t n = 0;
        std::vector<growth_arena*> idle;
        {
            std::lock_guard<std::mutex> g(m_);
            for (size_t i = idle_.size(); i-- > 0;)
                if (idle_[i]->device == device && idle_[i]->idle_since < before) {
                    idle.push_back(idle_[i]);
                    idle_.erase(idle_.begin() + i);
                }
        }
        if (!idle.empty()) {
            device_guard on(device); // unmapping wants the device's context current
            for (growth_arena* a : idle) n += destroy(a, true);
        }
        std::vector<chunk> drop;
        {
            std::lock_guard<std::mutex> g(reserve_m_);
            auto& r = reserve_[device];
            for (size_t i = r.size(); i-- > 0;)
                if (r[i].since < before) {
                    drop.push_back(r[i].c);
                    r.erase(r.begin() + i);
                }
        }
        for (const chunk& c : drop) {
            vmm_driver().release(c.handle);
            n += c.bytes;
        }
        return n;
    }

private:
    struct entry {
        chunk c;
        steady::time_point since;
    };
    memory_source() = default;

    void run() {
        for (;;) {
            std::vector<growth_arena*> open, closing;
            {
                std::lock_guard<std::mutex> g(m_);
                if (stop_) return;
                open = open_;
                closing = closing_;
            }
            bool grew = false;
            for (growth_arena* a : open) grew |= serve(a);
            for (growth_arena* a : closing) finish_close(a);
            std::vector<int> devices;
            {
                std::lock_guard<std::mutex> g(reserve_m_);
                for (auto& kv : reserve_)
                    if (!kv.second.empty()) devices.push_back(kv.first);
            }
            {
                std::lock_guard<std::mutex> g(m_);
                for (growth_arena* a : idle_)
                    if (std::find(devices.begin(), devices.end(), a->device) == devices.end())
                        devices.push_back(a->device);
            }
            for (int d : devices) release(d, steady::now() - kReserveIdle);
            const bool hot =
                grew || steady::now().time_since_epoch().count() < hot_until_.load(std::memory_order_relaxed);
            std::unique_lock<std::mutex> g(m_);
            if (stop_) return;
            if (open_.empty() && closing_.empty() && devices.empty())
                cv_.wait(g, [this] { return stop_ || !open_.empty() || !closing_.empty() || !idle_.empty(); });
            else cv_.wait_for(g, hot ? kHotPoll : kIdlePoll);
        }
    }

    // Maps what a waiting bucket asks for; true when it mapped something.
    bool serve(growth_arena* a) {
        std::lock_guard<std::mutex> g(a->m);
        const uint64_t want = load(&a->mb->want);
        if (want <= a->mapped || want == a->failed_want) return false;
        cudaSetDevice(a->device);
        // Exactly what was asked for (rounded to the granularity): the arena
        // holds no more than its buckets; a kernel that keeps growing asks
        // again, each request covering every bucket waiting by then.
        try {
            map_to(a, want);
        } catch (const error&) {}
        if (a->mapped < want) {
            a->failed_want = want;
            store(&a->mb->limit, a->mapped); // waiting buckets past it are refused
        }
        return true;
    }
    void finish_close(growth_arena* a) {
        cudaSetDevice(a->device);
        const cudaError_t e = cudaEventQuery(a->closing);
        if (e == cudaErrorNotReady) return;
        cudaGetLastError();
        cudaEventDestroy(a->closing);
        a->closing = nullptr;
        {
            std::lock_guard<std::mutex> g(m_);
            closing_.erase(std::remove(closing_.begin(), closing_.end(), a), closing_.end());
        }
        park(a);
    }

public:
    // Maps chunks until `a->mapped` >= bytes (rounded up to the granularity);
    // raises OUT_OF_MEMORY (what was mapped before the failure stays).
    void map_to(growth_arena* a, uint64_t bytes) {
        const uint64_t g = a->granularity;
        const uint64_t target = std::min(a->reserved, (bytes + g - 1) / g * g);
        while (a->mapped < target) {
            // The largest power-of-two number of granules that fits: chunks of few
            // sizes, so the reserve serves arenas made and dropped again and again.
            uint64_t piece = g;
            while (piece * 2 <= target - a->mapped) piece *= 2;
            chunk c = take_chunk(a->device, piece);
            const CUdeviceptr at = a->base + a->mapped;
            CUresult r = vmm_driver().map(at, piece, 0, c.handle, 0);
            if (r == CUDA_SUCCESS) {
                CUmemAccessDesc access{};
                access.location = device_prop(a->device).location;
                access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                r = vmm_driver().set_access(at, piece, &access, 1);
                if (r != CUDA_SUCCESS) vmm_driver().unmap(at, piece);
            }
            if (r != CUDA_SUCCESS) {
                give_chunk(a->device, c);
                check_cu(r, "cuMemMap");
            }
            a->chunks.push_back(c);
            a->mapped += piece;
            store(&a->mb->mapped, a->mapped);
        }
    }
    // Unmaps chunks from the end while what stays mapped covers `keep`.
    void unmap_to(growth_arena* a, uint64_t keep) {
        while (!a->chunks.empty() && a->mapped - a->chunks.back().bytes >= keep) {
            const chunk c = a->chunks.back();
            a->mapped -= c.bytes;
            vmm_driver().unmap(a->base + a->mapped, c.bytes);
            a->chunks.pop_back();
            give_chunk(a->device, c);
        }
        store(&a->mb->mapped, a->mapped);
        store(&a->mb->want, std::min<uint64_t>(load(&a->mb->want), a->mapped));
    }
    // Unmaps and frees the arena; its chunks go to the reserve, or to the
    // driver with `release_chunks`.  The bytes it had mapped.
    uint64_t destroy(growth_arena* a, bool release_chunks = false) {
        const uint64_t n = a->mapped;
        if (release_chunks) {
            while (!a->chunks.empty()) {
                const chunk c = a->chunks.back();
                a->mapped -= c.bytes;
                vmm_driver().unmap(a->base + a->mapped, c.bytes);
                vmm_driver().release(c.handle);
                a->chunks.pop_back();
            }
        } else {
            unmap_to(a, 0);
        }
        if (a->base) vmm_driver().address_free(a->base, a->reserved);
        give_mailbox(a->mb);
        delete a;
        return n;
    }

private:
    std::mutex m_;         // open_, closing_, free_slots_, stop_ (never held while taking another lock)
    std::mutex reserve_m_; // reserve_ (a leaf lock)
    std::condition_variable cv_;
    bool stop_ = false;
    std::vector<growth_arena*> open_, closing_, idle_; // idle_: closed, done, kept for adoption
    std::vector<growth_mailbox*> free_slots_;
    std::map<int, std::vector<entry>> reserve_;
    std::atomic<int64_t> hot_until_{0};
    std::thread* thread_ = nullptr; // started by the first arena; joined at exit by the process that started it
    pid_t owner_ = 0;
};

} // namespace

growth_arena* growth_arena_open(int device, uint64_t va_bytes, bool adopt) {
    require_vmm(device);
    memory_source& src = memory_source::get();
    if (growth_arena* a = adopt ? src.adopt(device, va_bytes) : nullptr) {
        // A closed array's arena, mapped as it left it: this array's first
        // kernel finds that memory without waiting for the host.
        *a->mb = growth_mailbox{0, a->mapped, kNoLimit, 0};
        a->failed_want = 0;
        a->ahead = a->mapped > std::min(a->reserved, kMinAhead);
        src.add(a);
        return a;
    }
    CUmemAllocationProp p = device_prop(device);
    size_t g = 0;
    check_cu(vmm_driver().granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    auto* a = new growth_arena;
    a->device = device;
    a->granularity = g;
    a->reserved = (va_bytes + g - 1) / g * g;
    try {
        check_cu(vmm_driver().address_reserve(&a->base, a->reserved, 0, 0, 0), "cuMemAddressReserve");
        a->mb = src.take_mailbox(&a->mb_device);
    } catch (...) {
        if (a->base) vmm_driver().address_free(a->base, a->reserved);
        delete a;
        throw;
    }
    src.add(a);
    return a;
}

CUdeviceptr growth_arena_base(const growth_arena* a) { return a->base; }
uint64_t growth_arena_mailbox(const growth_arena* a) { return a->mb_device; }

uint64_t growth_arena_mapped(growth_arena* a) {
    std::lock_guard<std::mutex> g(a->m);
    return a->mapped;
}

namespace {
// GPUDYN_ARENA_PREMAP=<bytes>: map that much of every growth arena before a
// launch.  For tools that learn of device memory only at launches
// (compute-sanitizer's memcheck flags accesses to memory mapped while the
// kernel runs); 0 or unset: map only while kernels run.
uint64_t premap_bytes() {
    static const uint64_t n = [] {
        const char* v = std::getenv("GPUDYN_ARENA_PREMAP");
        return v ? std::strtoull(v, nullptr, 0) : 0ull;
    }();
    return n;
}
} // namespace

bool growth_arena_prepare(growth_arena* a) {
    bool lifted = false;
    {
        std::lock_guard<std::mutex> g(a->m);
        // The first kMinAhead is mapped before the first launch (the first
        // buckets of every LFVector fit in it: 2 MiB for the defaults); the rest
        // while kernels need it, so the array holds what its buckets take.
        const uint64_t target = std::max(premap_bytes(), std::min(a->reserved, kMinAhead));
        if (target > a->mapped) {
            try {
                memory_source::get().map_to(a, target);
            } catch (const error&) { // kernels ask for what they need
            }
        }
        if (load(&a->mb->limit) != kNoLimit) {
            store(&a->mb->limit, kNoLimit);
            lifted = true;
        }
        a->failed_want = 0;
    }
    memory_source::get().hint();
    return lifted;
}

void growth_arena_map(growth_arena* a, uint64_t bytes) {
    std::lock_guard<std::mutex> g(a->m);
    memory_source::get().map_to(a, bytes);
}

void growth_arena_trim(growth_arena* a, uint64_t keep) {
    std::lock_guard<std::mutex> g(a->m);
    memory_source::get().unmap_to(a, keep);
    a->ahead = false;
}

bool growth_arena_ahead(growth_arena* a) {
    std::lock_guard<std::mutex> g(a->m);
    return a->ahead;
}

bool growth_arena_give_back(growth_arena* a, uint64_t end) {
    std::lock_guard<std::mutex> g(a->m);
    if (!a->ahead) return false;
    a->ahead = false;
    // What prepare would map again before the next launch stays.
    const uint64_t keep = std::max(end, std::min(a->reserved, std::max(kMinAhead, premap_bytes())));
    const uint64_t before = a->mapped;
    memory_source::get().unmap_to(a, keep);
    return a->mapped < before;
}

void growth_arena_close(growth_arena* a, cudaStream_t stream) {
    memory_source& src = memory_source::get();
    if (cudaStreamQuery(stream) == cudaSuccess) {
        // Its work is done: kept mapped for the next array (the host thread
        // gives it back after a second unused).
        src.park(a);
        return;
    }
    cudaGetLastError();
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(e, stream) != cudaSuccess) {
        cudaGetLastError();
        if (e) cudaEventDestroy(e);
        cudaStreamSynchronize(stream); // no event: wait here instead
        cudaGetLastError();
        cudaEventCreateWithFlags(&e, cudaEventDisableTiming); // recorded nowhere: complete
    }
    a->closing = e;
    src.close(a);
}

uint64_t growth_reserve_release(int device) { return memory_source::get().release(device); }

} // namespace gpudyn::detail
