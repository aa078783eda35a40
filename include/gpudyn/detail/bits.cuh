/// @file
/// Bit tricks on 32- and 64-bit words, shared by the bitmap-based structures
/// (warp collectives: warp.cuh).  Compiles under nvcc and NVRTC (no host headers).
#pragma once

namespace gpudyn {
inline namespace v0 {
namespace detail {

__device__ __forceinline__ unsigned popcount(unsigned x) { return unsigned(__popc(x)); }
__device__ __forceinline__ unsigned popcount(unsigned long long x) { return unsigned(__popcll(x)); }
/// Index of the lowest set bit of a non-zero word.
__device__ __forceinline__ unsigned lowest_bit(unsigned x) { return unsigned(__ffs(int(x))) - 1u; }
__device__ __forceinline__ unsigned lowest_bit(unsigned long long x) { return unsigned(__ffsll((long long)x)) - 1u; }

/// Position of the k-th (0-based) set bit of x, k < popcount(x): binary search on
/// population counts (log2(bits) steps, no loop over bits).
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

/// The lowest k set bits of x (k <= popcount(x)).
template <class Word>
__device__ __forceinline__ Word lowest_set_bits(Word x, unsigned k) {
    if (k == 0) return Word(0);
    if (k >= popcount(x)) return x;
    return x & ((Word(1) << nth_set_bit(x, k)) - 1);
}

/// Bits [lo, hi) of a Word (0 <= lo <= hi <= bits of Word).
template <class Word>
__device__ __forceinline__ Word bit_range(unsigned lo, unsigned hi) {
    constexpr unsigned kBits = sizeof(Word) * 8;
    Word upto_hi = hi >= kBits ? ~Word(0) : ((Word(1) << hi) - 1);
    Word below_lo = lo >= kBits ? ~Word(0) : ((Word(1) << lo) - 1);
    return upto_hi & ~below_lo;
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
