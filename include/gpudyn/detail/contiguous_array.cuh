// Device side shared by the two contiguous arrays (static and VMM): element i
// lives at data[i].  A block reserves its whole range with one atomicAdd on a
// reservation counter (no compare-and-swap loop: ~10^5 reservations of one
// bulk insert would serialize on it).  A range that does not fit fails whole
// (nothing of it is stored) and records its start in `failed_at` (atomicMin).
// Because the counter only grows, every range handed out after a failing one
// starts above it and fails too, and every range below the lowest failing start
// succeeded: the elements are exactly [0, min(counter, failed_at)).
// Consequence: once a reservation failed, later ones fail until the host calls
// push_back/reserve/clear, which fold the counter back to that size.
// Compiles under nvcc and NVRTC.
#pragma once

#include "../insert.cuh"

namespace gpudyn {
inline namespace v0 {
namespace dev {

// Status bits; values equal gpudyn_array_status_bits_t in ggarray.h.
constexpr unsigned kArrayAllocationFailed = 1u;
constexpr unsigned kArrayCapacityExceeded = 2u;

template <class T>
struct contiguous_array_ref {
    T* data = nullptr;
    unsigned long long capacity = 0;
    unsigned long long* size_ptr = nullptr;    // reservation counter
    unsigned* status_ptr = nullptr;
    unsigned long long* failed_ptr = nullptr;  // lowest failed start (~0 when none)

    bool version_ok = false;

    // Binds a view; one of another layout version or element size is refused:
    // valid() is false and every push_back fails.
    template <class View>
    __host__ __device__ void bind(const View& v, unsigned expected_version) {
        version_ok = v.version == expected_version && v.element_size == sizeof(T);
        data = version_ok ? reinterpret_cast<T*>(v.data) : nullptr;
        capacity = version_ok ? v.capacity : 0;
        size_ptr = reinterpret_cast<unsigned long long*>(v.size);
        status_ptr = reinterpret_cast<unsigned*>(v.status);
        failed_ptr = reinterpret_cast<unsigned long long*>(v.failed_at);
    }
    __host__ __device__ bool valid() const { return version_ok; }
    // Elements stored (see the file comment): min(counter, lowest failed start).
    __device__ unsigned long long size() const {
        const unsigned long long c = *static_cast<volatile unsigned long long*>(size_ptr);
        const unsigned long long f = *static_cast<volatile unsigned long long*>(failed_ptr);
        return c < f ? c : f;
    }
    __device__ T& operator[](unsigned long long i) const { return data[i]; }

    // One thread: [*base, *base + n) becomes the caller's, or false (status set,
    // nothing reserved that anyone will store into).
    __device__ bool reserve(unsigned long long n, unsigned long long* base) const {
        const unsigned long long old = atomicAdd(size_ptr, n);
        if (n > capacity || old > capacity - n) {
            atomicMin(failed_ptr, old);
            atomicOr(status_ptr, kArrayCapacityExceeded);
            return false;
        }
        *base = old;
        return true;
    }
    // Sink window: nothing to keep (element i is data[i]).
    __device__ void open(sink_window&, unsigned long long, unsigned long long) const {}
    __device__ void store(const sink_window&, unsigned long long i, const T& v) const { data[i] = v; }
    __device__ T* extent(const sink_window&, unsigned long long, unsigned long long* first,
                         unsigned long long* end) const {
        *first = 0;
        *end = ~0ull;  // one piece: the whole array
        return data;
    }

    // Block-cooperative insertion (block_inserter::push): every thread of the
    // block calls; the result is the same in every thread.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items>
    __device__ bool push_back(push_storage<Algo, MaxThreads>& s, const bool (&flag)[Items], const T (&value)[Items]) const {
        contiguous_array_ref sink = *this;
        return block_inserter<Algo, MaxThreads>::push(s, sink, flag, value);
    }
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads>
    __device__ bool push_back(push_storage<Algo, MaxThreads>& s, bool flag, const T& value) const {
        const bool f[1] = {flag};
        const T v[1] = {value};
        return push_back<Algo, MaxThreads>(s, f, v);
    }
    // A block's chunk of n candidates with one reservation (block_inserter::push_chunk):
    // every thread of the block calls with the same n and src.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items = 8,
              class Src>
    __device__ bool push_back_chunk(push_storage<Algo, MaxThreads>& s, unsigned long long n, const Src& src) const {
        contiguous_array_ref sink = *this;
        return block_inserter<Algo, MaxThreads>::template push_chunk<Items, T>(s, sink, n, src);
    }
    // Part p of a bulk insertion (push_back_parts): one array, every part the same.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items = 8,
              class Src>
    __device__ bool push_back_part(unsigned long long, push_storage<Algo, MaxThreads>& s, unsigned long long n,
                                   const Src& src) const {
        return push_back_chunk<Algo, MaxThreads, Items>(s, n, src);
    }
};

}  // namespace dev
}  // namespace v0
}  // namespace gpudyn
