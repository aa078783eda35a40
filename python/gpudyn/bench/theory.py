"""The papers' theoretical models of the structures (pure NumPy, no GPU), used by the
`gpudyn bench` drivers and installed with them (gpudyn.bench.theory).

GGArray section: the GGArray paper's §V / Fig. 3.  A phase inserts
size × F elements, F log-normal(μ = 0, σ).  A static (or semi-static) array
must be sized in advance so that it fails at most 1% of the time: capacity =
size × (1 + q99(F)).  A GGArray allocates buckets as it goes: each LFVector
holds first·(2^k − 1) elements for the smallest k that fits, so it never holds
more than 2× its elements plus its first buckets.
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------- GGArray ----
# z-score of the 99th percentile of the standard normal (Φ⁻¹(0.99)).
_Z99 = 2.3263478740408408


def lognormal_quantile(q_z: float, mu: float, sigma: float) -> float:
    """Quantile of a log-normal(μ, σ) at standard-normal score q_z."""
    return math.exp(mu + sigma * q_z)


def static_capacity(size: int, sigma: float, mu: float = 0.0) -> float:
    """Elements a static array needs to fail at most 1% of the time."""
    return size * (1.0 + lognormal_quantile(_Z99, mu, sigma))


def ggarray_capacity(elements: int, num_lfvectors: int = 512, first_bucket: int = 1024) -> int:
    """Capacity (elements) of a GGArray whose elements are spread evenly over its
    LFVectors: each holds first·(2^k − 1) for the smallest such k >= its share."""
    per = -(-int(elements) // num_lfvectors)
    k = 0
    while first_bucket * ((1 << k) - 1) < per:
        k += 1
    return num_lfvectors * first_bucket * ((1 << k) - 1)


def ggarray_bytes_bound(elements: int, element_size: int, num_lfvectors: int = 512, first_bucket: int = 1024) -> int:
    """Upper bound of a GGArray's bucket bytes: 2 × element bytes + the first buckets."""
    return 2 * elements * element_size + num_lfvectors * first_bucket * element_size


def fig3(
    size: int = 10**6,
    sigmas=None,
    samples: int = 2000,
    seed: int = 0,
    num_lfvectors: int = 512,
    first_bucket: int = 1024,
) -> dict:
    """Fig. 3 series: for each σ, the static capacity (1% failure), the mean
    elements actually needed, and the mean GGArray capacity over samples."""
    sigmas = np.linspace(0.0, 2.0, 21) if sigmas is None else np.asarray(sigmas, dtype=float)
    rng = np.random.default_rng(seed)
    static, needed, gg = [], [], []
    for s in sigmas:
        f = rng.lognormal(0.0, s, samples)
        total = size * (1.0 + f)
        static.append(static_capacity(size, s))
        needed.append(float(total.mean()))
        gg.append(float(np.mean([ggarray_capacity(int(t), num_lfvectors, first_bucket) for t in total])))
    return {
        "sigma": list(map(float, sigmas)),
        "static_elements": static,
        "needed_elements": needed,
        "ggarray_elements": gg,
    }


# Bytes the structures hold (Fig. 3 drawn against the benchmark's measured bytes).
# The driver maps device memory in units of this many bytes (VMM arrays, the
# GGArray's bucket pool) on current GPUs.
MAPPING_GRANULARITY = 2 << 20


