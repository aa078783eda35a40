"""The CPU backend of examples/distributed/bfs.py: one rank's expansion and
claims in NumPy, over torch.distributed's gloo backend.  It follows the GPU
backends' rules exactly (the claim on parent[v], the "sent" mark on the
vertices of other ranks, the items (v << 32) | u in destination order), so the
driver's partition, exchange and termination logic is tested without a GPU
(tests/python/test_distributed.py).  Where several frontier vertices reach the
same v in one level, the first in frontier-then-adjacency order wins (on a GPU:
whichever compare-and-swap lands first; both are valid BFS trees).

A module of bfs.py, not a program: run bfs.py --backend cpu.
"""

from __future__ import annotations

import numpy as np

UNVISITED = -1


class CpuBackend:
    def __init__(self, graph, comm, part):
        import torch

        self.torch, self.comm, self.part = torch, comm, part
        self.rank, self.world = comm.rank, comm.world
        self.lo = part.lo(self.rank)
        self.row = np.asarray(graph.row, dtype=np.int64)
        self.col = np.asarray(graph.col, dtype=np.int64)
        self.parent = np.full(part.n, UNVISITED, dtype=np.int32)  # owned: BFS parent; others: "sent" mark
        self.level = np.full(part.size(self.rank), UNVISITED, dtype=np.int32)
        self.checks = {"items_sent": 0, "items_received": 0, "claimed_from_received": 0}

    def start(self, root):
        self.parent.fill(UNVISITED)
        self.level.fill(UNVISITED)
        self.front = np.zeros(0, dtype=np.int64)
        if root is not None:
            self.parent[root] = root
            self.level[root - self.lo] = 0
            self.front = np.array([root], dtype=np.int64)

    def expand(self, depth: int):
        """Claims the frontier's unvisited neighbours; returns the size row (int64 [world])."""
        f = self.front - self.lo
        starts, ends = self.row[f], self.row[f + 1]
        deg = ends - starts
        u = np.repeat(self.front, deg)
        # Adjacency entries of the frontier, frontier vertex after frontier vertex.
        idx = np.arange(int(deg.sum()), dtype=np.int64) - np.repeat(np.cumsum(deg) - deg, deg) + np.repeat(starts, deg)
        v = self.col[idx]
        fresh = self.parent[v] == UNVISITED
        u, v = u[fresh], v[fresh]
        _, first = np.unique(v, return_index=True)  # one claim per v: the first in order
        first.sort()
        u, v = u[first], v[first]
        self.parent[v] = u
        d = self.part.owner(v)
        mine = d == self.rank
        self.level[v[mine] - self.lo] = depth + 1
        self.next_local = v[mine]
        order = np.argsort(d[~mine], kind="stable")  # items in destination order
        self.items = ((v[~mine] << 32) | u[~mine])[order]
        row = np.bincount(d, minlength=self.world).astype(np.int64)
        self.checks["items_sent"] += int(self.items.size)
        return self.torch.from_numpy(row)

    def pack(self, m):
        """The send buffer: the items for the other ranks, destination after destination."""
        want = m[self.rank].copy()
        want[self.rank] = 0
        got = np.bincount(self.part.owner(self.items >> 32), minlength=self.world)
        assert np.array_equal(want, got), (want, got)
        assert m[self.rank, self.rank] == self.next_local.size
        return self.torch.from_numpy(self.items)

    def claim(self, recv, depth: int):
        """Claims the received items; the next frontier is the local claims then these."""
        claimed = np.zeros(0, dtype=np.int64)
        if recv is not None and recv.numel():
            x = recv.numpy()
            v, u = x >> 32, x & 0xFFFFFFFF
            assert np.all(self.part.owner(v) == self.rank), "an item reached a rank that does not own it"
            fresh = self.parent[v] == UNVISITED
            u, v = u[fresh], v[fresh]
            _, first = np.unique(v, return_index=True)
            first.sort()
            u, v = u[first], v[first]
            self.parent[v] = u
            self.level[v - self.lo] = depth + 1
            claimed = v
            self.checks["items_received"] += int(x.size)
            self.checks["claimed_from_received"] += int(v.size)
        self.front = np.concatenate([self.next_local, claimed])

    def result(self):
        """(parent, level) of the owned vertices, as tensors."""
        lo, hi = self.lo, self.part.lo(self.rank + 1)
        return self.torch.from_numpy(self.parent[lo:hi].copy()), self.torch.from_numpy(self.level.copy())

    def close(self):
        pass


if __name__ == "__main__":
    print("bfs_cpu.py: the CPU backend of bfs.py (run: python bfs.py --backend cpu)")
