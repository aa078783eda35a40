/// @file
/// The queue baseline of Pham et al. (SV-A, the TAS/WAS comparison of Fig. 11):
/// free page ids in an array, handed out through one atomic head.  A thread's
/// request is the atomicAdd on the head; its position in the serialised order is
/// what the paper counts as the queue's steps (TAS = mean position + 1).
/// Header-only, nvcc and NVRTC.  Experimental (benchmark instrumentation, no
/// stability promise: see gpudyn/experimental.h).
///
/// @code{.cpp}
/// gpudyn::experimental::page_queue q{pages, head, count};   // head starts at 0
/// unsigned long long position;
/// unsigned page = q.pop(position);   // kPageQueueEmpty once count pages are out
/// @endcode
///
/// Any thread may call pop at any time (no warp collective).  Exhaustion
/// returns kPageQueueEmpty; the head keeps counting past `count`, so it also
/// tells the host how many requests were made.
#pragma once

namespace gpudyn {
inline namespace v0 {
namespace experimental {

/// "No page" (the same value as kRwInvalidPage / GPUDYN_RW_HEAP_INVALID_PAGE).
constexpr unsigned kPageQueueEmpty = 0xffffffffu;

struct page_queue {
    const unsigned* pages;    ///< free page ids, pages[0 .. count)
    unsigned long long* head; ///< next index to hand out (device memory, starts at 0)
    unsigned long long count; ///< number of ids in pages

    /// Takes the next page id (kPageQueueEmpty when all count are out); `position`
    /// receives this request's index in the head's order.
    __device__ unsigned pop(unsigned long long& position) const {
        position = atomicAdd(head, 1ull);
        return position < count ? pages[position] : kPageQueueEmpty;
    }
    __device__ unsigned pop() const {
        unsigned long long position;
        return pop(position);
    }
};

} // namespace experimental
} // namespace v0
} // namespace gpudyn
