/// @file
/// Device side shared by the two contiguous arrays (static and VMM): element i
/// lives at data[i].  A reservation (one per warp group of a per-thread push,
/// one per block of a block-level push) is one atomicAdd on the reservation
/// counter (no compare-and-swap loop: contended reservations would serialize on
/// it).  A range that does not fit fails whole (nothing of it is stored),
/// records its start in `failed_at` (atomicMin) and sets the status word, so
/// the elements are exactly [0, min(counter, failed_at)) (array_state.cuh).
/// Consequence: once a reservation failed, later ones fail until the host folds
/// the counter back to that size (push_back, reserve, clear, clear_status); the
/// status bits stay until clear_status or clear.
///
/// A view of another layout version or element size is refused: valid() is
/// false, every push returns false and size() is 0; the counter is not touched.
/// A ref whose sizeof(T) is not the array's element size sets
/// GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE so the host sees the mistake.
/// Compiles under nvcc and NVRTC.
#pragma once

#include "gpudyn/detail/array_state.cuh"
#include "gpudyn/detail/warp_push.cuh"
#include "gpudyn/insert.cuh"

namespace gpudyn {
inline namespace v0 {
namespace detail {

template <class T>
class contiguous_array_ref {
public:
    using value_type = T;

    __host__ __device__ bool valid() const { return version_ok_; }

    /// @name per-thread push (any thread, any divergence)
    /// @{

    /// Appends x; lanes that call together on this array share one reservation.  False when
    /// the array is full (status set) or the view is refused; then x is not stored.
    __device__ bool push_back(const T& x) const {
        if (!valid()) return refuse();
        return warp_push_one<T>(peers(), sink{this}, x);
    }
    /// Appends values[0..n) (n may be 0 and may differ per thread): one
    /// reservation for the lanes that call together; all or nothing per group.
    __device__ bool push_back(const T* values, unsigned n) const {
        if (!valid()) return refuse();
        return warp_push_many<T>(peers(), sink{this}, values, n);
    }
    /// Items (flag, value) pairs per thread: the flagged values of the lanes that
    /// call together with one reservation, item k of every lane (lane order)
    /// before item k + 1; all or nothing per group.
    template <int Items>
    __device__ bool push_back(const bool (&flag)[Items], const T (&value)[Items]) const {
        if (!valid()) return refuse();
        return warp_push_flagged<Items>(peers(), sink{this}, flag, value);
    }

    /// @}

    /// @name block-level push (every thread of the block calls)
    /// @{

    /// Items (flag, value) pairs per thread, one reservation per block; the
    /// result is the same in every thread.
    template <unsigned BX, insert_algo A, unsigned BY, unsigned BZ, int Items>
    __device__ bool push_back(push_storage<BX, A, BY, BZ>& s, const bool (&flag)[Items],
                              const T (&value)[Items]) const {
        if (!valid()) return refuse();
        sink k{this};
        return push_storage<BX, A, BY, BZ>::inserter::push(s, k, flag, value);
    }
    template <unsigned BX, insert_algo A, unsigned BY, unsigned BZ>
    __device__ bool push_back(push_storage<BX, A, BY, BZ>& s, bool flag, const T& value) const {
        const bool f[1] = {flag};
        const T v[1] = {value};
        return push_back(s, f, v);
    }
    /// A block's chunk of n candidates (src.flag(j), src.value(j), j < n; see
    /// block_inserter::push_chunk) with one reservation: every thread of the
    /// block calls with the same n and src.
    template <int Items = 8, unsigned BX, insert_algo A, unsigned BY, unsigned BZ, class Src>
    __device__ bool push_back_chunk(push_storage<BX, A, BY, BZ>& s, unsigned long long n, const Src& src) const {
        if (!valid()) return refuse();
        sink k{this};
        return push_storage<BX, A, BY, BZ>::inserter::template push_chunk<Items, T>(s, k, n, src);
    }
    /// Part p of a bulk insertion (push_back_parts): one array, every part the same.
    template <int Items = 8, unsigned BX, insert_algo A, unsigned BY, unsigned BZ, class Src>
    __device__ bool push_back_part(unsigned long long, push_storage<BX, A, BY, BZ>& s, unsigned long long n,
                                   const Src& src) const {
        return push_back_chunk<Items>(s, n, src);
    }

    /// @}

    /// @name reads
    /// @{

    /// Elements stored (see the file comment): min(counter, lowest failed start); 0 when refused.
    __device__ unsigned long long size() const {
        if (!valid()) return refuse(), 0;
        return held_elements(size_ptr_, failed_ptr_);
    }
    /// Elements the array can hold (as of the view).
    __host__ __device__ unsigned long long capacity() const { return capacity_; }
    /// Element i (i < size(); valid() required).
    __device__ T& at(unsigned long long i) const { return data_[i]; }
    __device__ T& operator[](unsigned long long i) const { return data_[i]; }
    /// Element 0: the elements are contiguous (nullptr when refused).
    __host__ __device__ T* data() const { return data_; }
    /// The elements [lo, hi) ∩ [0, size()) as one span: p[0..`*n`) (`*n` = 0 and
    /// nullptr when empty), as ggarray_ref::span.
    __device__ T* span(unsigned long long lo, unsigned long long hi, unsigned long long* n) const {
        *n = 0;
        const unsigned long long s = size(); // 0 when refused
        if (hi > s) hi = s;
        if (lo >= hi) return nullptr;
        *n = hi - lo;
        return data_ + lo;
    }
    /// Calls f(T* p, n, first) for the elements [lo, hi) ∩ [0, size()): one span.
    template <class F>
    __device__ void for_each_span(unsigned long long lo, unsigned long long hi, F&& f) const {
        const unsigned long long n = size();
        if (hi > n) hi = n;
        if (lo < hi) f(data_ + lo, hi - lo, lo);
    }
    /// Every element: f(T* p, n, first) over [0, size()).
    template <class F>
    __device__ void for_each_span(F&& f) const {
        for_each_span(0ull, ~0ull, static_cast<F&&>(f));
    }

    /// @}
protected:
    /// Binds a view (see the file comment for a refused one).
    template <class View>
    __host__ __device__ void bind(const View& v, unsigned expected_version) {
        version_ok_ = v.version == expected_version && v.element_size == sizeof(T);
        wrong_size_status_ =
            v.version == expected_version && !version_ok_ ? reinterpret_cast<unsigned*>(v.status) : nullptr;
        data_ = version_ok_ ? reinterpret_cast<T*>(v.data) : nullptr;
        capacity_ = version_ok_ ? v.capacity : 0;
        size_ptr_ = version_ok_ ? reinterpret_cast<unsigned long long*>(v.size) : nullptr;
        status_ptr_ = version_ok_ ? reinterpret_cast<unsigned*>(v.status) : nullptr;
        failed_ptr_ = version_ok_ ? reinterpret_cast<unsigned long long*>(v.failed_at) : nullptr;
    }

private:
    T* data_ = nullptr;
    unsigned long long capacity_ = 0;
    unsigned long long* size_ptr_ = nullptr; ///< reservation counter
    unsigned* status_ptr_ = nullptr;
    unsigned long long* failed_ptr_ = nullptr; ///< lowest failed start (~0 when none)
    unsigned* wrong_size_status_ = nullptr;    ///< the status word of a view bound with the wrong element type
    bool version_ok_ = false;

    /// valid() is false: a view of this layout bound with the wrong element type
    /// says so in its status word (one of another version has none we can find).
    __device__ bool refuse() const {
        if (wrong_size_status_ != nullptr) report_wrong_element_size(wrong_size_status_);
        return false;
    }

    /// The structure's side of the insertion algorithms (insert.cuh, warp_push.cuh).
    /// The lanes calling now that push into this array (others may push into another).
    __device__ unsigned peers() const {
        return peers_with(__activemask(), reinterpret_cast<unsigned long long>(size_ptr_));
    }
    struct sink {
        const contiguous_array_ref* a;
        /// Nothing to hint: whether a range fits is known from the view alone.
        __device__ unsigned long long hint() const { return 0; }
        /// One thread: [base, base + n) of the counter.  Callers checked valid().
        __device__ unsigned long long claim(unsigned long long n) const { return atomicAdd(a->size_ptr_, n); }
        __device__ bool fits(unsigned long long base, unsigned long long n) const {
            return n <= a->capacity_ && base <= a->capacity_ - n;
        }
        /// Element i of [base, base + n) at p[i - base] when the range fits, else nullptr.
        __device__ T* fast(unsigned long long, unsigned long long base, unsigned long long n) const {
            return fits(base, n) ? a->data_ + base : nullptr;
        }
        /// A range that does not fit records its start and the status (every
        /// caller of the range: the same values, so once is as good as many).
        __device__ bool settle(unsigned long long base, unsigned long long n) const {
            if (fits(base, n)) return true;
            atomicMin(a->failed_ptr_, base);
            atomicOr(a->status_ptr_, kArrayCapacityExceeded);
            return false;
        }
        __device__ void advance(unsigned long long, unsigned long long) const {}
        __device__ void store_run(unsigned long long i, const T* v, unsigned n) const {
            T* p = a->data_ + i;
            for (unsigned j = 0; j < n; ++j) p[j] = v[j];
        }
        __device__ void store_one(unsigned long long i, const T& v) const { a->data_[i] = v; }
        /// Any thread, after settle: element i of [base, base + n) is p[i - base].
        __device__ T* span(unsigned long long base, unsigned long long) const { return a->data_ + base; }
        /// Block sink: nothing to keep in the window (element i is data[i]).
        __device__ void open(sink_window&, unsigned long long, unsigned long long) const {}
        __device__ void store(const sink_window&, unsigned long long i, const T& v) const { a->data_[i] = v; }
        __device__ T* extent(const sink_window&, unsigned long long, unsigned long long* first,
                             unsigned long long* end) const {
            *first = 0;
            *end = ~0ull; // one piece: the whole array
            return a->data_;
        }
    };
};

} // namespace detail

/// The name of the detail namespace before the lane and block helpers were
/// merged into it: the device reference showed the arrays' shared base as
/// dev::contiguous_array_ref, so code that named it keeps compiling.
namespace dev = detail;

} // namespace v0
} // namespace gpudyn
