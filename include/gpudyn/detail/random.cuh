/// @file
/// Counter-based random numbers for device code: no state in memory, one 64-bit
/// key per thread, reproducible from a seed; and a seeded permutation of
/// [0, n).  Compiles under nvcc and NVRTC.
///
/// @code{.cpp}
/// gpudyn::detail::counter_rng rng(seed, thread_id);
/// unsigned r = rng.below(n);   // uniform in [0, n)
/// @endcode
#pragma once

namespace gpudyn {
inline namespace v0 {
namespace detail {

/// Weyl increment of SplitMix64: 2^64 / golden ratio, odd (Steele, Lea, Flood,
/// "Fast splittable pseudorandom number generators", OOPSLA 2014).
constexpr unsigned long long kGoldenGamma = 0x9E3779B97F4A7C15ull;

/// SplitMix64's output function (Stafford's "Mix13" variant, same paper): a
/// bijection of 64-bit words whose output bits all depend on every input bit.
__host__ __device__ __forceinline__ unsigned long long mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/// Stream `stream` of the generator seeded with `seed`: the n-th draw is
/// mix64(key + n * gamma), so draws need no memory traffic and any thread's
/// sequence can be replayed from (seed, stream).
struct counter_rng {
    unsigned long long key;
    unsigned long long counter;

    __host__ __device__ counter_rng(unsigned long long seed, unsigned long long stream)
        : key(mix64(seed ^ mix64(stream + kGoldenGamma))), counter(0) {}

    __host__ __device__ __forceinline__ unsigned long long next64() {
        ++counter;
        return mix64(key + counter * kGoldenGamma);
    }
    __host__ __device__ __forceinline__ unsigned next32() { return unsigned(next64() >> 32); }

    /// Uniform integer in [0, n) for 0 < n <= 2^32, by multiply-shift (Lemire,
    /// "Fast random integer generation in an interval", TOMACS 2019) without the
    /// rejection step: the bias is below n / 2^32, far under the walk's noise.
    __host__ __device__ __forceinline__ unsigned below(unsigned long long n) {
        return unsigned((static_cast<unsigned long long>(next32()) * n) >> 32);
    }
};

/// A seeded bijection of [0, 2^bits) (odd multiply, add, xorshift: each step is
/// invertible mod 2^bits); cycle-walking maps it onto [0, n) (i < n <= 2^bits).
__device__ inline unsigned permute(unsigned long long i, unsigned bits, unsigned n, unsigned long long seed) {
    const unsigned long long mask = (bits >= 64) ? ~0ull : ((1ull << bits) - 1);
    const unsigned shift = bits / 2 + 1;
    unsigned long long x = i;
    do {
        for (unsigned r = 0; r < 4; ++r) {
            unsigned long long k = mix64(seed + r * kGoldenGamma);
            x = (x * (k | 1)) & mask;
            x = (x + (k >> 17)) & mask;
            x ^= x >> shift;
        }
    } while (x >= n);
    return unsigned(x);
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
