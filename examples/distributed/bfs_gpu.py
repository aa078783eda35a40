"""The GPU backends of examples/distributed/bfs.py: one rank's expansion and
claims as Numba kernels on the rank's PyTorch stream (no host wait inside a
level: the driver's size exchange is the only one).  Warp per frontier vertex
(the faster mapping of the one-GPU BFS on Kronecker graphs, `gpudyn bench apps`).

  GpudynBackend   frontier: a GGArray(int64) read in place (gdn.at, bounded by
                  gdn.ranged_size); one GGArray(int64) per other rank, into which
                  the expansion pushes the items (v << 32) | u for that rank.  The
                  rank's own next frontier is the entry of its own rank in the same
                  tuple of arrays, so one push_back(outs[owner(v)], ...) serves
                  every destination (lanes with the same destination share one
                  reservation).  Sizes: one kernel writes gdn.size of every array
                  into the size row; the send buffer is the arrays flattened into
                  one torch tensor (flatten(out=...): stream-ordered, no host wait,
                  the one copy GGArray's buckets need before NCCL).
                  Why arrays per destination rather than one array with
                  destination tags: the push itself partitions the items, where a
                  tagged array needs a sort (or a count and scatter) by destination
                  before all_to_all_single takes it -- another pass over the items.
  TwoPassBackend  the same claims with contiguous buffers: a count kernel (claims,
                  counts per destination and frontier vertex, destination-major),
                  torch.cumsum, and a write kernel that re-reads the adjacency and
                  writes each claimed v where its offset says (the send buffer, or
                  the next frontier).  The received items are written after the
                  local ones, -1 where the owner's claim lost (the next expansion
                  skips those): the next frontier's size is then known on the host
                  from the size matrix, with no compaction pass.

Both keep parent[] for every vertex of the graph on each rank: the owned
entries are the BFS parents, the others this rank's "sent" marks (a vertex of
another rank is sent to its owner at most once per search by each rank).
A module of bfs.py, not a program: run bfs.py.
"""

from __future__ import annotations

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from gpudyn.bench.apps import BLOCK, BLOCKS_PER_SM, WARP
from numba import cuda

UNVISITED = np.int32(-1)
FULL = np.uint32(0xFFFFFFFF)
#: Ranks the two-pass count kernel keeps per-lane counters for (its local array).
MAX_WORLD = 16
_ranged_size = getattr(gdn, "ranged_size", gdn.size)  # one load where gdn has it


def kernel_arg(s):
    """A structure's Numba kernel argument: view_arg() (the gpudyn API that has
    gdn.ref_type), else the older .ref."""
    return s.view_arg() if hasattr(gdn, "ref_type") else s.ref


