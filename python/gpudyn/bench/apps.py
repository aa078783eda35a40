"""`gpudyn bench apps`: gpudyn inside real programs (issue 40, item 4): (a)
breadth-first search on a Graph500 Kronecker graph, in Python with Numba kernels
and in CUDA C++ (benchmarks/apps/apps_bench.cu), against what a user would write
without gpudyn; (b) the fixed-radius neighbour pairs of a particle system, in
Python with Numba kernels (apps_pairs.py says how), under "pairs" in the JSON;
and the Heap's program (issue 42, item 4): every particle's neighbour list
malloc'ed on a gpudyn.Heap from the kernel, against count/scan/write
(apps_lists.py says how), under "lists".

Graph (Graph500 specification, kernel 0): SCALE (22; --quick 16) and edge factor
16: 16 * 2^SCALE input edges drawn by the Kronecker recursion with initiator
A, B, C, D = 0.57, 0.19, 0.19, 0.05, vertex labels permuted at random and the
edge list shuffled; self-loops and duplicate edges stay in the edge list (the
spec allows them), the CSR searched is undirected (each edge both ways) with
self-loops and duplicates dropped (kernel 1 may build any representation).
Generated on the GPU with CuPy (vectorized), CSR by sort and cumsum.  Search
keys: 64 distinct random vertices of degree >= 1 (the spec's rule); a run
searches the first GPUDYN_APPS_KEYS of them (default 8; --quick 2).
GPUDYN_APPS_SCALE overrides the scale.

Every BFS is level-synchronous and top-down: a frontier vertex u claims each
unvisited neighbour v with a compare-and-swap on parent[v] (-1 -> u), sets
level[v] and emits v into the next frontier.  Variants, each with a thread per
frontier vertex (`_thread`) and a warp per frontier vertex (`_warp`):
  gpudyn         next frontier pushed with gdn.push_back into a GGArray(int32)
                 (default options); the next level's kernel reads the frontier in
                 place (gdn.size, gdn.at, grid-stride over the count: the host
                 never reads it), then cur.clear() (stream-ordered) and swap.  The
                 host takes one ref per level (the consumed array's: its get_view
                 recomputes the ranges at() reads) and reads a device flag ("some
                 vertex was claimed at this level") every CHECK_EVERY levels to stop;
  worst          the same kernel into a preallocated n-vertex int32 buffer with
                 one counter, warp-aggregated atomicAdd (one per group of lanes
                 that emit together); the host reads the counter every
                 CHECK_EVERY levels;
  worst_plain    the same with one atomicAdd per emitted vertex;
  two_pass       count kernel (claims, counts per frontier vertex), cumsum, the
                 total to the host, an exact output, write kernel (re-reads the
                 adjacency, writes the v whose parent is u);
  cupy           pure CuPy (Python only): gather the frontier's neighbours with
                 searchsorted, keep the unvisited, scatter parents, unique.
  gpudyn_every_level (Python): the gpudyn variants with the flag read every level.
Timing: CUDA events around a whole search (reset of parent/level included), one
warm-up search, then one search per key; median over the keys.  TEPS (Graph500):
input edge tuples in the searched component / time; the harmonic mean over keys.
Validation of every search (outside the timing) against a host reference
(scipy.sparse.csgraph BFS, or a NumPy level-synchronous BFS without SciPy):
levels equal the reference's (so the reached set does too), and the Graph500
rules on the parent tree (root is its own parent at level 0, each tree edge is
an edge of the graph, levels differ by one along tree edges, every input edge
spans at most one level or has both ends unreached).
Memory each variant holds beyond the graph and the parent/level arrays:
gpudyn: what its two arrays hold, counted as the baselines are (the bytes
their buffers take): allocated_bytes (buckets and mapped arena) plus 1 KiB per
LFVector (a bound on the bookkeeping, ~520 bytes), held between searches
(clear keeps buckets) = its peak; device_bytes_delta (cudaMemGetInfo before
creating them and after the searches) and device_bytes_delta_open (after
creating them) are recorded beside it: they also count memory the
stream-ordered pool and the CUDA context take in whole chunks;
worst: its two buffers; two_pass: the largest over levels of frontier + counts +
offsets + exact output; cupy: CuPy pool bytes in use, sampled inside each level.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
import time

import numpy as np

try:  # the kernels name `cuda` as a module global (Numba's simulator swaps it for its own)
    from numba import cuda
except ImportError:  # numba-cuda is optional: run() says what is missing
    cuda = None

# ---- configuration (defaults in one place) ------------------------------------------
SCALE, QUICK_SCALE = 22, 16  # issue 40: scale 22 (4.2M vertices)
EDGE_FACTOR = 16  # Graph500 default
INITIATOR = (0.57, 0.19, 0.19, 0.05)  # Graph500 A, B, C, D
NUM_KEYS_DRAWN = 64  # Graph500: 64 search keys
KEYS, QUICK_KEYS = 8, 2  # keys a run searches (GPUDYN_APPS_KEYS)
SEED = 0x6750_0500  # graph and keys; fixed so runs compare
BLOCK = 256  # threads a block, every kernel
# Grid of the grid-stride kernels: blocks of 256 threads per SM that fill the
# 2048 resident threads of an sm_80/sm_90 SM (more blocks just queue).
BLOCKS_PER_SM = 8
CHECK_EVERY = 4  # levels between host reads of the stop flag
DEFAULT_LFVECTORS = 512  # a default GGArray's num_lfvectors (the frontiers use the defaults)
BOOKKEEPING_BOUND = 1024  # bytes per LFVector bounding a GGArray's bookkeeping (~520)
WARP = 32
SPEED_WORST_GOAL = 1.0  # issue 40: BFS vs worst-case buffer
SPEED_TWO_PASS_GOAL = 1.3  # issue 40: BFS vs two-pass
MEMORY_GOAL = 2.0  # issue 40: gpudyn bytes / two-pass bytes, at most
MAPPINGS = ("thread", "warp")
KERNEL_VARIANTS = ("gpudyn", "worst", "worst_plain", "two_pass")
PAIRS_STEPS = 5  # progress steps of the second program (apps_pairs: its variants)
LISTS_STEPS = 3  # and of the Heap's program (apps_lists: its variants)
GRAPH_MAGIC = b"GDBFS001"  # file header read by gpudyn_bench_apps


# ---- Graph500 generator and CSR (xp: numpy or cupy) ---------------------------------
class _Random:
    """Uniform floats and permutations from one seeded RandomState of `xp`."""

    def __init__(self, xp, seed: int):
        self.xp = xp
        self.rs = xp.random.RandomState(seed)

    def uniform(self, n: int):
        if self.xp is np:
            return self.rs.random_sample(n).astype(np.float32)
        return self.rs.random_sample(size=n, dtype=self.xp.float32)

    def permutation(self, n: int):
        try:
            return self.rs.permutation(n)
        except (AttributeError, TypeError):  # a RandomState without permutation: sort random keys
            return self.xp.argsort(self.rs.random_sample(size=n))


def kronecker_edges(xp, scale: int, edge_factor: int = EDGE_FACTOR, seed: int = SEED, initiator=INITIATOR):
    """(src, dst) int32 arrays of edge_factor * 2^scale edges: Graph500's Kronecker
    recursion (per bit level: the row bit is 1 with probability C + D, the column
    bit with D / (C + D) given a row bit of 1, B / (A + B) given 0), vertex
    labels permuted, edge list shuffled."""
    a, b, c, _ = initiator
    n, m = 1 << scale, edge_factor << scale
    rnd = _Random(xp, seed)
    src = xp.zeros(m, dtype=xp.int32)
    dst = xp.zeros(m, dtype=xp.int32)
    ab, c_norm, a_norm = a + b, c / (1.0 - (a + b)), a / (a + b)
    for bit in range(scale):
        row_bit = rnd.uniform(m) > ab
        col_bit = rnd.uniform(m) > xp.where(row_bit, xp.float32(c_norm), xp.float32(a_norm))
        src |= row_bit.astype(xp.int32) << bit
        dst |= col_bit.astype(xp.int32) << bit
        del row_bit, col_bit
    labels = rnd.permutation(n).astype(xp.int32)
    src, dst = labels[src], labels[dst]
    order = rnd.permutation(m)
    return src[order], dst[order]


def build_csr(xp, src, dst, n: int):
    """Undirected CSR without self-loops or duplicates: (row int64[n+1], col int32[nnz],
    keys int64[nnz] = u << 32 | v sorted, the validation's edge lookup)."""
    keep = src != dst
    u = xp.concatenate([src[keep], dst[keep]]).astype(xp.int64)
    v = xp.concatenate([dst[keep], src[keep]]).astype(xp.int64)
    del keep
    keys = xp.sort((u << 32) | v)
    del u, v
    if keys.size:
        first = xp.ones(keys.size, dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        keys = keys[first]
        del first
    col = (keys & 0xFFFFFFFF).astype(xp.int32)
    counts = xp.bincount((keys >> 32).astype(xp.int64), minlength=n)
    row = xp.zeros(n + 1, dtype=xp.int64)
    row[1:] = xp.cumsum(counts)
    return row, col, keys


def search_keys(row_host: np.ndarray, count: int = NUM_KEYS_DRAWN, seed: int = SEED) -> np.ndarray:
    """`count` distinct random vertices of degree >= 1 (self-loops do not count: the CSR has none)."""
    deg = np.diff(row_host)
    candidates = np.flatnonzero(deg > 0)
    rng = np.random.default_rng(seed)
    return rng.choice(candidates, size=min(count, candidates.size), replace=False).astype(np.int32)


# ---- BFS without kernels: the pure-CuPy variant and the NumPy reference -------------
def bfs_vectorized(xp, row, col, root: int, level=None, parent=None, pool_sample=None):
    """Level-synchronous top-down BFS with array operations only: (parent, level)
    int32, -1 where unreached.  pool_sample(), when given, is called where the
    level's temporaries are largest."""
    n = row.size - 1
    if level is None:
        level = xp.empty(n, dtype=xp.int32)
        parent = xp.empty(n, dtype=xp.int32)
    level.fill(-1)
    parent.fill(-1)
    level[root] = 0
    parent[root] = root
    frontier = xp.asarray([root], dtype=xp.int32)
    depth = 0
    while frontier.size:
        starts = row[frontier]
        deg = row[frontier + 1] - starts
        ends = xp.cumsum(deg)
        total = int(ends[-1])  # to the host: the gather's size
        if total == 0:
            break
        idx = xp.arange(total, dtype=xp.int64)
        seg = xp.searchsorted(ends, idx, side="right")  # frontier slot of each gathered edge
        nbr = col[starts[seg] + idx - (ends[seg] - deg[seg])]
        new = level[nbr] == -1
        if pool_sample is not None:
            pool_sample()
        nbr, owner = nbr[new], frontier[seg[new]]
        del idx, seg, new, starts, deg, ends
        parent[nbr] = owner  # one of the frontier neighbours wins
        frontier = xp.unique(nbr).astype(xp.int32)
        level[frontier] = depth + 1
        depth += 1
    return parent, level


def levels_from_predecessors(pred: np.ndarray, root: int) -> np.ndarray:
    """BFS levels from a BFS tree's predecessors (unreached: negative) by pointer
    jumping: log2(depth) vectorized steps."""
    n = pred.size
    reached = pred >= 0
    reached[root] = True
    anc = np.where(pred >= 0, pred, np.arange(n)).astype(np.int64)
    anc[root] = root
    depth = np.where(reached, 1, 0).astype(np.int64)
    depth[root] = 0
    while True:
        up = anc[anc]
        if np.array_equal(up, anc):
            break
        depth = depth + depth[anc]
        anc = up
    return np.where(reached, depth, -1).astype(np.int32)


def reference_levels(row_host: np.ndarray, col_host: np.ndarray, root: int, graph=None) -> np.ndarray:
    """Host reference levels: scipy.sparse.csgraph's BFS (C), or NumPy's level-synchronous BFS."""
    if graph is not None:
        from scipy.sparse.csgraph import breadth_first_order

        _, pred = breadth_first_order(graph, int(root), directed=True, return_predecessors=True)
        return levels_from_predecessors(pred, int(root))
    return bfs_vectorized(np, row_host, col_host, int(root))[1]


def scipy_graph(row_host: np.ndarray, col_host: np.ndarray):
    """The CSR as a scipy matrix (float64 data, int32 indices: what csgraph converts to), or None."""
    try:
        from scipy.sparse import csr_matrix
    except ImportError:
        return None
    n = row_host.size - 1
    return csr_matrix((np.ones(col_host.size), col_host.astype(np.int32), row_host.astype(np.int32)), shape=(n, n))


def component_edges(xp, src, ref_level) -> int:
    """Input edge tuples in the searched component (self-loops and duplicates
    included): an edge is in it when its first end was reached."""
    return int((ref_level[src] >= 0).sum())


def validate(xp, keys, src, dst, root: int, parent, level, ref_level) -> dict:
    """Error counts of one search (all 0: valid).  keys: the CSR's sorted u << 32 | v."""
    n = level.size
    reached = level >= 0
    err = {"levels_differ": int((level != ref_level).sum())}
    err["root"] = int(int(parent[root]) != root or int(level[root]) != 0)
    v = xp.flatnonzero(reached & (xp.arange(n) != root))
    p = parent[v].astype(xp.int64)
    bad_p = (p < 0) | (p >= n)
    err["parent_out_of_range"] = int(bad_p.sum()) + int((parent[~reached] != -1).sum())
    p = xp.where(bad_p, 0, p)
    want = (p << 32) | v.astype(xp.int64)
    pos = xp.minimum(xp.searchsorted(keys, want), keys.size - 1)
    err["tree_edge_missing"] = int((keys[pos] != want).sum()) if keys.size else int(v.size)
    err["tree_level"] = int((level[v] != level[p] + 1).sum())
    ls, ld = level[src], level[dst]
    both, one = (ls >= 0) & (ld >= 0), (ls >= 0) != (ld >= 0)
    err["edge_span"] = int((both & (xp.abs(ls - ld) > 1)).sum()) + int(one.sum())
    return err


# ---- Numba kernels ------------------------------------------------------------------
def aggregated_push(count_type):
    """push(buf, n, v) -> True: the worst-case buffer's emit.  The lanes emitting
    together take one range of counter n[0] (of `count_type`) with one atomicAdd,
    their leader's, and each stores v at the range's start + its rank."""
    i64 = np.int64

    @cuda.jit(device=True)
    def push_aggregated(buf, n, v):
        mask = cuda.activemask()
        rank = cuda.popc(mask & cuda.lanemask_lt())
        m = i64(mask)
        leader = cuda.popc((m & -m) - 1)
        base = count_type(0)
        if rank == 0:
            base = cuda.atomic.add(n, 0, count_type(cuda.popc(mask)))
        base = cuda.shfl_sync(mask, base, leader)
        buf[base + rank] = v
        return True

    return push_aggregated


def kernels(gdn=None):
    """{name: kernel}: expand_<variant>_<mapping> for gpudyn (when `gdn` has size/at/
    push_back), worst, worst_plain; count_<mapping>, write_<mapping> for the two-pass.
    Every expand kernel is one body (_expand) over three device functions: the
    frontier's count and item i, and the emit into the next frontier."""
    i64, i32 = np.int64, np.int32

    @cuda.jit(device=True)
    def buf_count(buf, n):
        return i64(n[0])

    @cuda.jit(device=True)
    def buf_item(buf, n, i):
        return buf[i]

    @cuda.jit(device=True)
    def push_plain(buf, n, v):
        buf[cuda.atomic.add(n, 0, 1)] = v
        return True

    push_aggregated = aggregated_push(i32)
    sources = {"worst": (buf_count, buf_item, push_aggregated), "worst_plain": (buf_count, buf_item, push_plain)}
    if gdn is not None and all(hasattr(gdn, f) for f in ("size", "at", "push_back")):
        # ranged_size: the count at() reaches, one load (where gdn has it); size: the live sum.
        gsize, gat, gpush = getattr(gdn, "ranged_size", gdn.size), gdn.at, gdn.push_back

        @cuda.jit(device=True)
        def gg_count(ref, unused):
            return i64(gsize(ref))

        @cuda.jit(device=True)
        def gg_item(ref, unused, i):
            return i32(gat(ref, i))

        @cuda.jit(device=True)
        def gg_push(ref, unused, v):
            return gpush(ref, v)

        sources["gpudyn"] = (gg_count, gg_item, gg_push)

    out = {}
    for variant, (count, item, push) in sources.items():
        for mapping in MAPPINGS:
            out[f"expand_{variant}_{mapping}"] = _expand(count, item, push, mapping == "warp")
    out.update(_two_pass())
    return out


def _expand(count, item, push, warp: bool):
    """One level: every frontier item (grid-stride over count(src), read by one
    thread of the block) claims its unvisited neighbours and pushes them.
    active (length 0: not used) is raised to depth + 1 (atomic max) by each warp
    that claimed a vertex, so the host stops when active[0] stays below the level
    it checks; failed[0] counts refused pushes."""
    i64, i32 = np.int64, np.int32
    full = np.uint32(0xFFFFFFFF)
    unvisited = i32(-1)

    if not warp:

        @cuda.jit
        def expand_thread(src, src_n, dst, dst_n, row, col, parent, level, depth, active, failed):
            total = cuda.shared.array(1, np.int64)
            if cuda.threadIdx.x == 0:
                total[0] = count(src, src_n)
            cuda.syncthreads()
            n = total[0]
            claimed = False
            i = i64(cuda.grid(1))
            stride = i64(cuda.gridsize(1))
            while i < n:
                u = item(src, src_n, i)
                for e in range(row[u], row[u + 1]):
                    v = col[e]
                    if parent[v] == unvisited and cuda.atomic.cas(parent, v, unvisited, u) == unvisited:
                        level[v] = depth + 1
                        claimed = True
                        if not push(dst, dst_n, v):
                            cuda.atomic.add(failed, 0, 1)
                i += stride
            if active.size > 0:
                if cuda.any_sync(full, claimed) and cuda.laneid == 0:
                    cuda.atomic.max(active, 0, i32(depth + 1))

        return expand_thread

    @cuda.jit
    def expand_warp(src, src_n, dst, dst_n, row, col, parent, level, depth, active, failed):
        total = cuda.shared.array(1, np.int64)
        if cuda.threadIdx.x == 0:
            total[0] = count(src, src_n)
        cuda.syncthreads()
        n = total[0]
        claimed = False
        lane = cuda.laneid
        i = i64(cuda.grid(1)) // WARP
        stride = i64(cuda.gridsize(1)) // WARP
        while i < n:
            u = item(src, src_n, i)
            e = row[u] + lane
            end = row[u + 1]
            while e < end:
                v = col[e]
                if parent[v] == unvisited and cuda.atomic.cas(parent, v, unvisited, u) == unvisited:
                    level[v] = depth + 1
                    claimed = True
                    if not push(dst, dst_n, v):
                        cuda.atomic.add(failed, 0, 1)
                e += WARP
            i += stride
        if active.size > 0:
            if cuda.any_sync(full, claimed) and lane == 0:
                cuda.atomic.max(active, 0, i32(depth + 1))

    return expand_warp


def _two_pass():
    i64, i32 = np.int64, np.int32
    full = np.uint32(0xFFFFFFFF)
    unvisited = i32(-1)

    @cuda.jit
    def count_thread(front, n, row, col, parent, level, depth, counts):
        i = i64(cuda.grid(1))
        while i < n:
            u = front[i]
            c = i32(0)
            for e in range(row[u], row[u + 1]):
                v = col[e]
                if parent[v] == unvisited and cuda.atomic.cas(parent, v, unvisited, u) == unvisited:
                    level[v] = depth + 1
                    c += 1
            counts[i] = c
            i += i64(cuda.gridsize(1))

    @cuda.jit
    def count_warp(front, n, row, col, parent, level, depth, counts):
        lane = cuda.laneid
        i = i64(cuda.grid(1)) // WARP
        while i < n:
            u = front[i]
            c = i32(0)
            e = row[u] + lane
            end = row[u + 1]
            while e < end:
                v = col[e]
                if parent[v] == unvisited and cuda.atomic.cas(parent, v, unvisited, u) == unvisited:
                    level[v] = depth + 1
                    c += 1
                e += WARP
            for off in (16, 8, 4, 2, 1):
                c += cuda.shfl_down_sync(full, c, off)
            if lane == 0:
                counts[i] = c
            i += i64(cuda.gridsize(1)) // WARP

    @cuda.jit
    def write_thread(front, n, ends, counts, row, col, parent, out):
        # The CSR has no duplicates: v is written once, by the u that claimed it.
        i = i64(cuda.grid(1))
        while i < n:
            u = front[i]
            o = ends[i] - counts[i]
            for e in range(row[u], row[u + 1]):
                v = col[e]
                if parent[v] == u:
                    out[o] = v
                    o += 1
            i += i64(cuda.gridsize(1))

    @cuda.jit
    def write_warp(front, n, ends, counts, row, col, parent, out):
        lane = cuda.laneid
        i = i64(cuda.grid(1)) // WARP
        while i < n:
            u = front[i]
            o = ends[i] - counts[i]
            e0 = row[u]
            end = row[u + 1]
            while e0 < end:  # the same trip count in every lane
                e = e0 + lane
                v = i32(0)
                mine = False
                if e < end:
                    v = col[e]
                    mine = parent[v] == u
                b = cuda.ballot_sync(full, mine)
                if mine:
                    out[o + cuda.popc(b & cuda.lanemask_lt())] = v
                o += cuda.popc(b)
                e0 += WARP
            i += i64(cuda.gridsize(1)) // WARP

    return {
        "count_thread": count_thread,
        "count_warp": count_warp,
        "write_thread": write_thread,
        "write_warp": write_warp,
    }


# ---- the BFS drivers ----------------------------------------------------------------
class Env:
    """What the drivers need from the array library: CuPy on a GPU, NumPy under
    Numba's simulator (NUMBA_ENABLE_CUDASIM=1, for tests)."""

    def __init__(self, xp, sms: int, sim: bool = False):
        self.xp, self.sms, self.sim = xp, sms, sim

    def k(self, a):
        """A kernel argument for `a` (no synchronization on its stream at each launch)."""
        if self.sim:
            return a
        return cuda.as_cuda_array(a, sync=False)

    def grid(self, items: int | None = None, per_item: int = 1) -> int:
        full = self.sms * BLOCKS_PER_SM
        if items is None:
            return full
        return max(1, min(full, (items * per_item + BLOCK - 1) // BLOCK))

    def pool_used(self) -> int:
        if self.sim:
            return 0
        return int(self.xp.get_default_memory_pool().used_bytes())


class _Graph:
    def __init__(self, env: Env, row, col):
        self.env, self.n = env, int(row.size) - 1
        xp = env.xp
        self.row, self.col = row, col
        self.parent = xp.empty(self.n, dtype=xp.int32)
        self.level = xp.empty(self.n, dtype=xp.int32)
        self.k_row, self.k_col = env.k(row), env.k(col)
        self.k_parent, self.k_level = env.k(self.parent), env.k(self.level)

    def reset(self, root: int) -> None:
        self.parent.fill(-1)
        self.level.fill(-1)
        self.parent[root] = root
        self.level[root] = 0


class WorstCase:
    """Preallocated n-vertex frontiers, one counter each (the plain or warp-aggregated atomic)."""

    def __init__(self, g: _Graph, ks: dict, mapping: str, plain: bool, check_every: int = CHECK_EVERY):
        xp, self.g, self.check_every = g.env.xp, g, check_every
        self.kernel = ks[f"expand_{'worst_plain' if plain else 'worst'}_{mapping}"]
        self.bufs = [xp.empty(g.n, dtype=xp.int32) for _ in range(2)]
        self.counts = [xp.zeros(1, dtype=xp.int32) for _ in range(2)]
        self.k_bufs = [g.env.k(b) for b in self.bufs]
        self.k_counts = [g.env.k(c) for c in self.counts]
        self.no_flag = g.env.k(xp.zeros(0, dtype=xp.int32))
        self.failed = xp.zeros(1, dtype=xp.int32)
        self.k_failed = g.env.k(self.failed)
        self.host_reads = self.levels = 0

    def held_bytes(self) -> int:
        return sum(int(b.nbytes) for b in self.bufs) + sum(int(c.nbytes) for c in self.counts)

    def search(self, root: int) -> None:
        g, grid = self.g, self.g.env.grid()
        g.reset(root)
        self.bufs[0][0] = root
        self.counts[0].fill(1)
        self.counts[1].fill(0)
        cur, depth = 0, 0
        while True:
            nxt = 1 - cur
            self.kernel[grid, BLOCK](
                self.k_bufs[cur],
                self.k_counts[cur],
                self.k_bufs[nxt],
                self.k_counts[nxt],
                g.k_row,
                g.k_col,
                g.k_parent,
                g.k_level,
                np.int32(depth),
                self.no_flag,
                self.k_failed,
            )
            depth += 1
            self.levels += 1
            if depth % self.check_every == 0:
                self.host_reads += 1
                if int(self.counts[nxt][0]) == 0:
                    break
            self.counts[cur].fill(0)  # after the launch that read it
            cur = nxt


class GGArrayBFS:
    """Two GGArray(int32) frontiers, default options; the consumer reads in place."""

    def __init__(self, g: _Graph, ks: dict, mapping: str, check_every: int = CHECK_EVERY, open_arrays: bool = True):
        xp, self.g, self.check_every = g.env.xp, g, check_every
        self.kernel = ks[f"expand_gpudyn_{mapping}"]
        self.seed_kernel = ks.get("seed_gpudyn") or _seed_kernel()
        ks["seed_gpudyn"] = self.seed_kernel
        self.active = xp.zeros(1, dtype=xp.int32)  # the deepest level a vertex was claimed at
        self.k_active = g.env.k(self.active)
        self.unused = g.env.k(xp.zeros(1, dtype=xp.int32))
        self.failed = xp.zeros(1, dtype=xp.int32)
        self.k_failed = g.env.k(self.failed)
        self.host_reads = self.levels = 0
        self.ref_seconds = 0.0  # host time in view_arg() (get_view) calls
        self.arrays, self.refs = [], []
        if open_arrays:
            self.open()

    def open(self) -> None:
        """Creates the two arrays (the run measures device memory around this)."""
        import gpudyn

        self.arrays = [gpudyn.GGArray(np.int32) for _ in range(2)]
        self.refs = [a.view_arg() for a in self.arrays]  # push refs: an array's views stay valid

    def close(self) -> None:
        for a in self.arrays:
            a.close()

    def memory(self) -> dict:
        stats = [a.stats() for a in self.arrays]
        out = {
            "allocated_bytes": sum(s["allocated_bytes"] for s in stats),
            "lfvectors": DEFAULT_LFVECTORS * len(self.arrays),
            "status": [int(a.status) for a in self.arrays],
        }
        try:
            out["budget_bytes"] = sum(int(a.budget) for a in self.arrays)
        except Exception:  # a GGArray without a budget to report: the allocated bytes say it
            pass
        return out

    def search(self, root: int) -> None:
        g, grid = self.g, self.g.env.grid()
        g.reset(root)
        self.active.fill(0)
        for a in self.arrays:
            a.clear()
        self.seed_kernel[1, 1](self.refs[0], np.int32(root))
        cur, depth = 0, 0
        while True:
            nxt = 1 - cur
            t0 = time.perf_counter()
            self.refs[cur] = self.arrays[cur].view_arg()  # get_view: at() sees what the last level pushed
            self.ref_seconds += time.perf_counter() - t0
            self.kernel[grid, BLOCK](
                self.refs[cur],
                self.unused,
                self.refs[nxt],
                self.unused,
                g.k_row,
                g.k_col,
                g.k_parent,
                g.k_level,
                np.int32(depth),
                self.k_active,
                self.k_failed,
            )
            self.arrays[cur].clear()  # stream-ordered: after the kernel read it
            depth += 1
            self.levels += 1
            if depth % self.check_every == 0:
                self.host_reads += 1
                if int(self.active[0]) < depth:  # no vertex claimed at some level up to here
                    break
            cur = nxt


def _seed_kernel():
    import gpudyn.numba as gdn

    @cuda.jit
    def seed_gpudyn(ref, root):
        if cuda.grid(1) == 0:
            gdn.push_back(ref, root)

    return seed_gpudyn


class TwoPass:
    """Count, cumsum, total to the host, exact output, write: every level."""

    def __init__(self, g: _Graph, ks: dict, mapping: str):
        self.g, self.mapping = g, mapping
        self.count, self.write = ks[f"count_{mapping}"], ks[f"write_{mapping}"]
        self.peak = 0
        self.host_reads = self.levels = 0

    def held_bytes(self) -> int:
        return self.peak

    def search(self, root: int) -> None:
        g, env = self.g, self.g.env
        xp = env.xp
        g.reset(root)
        per = WARP if self.mapping == "warp" else 1
        front = xp.asarray([root], dtype=xp.int32)
        n, depth = 1, 0
        while n:
            counts = xp.empty(n, dtype=xp.int32)
            self.count[env.grid(n, per), BLOCK](
                env.k(front), n, g.k_row, g.k_col, g.k_parent, g.k_level, np.int32(depth), env.k(counts)
            )
            ends = xp.cumsum(counts, dtype=xp.int32)
            total = int(ends[-1])  # to the host, to size the output
            self.host_reads += 1
            out = xp.empty(total, dtype=xp.int32)
            self.peak = max(self.peak, 4 * (3 * n + total))  # frontier, counts, offsets, output
            if total:
                self.write[env.grid(n, per), BLOCK](
                    env.k(front), n, env.k(ends), env.k(counts), g.k_row, g.k_col, g.k_parent, env.k(out)
                )
            front, n = out, total
            depth += 1
            self.levels += 1


class PureCuPy:
    def __init__(self, g: _Graph):
        self.g = g
        self.peak = 0
        self.host_reads = self.levels = 0

    def held_bytes(self) -> int:
        return self.peak

    def search(self, root: int) -> None:
        env = self.g.env
        base = env.pool_used()

        def sample():
            self.peak = max(self.peak, env.pool_used() - base)
            self.levels += 1
            self.host_reads += 1

        bfs_vectorized(env.xp, self.g.row, self.g.col, root, self.g.level, self.g.parent, sample)


# ---- one run ------------------------------------------------------------------------
def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def _harmonic(xs) -> float:
    xs = [x for x in xs if x > 0]
    return float(len(xs) / sum(1.0 / x for x in xs)) if xs else 0.0


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if not v:
        return default
    try:
        x = int(v)
    except ValueError:
        raise ValueError(f"gpudyn bench apps: {name} is '{v}', expected a whole number") from None
    if x < 1:
        raise ValueError(f"gpudyn bench apps: {name} is {x}, expected >= 1")
    return x


def _progress(ctx, state: dict, label: str) -> None:
    state["done"] += 1
    ctx._show_progress(state["done"], state["total"], label, time.time() - state["t0"])


def write_graph_file(path: str, row_h: np.ndarray, col_h: np.ndarray, keys: np.ndarray, ref_levels) -> None:
    """The file gpudyn_bench_apps reads: magic, u64 n, nnz, keys; int64 row[n+1];
    int32 col[nnz]; int32 keys[k]; int32 reference levels [k][n]."""
    with open(path, "wb") as f:
        f.write(GRAPH_MAGIC + struct.pack("<3Q", row_h.size - 1, col_h.size, keys.size))
        row_h.astype("<i8").tofile(f)
        col_h.astype("<i4").tofile(f)
        keys.astype("<i4").tofile(f)
        for lv in ref_levels:
            np.asarray(lv, dtype="<i4").tofile(f)


def _has_scipy() -> bool:
    try:
        import scipy.sparse.csgraph  # noqa: F401

        return True
    except ImportError:
        return False


def _free_device_bytes(cp) -> int:
    """Free device memory with CuPy's cached blocks and the stream-ordered pool's
    idle memory given back, so a difference of two readings is what was taken between."""
    cp.cuda.Device().synchronize()
    cp.get_default_memory_pool().free_all_blocks()
    try:
        rt = cp.cuda.runtime
        rt.memPoolTrimTo(rt.deviceGetDefaultMemPool(cp.cuda.Device().id), 0)
    except Exception:  # a CuPy or driver without stream-ordered pools: nothing cached there
        pass
    return int(cp.cuda.runtime.memGetInfo()[0])


def _skip(reason: str) -> dict:
    print(f"[apps] skipped: {reason}", file=sys.stderr)
    return {"skipped": reason, "table": f"skipped: {reason}"}


def run(ctx) -> dict:
    try:
        import cupy as cp
        from numba import cuda  # noqa: F401
    except ImportError as e:
        return _skip(f"needs numba-cuda and CuPy ({e})")
    try:
        import gpudyn.numba as gdn
    except ImportError as e:  # the gpudyn variants need it; the others run
        gdn, gdn_error = None, str(e)
    else:
        gdn_error = None if hasattr(gdn, "at") else "gpudyn.numba has no at() (the in-place read of the frontier)"
    from ._common import markdown_table

    scale = _env_int("GPUDYN_APPS_SCALE", QUICK_SCALE if ctx.quick else SCALE)
    nkeys = min(NUM_KEYS_DRAWN, _env_int("GPUDYN_APPS_KEYS", QUICK_KEYS if ctx.quick else KEYS))
    sms = int(cp.cuda.Device().attributes["MultiProcessorCount"])
    env = Env(cp, sms)
    t_all = time.time()
    failures: list[str] = []

    # Graph, keys, host references.
    t0 = time.time()
    src, dst = kronecker_edges(cp, scale)
    n = 1 << scale
    row, col, ekeys = build_csr(cp, src, dst, n)
    cp.cuda.Device().synchronize()
    gen_seconds = time.time() - t0
    row_h, col_h = cp.asnumpy(row), cp.asnumpy(col)
    keys = search_keys(row_h)[:nkeys]
    t0 = time.time()
    sg = scipy_graph(row_h, col_h)
    ref_levels = [reference_levels(row_h, col_h, int(k), sg) for k in keys]
    del sg
    ref_seconds = time.time() - t0
    ref_dev = [cp.asarray(lv) for lv in ref_levels]
    comp_edges = [component_edges(cp, src, r) for r in ref_dev]
    graph = {
        "scale": scale,
        "edge_factor": EDGE_FACTOR,
        "vertices": n,
        "input_edges": int(src.size),
        "csr_entries": int(col.size),
        "initiator": list(INITIATOR),
        "seed": SEED,
        "keys": keys.tolist(),
        "component_edges": comp_edges,
        "reached": [int((lv >= 0).sum()) for lv in ref_levels],
        "depth": [int(lv.max()) for lv in ref_levels],
        "generate_seconds": gen_seconds,
        "reference": "scipy.sparse.csgraph.breadth_first_order" if _has_scipy() else "numpy level-synchronous BFS",
        "reference_seconds": ref_seconds,
    }

    ks = kernels(gdn if gdn_error is None else None)
    g = _Graph(env, row, col)
    variants = []
    for mapping in MAPPINGS:
        variants += [
            (f"gpudyn_{mapping}", "gpudyn", mapping, CHECK_EVERY),
            (f"worst_{mapping}", "worst", mapping, 0),
            (f"worst_plain_{mapping}", "worst_plain", mapping, 0),
            (f"two_pass_{mapping}", "two_pass", mapping, 0),
        ]
    variants += [("cupy", "cupy", "", 0)] + [(f"gpudyn_every_level_{m}", "gpudyn", m, 1) for m in MAPPINGS]
    state = {"done": 0, "total": len(variants) + 1 + (0 if gdn_error else PAIRS_STEPS + LISTS_STEPS), "t0": time.time()}

    def make(kind: str, mapping: str, check_every: int, open_arrays: bool = True):
        if kind == "gpudyn":
            return GGArrayBFS(g, ks, mapping, check_every, open_arrays)
        if kind in ("worst", "worst_plain"):
            return WorstCase(g, ks, mapping, kind == "worst_plain")
        if kind == "two_pass":
            return TwoPass(g, ks, mapping)
        return PureCuPy(g)

    # Compile and load every kernel once (module loads and local memory settle
    # before any memory is measured).
    for _name, kind, mapping, every in variants:
        if kind == "gpudyn" and gdn_error:
            continue
        v = make(kind, mapping, every or CHECK_EVERY)
        v.search(int(keys[0]))
        if isinstance(v, GGArrayBFS):
            v.close()
    cp.cuda.Device().synchronize()
    _progress(ctx, state, "kernels compiled")

    results = {}
    for name, kind, mapping, every in variants:
        r = {"variant": kind, "mapping": mapping, "language": "numba" if kind != "cupy" else "cupy"}
        if kind == "gpudyn" and gdn_error:
            r.update(skipped=gdn_error, validated=False)
            failures.append(f"{name}: {gdn_error}")
            results[name] = r
            _progress(ctx, state, name)
            continue
        v = make(kind, mapping, every or CHECK_EVERY, open_arrays=False)
        free0 = _free_device_bytes(cp)
        if isinstance(v, GGArrayBFS):
            v.open()
            free_open = _free_device_bytes(cp)
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        v.search(int(keys[0]))  # warm-up
        v.host_reads = v.levels = 0
        v.ref_seconds = 0.0
        ms, errors = [], []
        for i, root in enumerate(keys):
            start.record()
            v.search(int(root))
            stop.record()
            stop.synchronize()
            ms.append(cp.cuda.get_elapsed_time(start, stop))
            err = validate(cp, ekeys, src, dst, int(root), g.parent, g.level, ref_dev[i])
            if any(err.values()):
                errors.append({"key": int(root), **err})
        r.update(
            ms=ms,
            median_ms=_median(ms),
            teps=[e / (t * 1e-3) for e, t in zip(comp_edges, ms)],
            host_reads_per_search=v.host_reads / len(keys),
            levels_per_search=v.levels / len(keys),
        )
        r["harmonic_mean_teps"] = _harmonic(r["teps"])
        if isinstance(v, GGArrayBFS):
            free1 = _free_device_bytes(cp)
            mem = v.memory()
            failed = int(v.failed[0])
            r.update(
                check_every=every,
                ref_ms_per_search=v.ref_seconds * 1e3 / len(keys),
                device_bytes_delta=int(free0 - free1),
                **mem,
                push_failures=failed,
            )
            r["device_bytes_delta_open"] = int(free0 - free_open)
            r["held_bytes"] = mem["allocated_bytes"] + BOOKKEEPING_BOUND * mem["lfvectors"]
            if failed or any(mem["status"]):
                errors.append({"push_failures": failed, "status": mem["status"]})
            v.close()
        else:
            r["held_bytes"] = int(v.held_bytes())
            if isinstance(v, WorstCase):
                r["check_every"] = CHECK_EVERY
        r["peak_bytes"] = r["held_bytes"]
        r["validated"] = not errors
        r["errors"] = errors[:8]
        if errors:
            failures.append(f"{name}: {errors[0]}")
        results[name] = r
        del v
        _progress(ctx, state, name)

    # CUDA C++: the same graph, keys and references through a file.
    cpp = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "graph.bin")
        write_graph_file(path, row_h, col_h, keys, ref_levels)
        del ref_levels
        try:
            raw = ctx.run_program("gpudyn_bench_apps", ["--graph", path])
        except Exception as e:  # the Python results stay; the run records why C++ did not
            raw = {"error": str(e)[-2000:], "variants": {}}
            failures.append(f"cpp: {str(e)[-300:]}")
    for name, s in raw.get("variants", {}).items():
        s = dict(s, language="cpp")
        s["teps"] = [e / (t * 1e-3) for e, t in zip(comp_edges, s["ms"])]
        s["harmonic_mean_teps"] = _harmonic(s["teps"])
        s["median_ms"] = _median(s["ms"])
        if not s.get("validated"):
            failures.append(f"cpp {name}: {s.get('errors')}")
        cpp[name] = s
    cpp_info = {k: v for k, v in raw.items() if k != "variants"}

    summarize(ctx, results, cpp, failures)
    # The second program (item 4b): its own targets, after the BFS's.
    if gdn_error:
        pairs = {"skipped": gdn_error}
    else:
        from .apps_pairs import run_pairs

        pairs = run_pairs(ctx, cp, gdn, lambda label: _progress(ctx, state, label))
        failures += [f"pairs {f}" for f in pairs["failures"]]
    # The Heap's program (issue 42, item 4): its targets last.
    if gdn_error:
        lists = {"skipped": gdn_error}
    else:
        from .apps_lists import run_lists

        lists = run_lists(ctx, cp, gdn, lambda label: _progress(ctx, state, label))
        failures += [f"lists {f}" for f in lists["failures"]]
    rows = table_rows(results, cpp)
    _plot(ctx, rows, graph)
    columns = ["language", "variant", "mapping", "median_ms", "GTEPS", "held_MiB", "host_reads", "levels", "validated"]
    table = markdown_table(rows, columns)
    table += (
        "\n\nmedian_ms: one search (CUDA events, median over the keys); GTEPS: harmonic mean over the keys of "
        "input edges in the component / time; held_MiB: device memory the variant holds beyond the graph and "
        "parent/level (gpudyn: its two arrays, between searches = peak; two_pass / cupy: the peak of a level); "
        "host_reads: reads the host waits for, per search"
    )
    return {
        "graph": graph,
        "check_every": CHECK_EVERY,
        "gpudyn_count": "ranged_size" if hasattr(gdn, "ranged_size") else "size",
        "block": BLOCK,
        "blocks_per_sm": BLOCKS_PER_SM,
        "sms": sms,
        "python": results,
        "cpp": cpp,
        "cpp_program": cpp_info,
        "pairs": pairs,
        "lists": lists,
        "validated": not failures,
        "failures": failures,
        "rows": rows,
        "table": table,
        "run_seconds": time.time() - t_all,
    }


def summarize(ctx, py: dict, cpp: dict, failures: list) -> None:
    """The issue-40 targets for each language and mapping, then 'every search validated'."""
    for lang, res in (("Numba", py), ("C++", cpp)):
        for mapping in MAPPINGS:
            gg = res.get(f"gpudyn_{mapping}")
            for base, goal, what in (
                ("worst", SPEED_WORST_GOAL, "preallocated worst-case buffer (warp-aggregated atomic counter)"),
                ("two_pass", SPEED_TWO_PASS_GOAL, "two-pass (count, scan, write)"),
            ):
                b = res.get(f"{base}_{mapping}")
                value = b["median_ms"] / gg["median_ms"] if gg and b and "median_ms" in gg and "median_ms" in b else 0.0
                t = ctx.target(f"BFS gpudyn vs {what}, {lang}, {mapping} per vertex", value, goal, "x", True)
                if value:
                    t["where"] = f"{gg['median_ms']:.4g} ms vs {b['median_ms']:.4g} ms"
                else:
                    t["where"] = "not measured: " + str((gg or {}).get("skipped") or "missing variant")
        held = [
            (res[f"gpudyn_{m}"]["held_bytes"], res[f"two_pass_{m}"]["held_bytes"], m)
            for m in MAPPINGS
            if "held_bytes" in res.get(f"gpudyn_{m}", {}) and "held_bytes" in res.get(f"two_pass_{m}", {})
        ]
        if held:
            gb, tb, m = max(held, key=lambda x: x[0] / max(1, x[1]))
            t = ctx.target(
                f"BFS device memory gpudyn / two-pass, {lang} (lower is better)",
                gb / max(1, tb),
                MEMORY_GOAL,
                "ratio",
                False,
            )
            t["where"] = f"worst mapping {m}: {gb / 2**20:.1f} MiB vs {tb / 2**20:.1f} MiB"
        else:  # -1: not measured (strict JSON has no infinity)
            t = ctx.target(
                f"BFS device memory gpudyn / two-pass, {lang} (lower is better)", -1.0, MEMORY_GOAL, "ratio", False
            )
            t.update(met=False, where="not measured")
    t = ctx.target(
        "every BFS validated (levels equal the reference, Graph500 rules) (1 = yes)",
        float(not failures),
        1.0,
        "bool",
        True,
    )
    if failures:
        t["where"] = "; ".join(failures)[:2000]


def table_rows(py: dict, cpp: dict) -> list[dict]:
    rows = []
    for lang, res in (("numba", py), ("cpp", cpp)):
        for name, r in res.items():
            if "median_ms" not in r:
                rows.append(
                    {
                        "language": r.get("language", lang),
                        "variant": name,
                        "mapping": r.get("mapping", ""),
                        "validated": False,
                        "median_ms": "",
                        "skipped": r.get("skipped", ""),
                    }
                )
                continue
            rows.append(
                {
                    "language": r.get("language", lang),
                    "variant": name,
                    "mapping": r.get("mapping", ""),
                    "median_ms": r["median_ms"],
                    "GTEPS": r["harmonic_mean_teps"] / 1e9,
                    "held_MiB": round(r.get("held_bytes", 0) / 2**20, 2),
                    "host_reads": r.get("host_reads_per_search", ""),
                    "levels": r.get("levels_per_search", ""),
                    "validated": bool(r.get("validated")),
                }
            )
    return rows


def _plot(ctx, rows: list[dict], graph: dict) -> None:
    plt = ctx.pyplot()
    if plt is None:
        return
    rows = [r for r in rows if isinstance(r.get("median_ms"), float)]
    if not rows:
        return
    dev = ctx.device.get("name", "GPU") if isinstance(ctx.device, dict) else "GPU"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 0.3 * len(rows) + 1.8))
    labels = [f"{r['language']} {r['variant']}" for r in rows]
    colors = [
        "C0"
        if "gpudyn" in r["variant"]
        else "gray"
        if r["variant"] == "cupy"
        else "C1"
        if "worst" in r["variant"]
        else "C2"
        for r in rows
    ]
    y = range(len(rows))
    ax1.barh(y, [r["median_ms"] for r in rows], color=colors)
    ax1.set_yticks(y, labels, fontsize=7)
    ax1.invert_yaxis()
    ax1.set(xlabel="ms per search (median over keys)")
    ax2.barh(y, [r["held_MiB"] for r in rows], color=colors)
    ax2.set_yticks(y, [""] * len(rows))
    ax2.invert_yaxis()
    ax2.set(xlabel="MiB held beyond graph and parent/level")
    fig.suptitle(
        f"BFS, Graph500 Kronecker scale {graph['scale']} ({graph['vertices']:,} vertices, "
        f"{graph['input_edges']:,} input edges), {dev}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(ctx.figure_path("apps_bfs.png"), dpi=110)
    plt.close(fig)
