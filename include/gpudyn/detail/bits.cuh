// Bit tricks on 32- and 64-bit words and a masked warp maximum, shared by the
// bitmap-based structures.  Compiles under nvcc and NVRTC (no host headers).
#pragma once

namespace gpudyn {
inline namespace v0 {
namespace detail {

__device__ __forceinline__ unsigned popcount(unsigned x) { return unsigned(__popc(x)); }
__device__ __forceinline__ unsigned popcount(unsigned long long x) { return unsigned(__popcll(x)); }
// Index of the lowest set bit of a non-zero word.
__device__ __forceinline__ unsigned lowest_bit(unsigned x) { return unsigned(__ffs(int(x))) - 1u; }
__device__ __forceinline__ unsigned lowest_bit(unsigned long long x) { return unsigned(__ffsll((long long)x)) - 1u; }

// Position of the k-th (0-based) set bit of x, k < popcount(x): binary search on
// population counts (log2(bits) steps, no loop over bits).
template <class Word>
__device__ __forceinline__ unsigned nth_set_bit(Word x, unsigned k) {
    unsigned pos = 0;
    for (unsigned width = sizeof(Word) * 4; width != 0; width >>= 1) {
        unsigned low = popcount(Word(x & ((Word(1) << width) - 1)));
        if (k >= low) {
            k -= low;
            x >>= width;
            pos += width;
        }
    }
    return pos;
}

// The lowest k set bits of x (k <= popcount(x)).
template <class Word>
__device__ __forceinline__ Word lowest_set_bits(Word x, unsigned k) {
    if (k == 0) return Word(0);
    if (k >= popcount(x)) return x;
    return x & ((Word(1) << nth_set_bit(x, k)) - 1);
}

// Bits [lo, hi) of a Word (0 <= lo <= hi <= bits of Word).
template <class Word>
__device__ __forceinline__ Word bit_range(unsigned lo, unsigned hi) {
    constexpr unsigned kBits = sizeof(Word) * 8;
    Word upto_hi = hi >= kBits ? ~Word(0) : ((Word(1) << hi) - 1);
    Word below_lo = lo >= kBits ? ~Word(0) : ((Word(1) << lo) - 1);
    return upto_hi & ~below_lo;
}

// Maximum of `value` over the lanes of `mask` (a warp collective over mask:
// exactly the lanes of mask call, with the same mask).  sm_80+ has a reduction instruction; older GPUs shuffle from
// every lane of the mask in turn.
__device__ __forceinline__ unsigned masked_max(unsigned mask, unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(mask, value);
#else
    unsigned best = value;
    for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
        unsigned other = __shfl_sync(mask, value, int(lowest_bit(rest)));
        best = other > best ? other : best;
    }
    return best;
#endif
}

}  // namespace detail
}  // namespace v0
}  // namespace gpudyn