@cuda.jit(device=True)
def owner(v, n, world):
    """The rank owning v (bfs.Partition.owner)."""
    return np.int32(((np.int64(v) + 1) * world - 1) // n)


# ---- gpudyn ------------------------------------------------------------------------------
@cuda.jit
def seed_gpudyn(front, root):
    if cuda.grid(1) == 0:
        gdn.push_back(front, np.int64(root))


@cuda.jit
def expand_gpudyn(front, outs, row, col, parent, level, lo, n, world, rank, depth, failed):
    """Warp per frontier vertex u: claims u's unvisited neighbours v and pushes
    each into outs[owner(v)]: v itself for this rank (its next frontier),
    (v << 32) | u for another."""
    total = cuda.shared.array(1, np.int64)
    if cuda.threadIdx.x == 0:
        total[0] = np.int64(_ranged_size(front))
    cuda.syncthreads()
    count = total[0]
    lane = cuda.laneid
    i = np.int64(cuda.grid(1)) // WARP
    stride = np.int64(cuda.gridsize(1)) // WARP
    while i < count:
        u = np.int64(gdn.at(front, i))
        e = row[u - lo] + lane
        end = row[u - lo + 1]
        while e < end:
            v = col[e]
            if parent[v] == UNVISITED and cuda.atomic.cas(parent, v, UNVISITED, np.int32(u)) == UNVISITED:
                d = owner(v, n, world)
                item = np.int64(v)
                if d == rank:
                    level[v - lo] = depth + 1
                else:
                    item = (item << 32) | u
                if not gdn.push_back(outs[d], item):
                    cuda.atomic.add(failed, 0, 1)
            e += WARP
        i += stride


@cuda.jit
def sizes_gpudyn(outs, world, sizes):
    """sizes[d] = the elements of outs[d] (one thread per destination)."""
    d = cuda.threadIdx.x
    if d < world:
        sizes[d] = np.int64(gdn.size(outs[d]))


@cuda.jit
def claim_gpudyn(recv, m, nxt, parent, level, lo, depth, failed):
    """Thread per received item (v << 32) | u: the owner's claim; v joins the next frontier."""
    i = np.int64(cuda.grid(1))
    stride = np.int64(cuda.gridsize(1))
    while i < m:
        x = recv[i]
        v = np.int32(x >> 32)
        u = np.int32(x & 0xFFFFFFFF)
        if parent[v] == UNVISITED and cuda.atomic.cas(parent, v, UNVISITED, u) == UNVISITED:
            level[v - lo] = depth + 1
            if not gdn.push_back(nxt, np.int64(v)):
                cuda.atomic.add(failed, 0, 1)
        i += stride


# ---- two-pass ----------------------------------------------------------------------------
@cuda.jit
def count_two_pass(front, f, row, col, parent, level, lo, n, world, rank, depth, counts):
    """Warp per frontier vertex i: claims as expand_gpudyn, and writes the claims
    per destination d into counts[d * f + i] (destination-major: the scan gives
    each destination's items one contiguous run)."""
    c = cuda.local.array(MAX_WORLD, np.int32)
    lane = cuda.laneid
    i = np.int64(cuda.grid(1)) // WARP
    stride = np.int64(cuda.gridsize(1)) // WARP
    while i < f:
        for d in range(world):
            c[d] = 0
        u = np.int64(front[i])
        if u != UNVISITED:  # a received item whose claim lost
            e = row[u - lo] + lane
            end = row[u - lo + 1]
            while e < end:
                v = col[e]
                if parent[v] == UNVISITED and cuda.atomic.cas(parent, v, UNVISITED, np.int32(u)) == UNVISITED:
                    d = owner(v, n, world)
                    if d == rank:
                        level[v - lo] = depth + 1
                    c[d] += 1
                e += WARP
        for d in range(world):
            s = c[d]
            for off in (16, 8, 4, 2, 1):
                s += cuda.shfl_down_sync(FULL, s, off)
            if lane == 0:
                counts[d * f + i] = s
        i += stride


@cuda.jit
def write_two_pass(front, f, ends, counts, row, col, parent, lo, n, world, rank, seg_start, local, send, nxt):
    """Warp per frontier vertex i: re-reads u's adjacency and writes each v that u
    claimed (parent[v] == u) at its destination's offset: the next frontier for this
    rank (offsets from seg_start), the send buffer for the others (the local run
    left out)."""
    o = cuda.local.array(MAX_WORLD, np.int64)
    lane = cuda.laneid
    i = np.int64(cuda.grid(1)) // WARP
    stride = np.int64(cuda.gridsize(1)) // WARP
    while i < f:
        u = np.int64(front[i])
        if u != UNVISITED:
            for d in range(world):
                o[d] = ends[d * f + i] - counts[d * f + i]
            e0 = row[u - lo]
            end = row[u - lo + 1]
            while e0 < end:  # the same trip count in every lane
                e = e0 + lane
                v = np.int32(0)
                mine = False
                d = np.int32(-1)
                if e < end:
                    v = col[e]
                    mine = parent[v] == u
                    if mine:
                        d = owner(v, n, world)
                for dd in range(world):
                    b = cuda.ballot_sync(FULL, mine and d == dd)
                    if mine and d == dd:
                        g = o[dd] + cuda.popc(b & cuda.lanemask_lt())
                        if dd == rank:
                            nxt[g - seg_start] = v
                        elif dd < rank:
                            send[g] = (np.int64(v) << 32) | u
                        else:
                            send[g - local] = (np.int64(v) << 32) | u
                    o[dd] += cuda.popc(b)
                e0 += WARP
        i += stride


@cuda.jit
def claim_two_pass(recv, m, nxt, local, parent, level, lo, depth):
    """Thread per received item: the owner's claim; nxt[local + i] = v, or -1 when it lost."""
    i = np.int64(cuda.grid(1))
    stride = np.int64(cuda.gridsize(1))
    while i < m:
        x = recv[i]
        v = np.int32(x >> 32)
        u = np.int32(x & 0xFFFFFFFF)
        w = UNVISITED
        if parent[v] == UNVISITED and cuda.atomic.cas(parent, v, UNVISITED, u) == UNVISITED:
            level[v - lo] = depth + 1
            w = v
        nxt[local + i] = w
        i += stride


# ---- the backends --------------------------------------------------------------------------
class _Rank:
    """What both backends share: the rank's graph rows, parent and level on its
    device, its PyTorch stream (every kernel and every gpudyn call runs there)."""

    def __init__(self, graph, comm, part):
        import torch

        self.torch, self.comm, self.part = torch, comm, part
        self.rank, self.world, self.n = comm.rank, comm.world, part.n
        if self.world > MAX_WORLD:
            raise ValueError(f"bfs_gpu: {self.world} ranks, at most {MAX_WORLD} (MAX_WORLD)")
        self.lo = part.lo(self.rank)
        dev = comm.device
        self.stream = torch.cuda.current_stream(dev)
        self.nb = cuda.external_stream(self.stream.cuda_stream)  # Numba launches on PyTorch's stream
        self.row = torch.from_dlpack(graph.row).to(dev, torch.int64)
        self.col = torch.from_dlpack(graph.col).to(dev, torch.int32)
        self.parent = torch.empty(self.n, dtype=torch.int32, device=dev)
        self.level = torch.empty(part.size(self.rank), dtype=torch.int32, device=dev)
        self.failed = torch.zeros(1, dtype=torch.int32, device=dev)
        self.k = {name: self.arr(getattr(self, name)) for name in ("row", "col", "parent", "level", "failed")}
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.grid = sms * BLOCKS_PER_SM
        self.checks = {"push_failures": 0}

    def arr(self, t):
        """A Numba view of a torch tensor (no copy; torch's interface names no stream);
        an empty tensor is given as a one-element stand-in of its dtype (no kernel reads it)."""
        if t.numel() == 0:
            dummy = getattr(self, "_dummy", {})
            self._dummy = dummy
            if t.dtype not in dummy:
                dummy[t.dtype] = cuda.as_cuda_array(self.torch.zeros(1, dtype=t.dtype, device=t.device))
            return dummy[t.dtype]
        return cuda.as_cuda_array(t.detach())

    def grid_for(self, items: int, per_item: int = 1) -> int:
        return max(1, min(self.grid, (items * per_item + BLOCK - 1) // BLOCK))

    def reset(self, root):
        self.parent.fill_(-1)
        self.level.fill_(-1)
        if root is not None:
            self.parent[root] = root
            self.level[root - self.lo] = 0

    def result(self):
        failed = int(self.failed.item())
        if failed:
            self.checks["push_failures"] += failed
            self.failed.zero_()
        return self.parent[self.lo : self.part.lo(self.rank + 1)], self.level


class GpudynBackend(_Rank):
    def __init__(self, graph, comm, part):
        super().__init__(graph, comm, part)

        def new():
            return gpudyn.GGArray(np.int64, stream=self.stream)

        self.fronts = [new(), new()]
        self.remote = [None if d == self.rank else new() for d in range(self.world)]
        # Push arguments stay valid (a GGArray's pushes do not need a fresh view);
        # the frontier read with at() takes its view each level (view_arg after the pushes).
        self.push = [kernel_arg(a) for a in self.fronts]
        remote = [None if a is None else kernel_arg(a) for a in self.remote]
        self.outs = [tuple(self.push[p] if d == self.rank else remote[d] for d in range(self.world)) for p in (0, 1)]
        self.sizes = self.torch.zeros(self.world, dtype=self.torch.int64, device=comm.device)
        self.k_sizes = self.arr(self.sizes)

    def start(self, root):
        self.reset(root)
        for a in self.fronts + [a for a in self.remote if a is not None]:
            a.clear()
        self.cur = 0
        if root is not None:
            seed_gpudyn[1, 1, self.nb](self.push[0], np.int32(root))

    def expand(self, depth: int):
        k, nxt = self.k, 1 - self.cur
        front = self.fronts[self.cur]
        expand_gpudyn[self.grid, BLOCK, self.nb](
            kernel_arg(front),
            self.outs[nxt],
            k["row"],
            k["col"],
            k["parent"],
            k["level"],
            np.int64(self.lo),
            np.int64(self.n),
            np.int32(self.world),
            np.int32(self.rank),
            np.int32(depth),
            k["failed"],
        )
        front.clear()  # stream-ordered: after the kernel read it
        sizes_gpudyn[1, WARP, self.nb](self.outs[nxt], np.int32(self.world), self.k_sizes)
        return self.sizes

    def pack(self, m):
        row = m[self.rank]
        total = int(row.sum() - row[self.rank])
        send = self.torch.empty(total, dtype=self.torch.int64, device=self.comm.device)
        off = 0
        for d, c in enumerate(row):
            c = int(c)
            if d == self.rank or not c:
                continue
            self.remote[d].flatten(out=send[off : off + c], stream=self.stream)
            self.remote[d].clear()
            off += c
        return send

    def claim(self, recv, depth: int):
        nxt = 1 - self.cur
        if recv is not None and recv.numel():
            k, m = self.k, int(recv.numel())
            claim_gpudyn[self.grid_for(m), BLOCK, self.nb](
                self.arr(recv),
                np.int64(m),
                self.push[nxt],
                k["parent"],
                k["level"],
                np.int64(self.lo),
                np.int32(depth),
                k["failed"],
            )
        self.cur = nxt

    def result(self):
        for a in self.fronts + [a for a in self.remote if a is not None]:
            a.check()  # OutOfMemoryError if a push failed
        return super().result()

    def close(self):
        for a in self.fronts + [a for a in self.remote if a is not None]:
            a.close()


class TwoPassBackend(_Rank):
    def start(self, root):
        self.reset(root)
        torch = self.torch
        self.front = torch.full(
            (1 if root is not None else 0,), -1 if root is None else root, dtype=torch.int32, device=self.comm.device
        )

    def expand(self, depth: int):
        torch, k, f = self.torch, self.k, int(self.front.numel())
        self.f = f
        if f == 0:
            self.counts = self.ends = None
            return torch.zeros(self.world, dtype=torch.int64, device=self.comm.device)
        counts = torch.empty(self.world * f, dtype=torch.int32, device=self.comm.device)
        count_two_pass[self.grid_for(f, WARP), BLOCK, self.nb](
            self.arr(self.front),
            np.int64(f),
            k["row"],
            k["col"],
            k["parent"],
            k["level"],
            np.int64(self.lo),
            np.int64(self.n),
            np.int32(self.world),
            np.int32(self.rank),
            np.int32(depth),
            self.arr(counts),
        )
        ends = torch.cumsum(counts, 0, dtype=torch.int64)
        self.counts, self.ends = counts, ends
        last = ends.view(self.world, f)[:, -1]
        return torch.diff(last, prepend=last.new_zeros(1))

    def pack(self, m):
        torch, k, r = self.torch, self.k, self.rank
        row = m[r]
        self.local = local = int(row[r])
        seg_start = int(row[:r].sum())
        received = int(m[:, r].sum() - m[r, r])
        send = torch.empty(int(row.sum()) - local, dtype=torch.int64, device=self.comm.device)
        self.nxt = torch.empty(local + received, dtype=torch.int32, device=self.comm.device)
        if self.f:
            write_two_pass[self.grid_for(self.f, WARP), BLOCK, self.nb](
                self.arr(self.front),
                np.int64(self.f),
                self.arr(self.ends),
                self.arr(self.counts),
                k["row"],
                k["col"],
                k["parent"],
                np.int64(self.lo),
                np.int64(self.n),
                np.int32(self.world),
                np.int32(r),
                np.int64(seg_start),
                np.int64(local),
                self.arr(send),
                self.arr(self.nxt),
            )
        return send

    def claim(self, recv, depth: int):
        if recv is not None and recv.numel():
            k, m = self.k, int(recv.numel())
            claim_two_pass[self.grid_for(m), BLOCK, self.nb](
                self.arr(recv),
                np.int64(m),
                self.arr(self.nxt),
                np.int64(self.local),
                k["parent"],
                k["level"],
                np.int64(self.lo),
                np.int32(depth),
            )
        self.front = self.nxt

    def close(self):
        pass


if __name__ == "__main__":
    print("bfs_gpu.py: the GPU backends of bfs.py (run: python bfs.py)")
