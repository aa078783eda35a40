"""gpudyn under torch.distributed: each rank's GGArray, filled by a Numba kernel,
handed to NCCL collectives (docs/guides/distributed.md is this file, explained).

    torchrun --nproc_per_node=2 examples/distributed/push_allgather.py
    python examples/distributed/push_allgather.py       # one process: a world of size 1

Each rank (one process, one GPU, PyTorch's current stream for everything):
  1. a Numba kernel pushes a variable number of values (0 to 7 per thread, a
     different count per rank) into a GGArray;
  2. the sizes are all-gathered: size_async() writes the count into device
     memory, DLPack hands that to torch without a copy, NCCL gathers it;
  3. the values are all-gathered (all_gather_into_tensor, each rank's values
     padded to the largest count): flatten(out=...) writes them into the send
     tensor, stream-ordered, with no host wait;
  4. the same kernel pushes each value into the GGArray of the rank it is for;
     all_to_all_single exchanges the counts, then the values.
Both results are checked against the values computed on the host.  Needs a
GPU, PyTorch with NCCL and numba-cuda; without them it says so and exits 77.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0, set here unless already set).
"""

import os
import socket
import sys

import numpy as np

MAX_K = 7  # values a thread pushes at most (k(t) is 3 bits of a hash)
THREADS = 50_000  # rank r runs THREADS + 20_000 * r threads: the counts differ per rank


def k_host(t, rank):
    """k(t): the values thread t of `rank` pushes (the kernel's rule, on the host)."""
    h = (np.asarray(t, np.uint64) * np.uint64(2654435761) + np.uint64(rank) * np.uint64(40503)) & np.uint64(0xFFFFFFFF)
    return (h >> np.uint64(29)).astype(np.int64)


def values_host(rank):
    """Every value `rank` pushes: rank << 40 | t << 3 | j for j < k(t)."""
    t = np.arange(THREADS + 20_000 * rank, dtype=np.int64)
    k = k_host(t, rank)
    j = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
    return (np.int64(rank) << 40) | (np.repeat(t, k) << 3) | j


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    try:
        import gpudyn
        import gpudyn.numba as gdn
        import torch
        import torch.distributed as dist
        from numba import cuda

        gpudyn.device_count()
        if not (torch.cuda.is_available() and dist.is_nccl_available()):
            raise RuntimeError("PyTorch sees no CUDA device or has no NCCL")
    except Exception as e:  # ImportError, NoDeviceError, RuntimeError
        print(f"push_allgather.py: needs a GPU, PyTorch with NCCL and numba-cuda ({e}); skipped", file=sys.stderr)
        return 77

    # [setup]
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast (see the guide)
    if "RANK" not in os.environ:  # not under torchrun: a world of size 1
        os.environ.update(
            RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())
        )
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)  # this rank's GPU, for PyTorch, gpudyn ...
    cuda.select_device(local)  # ... and Numba (the same primary context)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    stream = torch.cuda.current_stream()  # every call below is ordered on it
    nb_stream = cuda.external_stream(stream.cuda_stream)  # the same stream, for Numba launches
    # [setup]

    # [kernels]
    @cuda.jit(device=True)
    def k_of(t, rank):  # k(t), as k_host
        h = (np.uint64(t) * np.uint64(2654435761) + np.uint64(rank) * np.uint64(40503)) & np.uint64(0xFFFFFFFF)
        return np.int64(h >> np.uint64(29))

    @cuda.jit
    def emit(out, n, rank):  # thread t pushes k(t) values
        t = cuda.grid(1)
        if t < n:
            for j in range(k_of(t, rank)):
                gdn.push_back(out, (np.int64(rank) << 40) | (np.int64(t) << 3) | j)

    @cuda.jit
    def emit_to(outs, n, rank, world):  # the same values, each into its rank's array
        t = cuda.grid(1)
        if t < n:
            for j in range(k_of(t, rank)):
                gdn.push_back(outs[(t + j) % world], (np.int64(rank) << 40) | (np.int64(t) << 3) | j)

    # [kernels]

    n = THREADS + 20_000 * rank
    blocks = (n + 255) // 256
    ok = True

    # [all_gather]
    out = gpudyn.GGArray(np.int64, stream=stream)  # on this rank's device and PyTorch's stream
    emit[blocks, 256, nb_stream](out.view_arg(), n, rank)

    count = torch.from_dlpack(out.size_async()).view(torch.int64)  # [1], on the GPU: no host wait
    sizes = torch.empty(world, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(sizes, count)
    sizes = sizes.tolist()  # the one host wait: the buffers' sizes
    width = max(sizes)
    send = torch.empty(width, dtype=torch.int64, device=dev)
    out.flatten(out=send, stream=stream)  # the elements into NCCL's buffer, no host wait
    gathered = torch.empty(world * width, dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(gathered, send)
    every = torch.cat([gathered[r * width : r * width + sizes[r]] for r in range(world)])
    # [all_gather]

    want = np.concatenate([values_host(r) for r in range(world)])
    good = np.array_equal(np.sort(every.cpu().numpy()), np.sort(want))
    print(
        f"rank {rank}: pushed {sizes[rank]}, all_gather of {world} ranks' {sum(sizes)} values: "
        f"{'ok' if good else 'WRONG'}"
    )
    ok &= good

    # [all_to_all]
    outs = [gpudyn.GGArray(np.int64, stream=stream) for _ in range(world)]  # one per destination rank
    emit_to[blocks, 256, nb_stream](tuple(a.view_arg() for a in outs), n, rank, world)

    send_counts = torch.cat([torch.from_dlpack(a.size_async()).view(torch.int64) for a in outs])
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)  # sizes first: one count to each rank
    send_splits, recv_splits = torch.stack([send_counts, recv_counts]).tolist()  # the one host wait
    send = torch.empty(sum(send_splits), dtype=torch.int64, device=dev)
    offsets = np.cumsum([0] + send_splits)
    for a, lo, hi in zip(outs, offsets[:-1], offsets[1:]):
        a.flatten(out=send[lo:hi], stream=stream)  # destination after destination
    recv = torch.empty(sum(recv_splits), dtype=torch.int64, device=dev)
    dist.all_to_all_single(recv, send, recv_splits, send_splits)
    # [all_to_all]

    every_value = np.concatenate([values_host(r) for r in range(world)])
    t, j = (every_value >> 3) & ((1 << 37) - 1), every_value & 7
    want = every_value[(t + j) % world == rank]
    good = np.array_equal(np.sort(recv.cpu().numpy()), np.sort(want))
    print(f"rank {rank}: all_to_all_single sent {send_splits}, received {recv_splits}: {'ok' if good else 'WRONG'}")
    ok &= good

    for a in [out] + outs:
        a.close()
    failed = torch.tensor([0 if ok else 1], device=dev)
    dist.all_reduce(failed)
    dist.destroy_process_group()
    if rank == 0:
        print("push_allgather.py:", "ok" if failed.item() == 0 else "FAILED")
    return 0 if failed.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