def _round_up(x: int, unit: int) -> int:
    return -(-int(x) // unit) * unit


def vmm_bytes(elements: int, element_size: int = 4, granularity: int = MAPPING_GRANULARITY) -> int:
    """Bytes a VMM array holds for `elements`: their bytes rounded up to the mapping granularity."""
    return _round_up(int(elements) * element_size, granularity)


def ggarray_pool_bytes(
    elements: int,
    element_size: int = 4,
    num_lfvectors: int = 512,
    first_bucket: int = 1024,
    granularity: int = MAPPING_GRANULARITY,
) -> int:
    """Bytes a GGArray holds when `elements` are spread evenly over its LFVectors and
    its bucket rows come from the pool: the rows' bytes (ggarray_capacity) rounded up
    to the mapping granularity."""
    cap = ggarray_capacity(elements, num_lfvectors, first_bucket)
    return _round_up(cap * element_size, granularity)


def memory_vs_elements(
    elements,
    final_elements: int,
    element_size: int = 4,
    num_lfvectors=(32, 512),
    first_bucket: int = 1024,
    headroom: bool = True,
) -> dict:
    """Fig. 3 against the number of elements: bytes held by a static array sized
    for `final_elements`, a VMM array grown to each size, and GGArrays of each
    `num_lfvectors` (with `headroom`, the benchmark's reserve of one more element
    per LFVector), beside the element bytes themselves."""
    xs = [int(n) for n in elements]
    out = {
        "elements": xs,
        "element_bytes": [n * element_size for n in xs],
        "static": [int(final_elements) * element_size] * len(xs),
        "vmm": [vmm_bytes(n, element_size) for n in xs],
    }
    for L in num_lfvectors:
        out[f"ggarray{L}"] = [ggarray_pool_bytes(n + (L if headroom else 0), element_size, L, first_bucket) for n in xs]
    return out


# ---- random-walk page heap --------------------------------------------------
# Pham et al., "Dynamic Buffer Management in Massively Parallel Systems: A Case on
# GPUs" (SIII-B, SIV-A, SIV-D).  Notation: T pages in the pool, A of them free,
# N concurrent requests, w bits per bitmap word, warps of 32 threads.

RW_WARP = 32  # threads per warp in the WAS metric (the paper's max over 32 lanes)


def _rw_check(T, A, N, w=1):
    for name, v in (("T", T), ("A", A), ("N", N), ("w", w)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise ValueError(f"gpudyn.bench.theory: argument '{name}' is {v!r}, expected a number >= 0")
    if not (0 < N <= A <= T):
        raise ValueError(f"gpudyn.bench.theory: expected 0 < N <= A <= T, got T={T}, A={A}, N={N}")
    if w < 1:
        raise ValueError(f"gpudyn.bench.theory: argument 'w' is {w!r}, expected >= 1")


def queue_tas(N):
    """Eq. 1: TAS of a queue: a thread's position is uniform on [1, N]: (N + 1) / 2."""
    if N < 1:
        raise ValueError(f"gpudyn.bench.theory: argument 'N' is {N!r}, expected >= 1")
    return (N + 1) / 2


def queue_was(N, warp=RW_WARP):
    """Eq. 2 (exact sum before Faulhaber's approximation): sum_{k=0}^{N} 1 - (k/N)^32,
    about 32/33 N."""
    if N < 1:
        raise ValueError(f"gpudyn.bench.theory: argument 'N' is {N!r}, expected >= 1")
    N = int(N)
    return sum(1.0 - (k / N) ** warp for k in range(N + 1))


def harmonic(n):
    """H_n = sum_{k=1}^{n} 1/k (exact for n <= 10^6, else gamma + ln n + 1/2n - 1/12n^2)."""
    n = int(n)
    if n <= 0:
        return 0.0
    if n <= 1_000_000:
        return math.fsum(1.0 / k for k in range(1, n + 1))
    return 0.5772156649015329 + math.log(n) + 1 / (2 * n) - 1 / (12 * n * n)


def rw_tas(T, A, N, exact=True):
    """Eq. 3: RW's TAS.  exact: (T/N)(H_A - H_{A-N}); else (T/N) ln(A / (A - N)) (needs N < A)."""
    _rw_check(T, A, N)
    if exact:
        return T / N * (harmonic(A) - harmonic(A - N))
    if N >= A:
        return math.inf
    return T / N * math.log(A / (A - N))


def rw_was_bound(T, A, N, w=1, warp=RW_WARP):
    """Eq. 4 (w = 1) and Eq. 6 (w bits per step): upper bound of WAS,
    sum_{k>=0} 1 - (1 - q^(w k))^32 with q = (T - A + N) / T."""
    _rw_check(T, A, N, w)
    q = ((T - A + N) / T) ** w
    if q >= 1.0:
        return math.inf
    total, qk = 0.0, 1.0
    for _ in range(10_000_000):
        term = 1.0 - (1.0 - qk) ** warp
        total += term
        if term < 1e-12:
            break
        qk *= q
    return total


def rw_bm_tas(T, A, N, w=32):
    """Eq. 5: RW-BM's TAS, (1/N) sum_{j<N} 1 / (1 - ((T - A + j)/T)^w)."""
    _rw_check(T, A, N, w)
    return math.fsum(1.0 / (1.0 - ((T - A + j) / T) ** w) for j in range(int(N))) / N


def rw_bm_was_bound(T, A, N, w=32, warp=RW_WARP):
    """Eq. 6: upper bound of RW-BM's WAS (Eq. 4 with w bits per step)."""
    return rw_was_bound(T, A, N, w, warp)


def rw_bm_limit(U, w=32):
    """Theorems 1 and 2: as A -> N, RW-BM's value tends to U / w + (w - 1) / (2w)
    for RW's value U (TAS, or the WAS bound)."""
    return U / w + (w - 1) / (2 * w)


def crw_repeat_probability(A, M):
    """Eq. 8: probability that a thread's cluster ran out, (M - 1) / (A + M - 1), for
    A free pages in M clusters."""
    if A < 0 or M < 1:
        raise ValueError(f"gpudyn.bench.theory: expected A >= 0 and M >= 1, got A={A}, M={M}")
    return (M - 1) / (A + M - 1) if A + M - 1 > 0 else 0.0


def crw_tas(T, A, N, M):
    """Eq. 9: CRW's TAS, 1 + (M - 1)/(A + M - 1) * (T/N) ln(A / (A - N))."""
    _rw_check(T, A, N)
    return 1.0 + crw_repeat_probability(A, M) * rw_tas(T, A, N, exact=False)


def crw_bm_tas(T, A, N, M, w=32, per_thread=1):
    """Eq. 9 with the bitmap walk: 1 + p U, p from Eq. 8 and U = RW-BM's TAS (Eq. 5)
    in place of RW's (Eq. 3); the paper leaves the bitmap out of Eq. 9 because it
    helps RW and CRW alike (SIV-D1), and gpudyn's CRW walks RW-BM.  With
    per_thread = R requests per thread, the first has no last page and walks:
    the mean over the R requests is (U + (R - 1)(1 + p U)) / R."""
    _rw_check(T, A, N, w)
    if per_thread < 1:
        raise ValueError(f"gpudyn.bench.theory: argument 'per_thread' is {per_thread!r}, expected >= 1")
    u = rw_bm_tas(T, A, N, w)
    p = crw_repeat_probability(A, M)
    if per_thread == 1:
        return 1.0 + p * u
    return (u + (per_thread - 1) * (1.0 + p * u)) / per_thread


# Fig. 10's scenarios: free fractions, and CRW's clusters M as fractions of A
# (CRW1: M = 0.01A, CRW2: M = 0.5A, CRW3: M = A), with T = 1M pages as in SV-A.
FIG10_FREES = (0.5, 0.1, 0.01, 0.005)
FIG10_M_FRACTIONS = (0.01, 0.5, 1.0)


def fig10(T=1 << 20, frees=FIG10_FREES, n_values=None, m_fractions=FIG10_M_FRACTIONS, fixed_n=1000, free_axis=None):
    """Fig. 10 series: RW's TAS (Eq. 3 as printed, the logarithm form) and CRW's
    (Eq. 9) for each M = m A, (a) against N for each free fraction (A = round(free T);
    N from 1 to 5000, the thread counts of Fig. 6, below A), (b) against the free
    fraction at N = fixed_n."""
    if n_values is None:
        n_values = sorted({int(round(10 ** (k / 8))) for k in range(0, 30)} | {5000})
    free_axis = list(np.geomspace(0.005, 0.5, 25)) if free_axis is None else list(free_axis)

    def m_of(A, m):
        return max(1, int(round(m * A)))

    panels = []
    for f in frees:
        A = int(round(f * T))
        ns = [n for n in n_values if 0 < n < A]
        panels.append(
            {
                "free": f,
                "A": A,
                "N": ns,
                "rw": [rw_tas(T, A, n, exact=False) for n in ns],
                "crw": {str(m): [crw_tas(T, A, n, m_of(A, m)) for n in ns] for m in m_fractions},
            }
        )
    by_free = {"N": fixed_n, "free": [], "rw": [], "crw": {str(m): [] for m in m_fractions}}
    for f in free_axis:
        A = int(round(f * T))
        if not 0 < fixed_n < A:
            continue
        by_free["free"].append(float(f))
        by_free["rw"].append(rw_tas(T, A, fixed_n, exact=False))
        for m in m_fractions:
            by_free["crw"][str(m)].append(crw_tas(T, A, fixed_n, m_of(A, m)))
    return {"T": T, "m_fractions": list(m_fractions), "panels": panels, "by_free": by_free}
