#!/usr/bin/python3
"""A distributed checkpoint with mpi4py and NumPy, as data-parallel training writes one: every
rank saves its shard of the model state with numpy.save and an fsync, rank 0 writes the metadata
after a barrier, and after another barrier every rank loads a reshard (the second half of its own
shard and the first half of the next rank's, as a restart on another layout reads them).

    mpirun -np N checkpoint-mpi4py.py DIR SHARD_MB

Prints one JSON line per rank: its rank, the bytes it saved and loaded, the seconds of each step.
"""
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI


def shard_path(d, r, n):
    return os.path.join(d, f"shard-{r:05}-of-{n:05}.npy")


def save(d, rank, ranks, shard_mb):
    # Seeded per rank, so a load can check what it reads.
    state = np.random.default_rng(rank).standard_normal(shard_mb * (1 << 20) // 8)
    path = shard_path(d, rank, ranks)
    with open(path, "wb") as f:
        np.save(f, state)
        f.flush()
        os.fsync(f.fileno())
    return state.nbytes


def commit(d, ranks, shard_mb):
    meta = {"ranks": ranks, "shard_mb": shard_mb,
            "shards": [os.path.basename(shard_path(d, r, ranks)) for r in range(ranks)]}
    with open(os.path.join(d, "metadata.json"), "w") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())


def load(d, rank, ranks):
    loaded = 0
    for r, half in ((rank, 1), ((rank + 1) % ranks, 0)):
        a = np.load(shard_path(d, r, ranks), mmap_mode="r")
        lo, hi = (len(a) // 2, len(a)) if half else (0, len(a) // 2)
        part = np.array(a[lo:hi])  # reads the pages
        want = np.random.default_rng(r).standard_normal(len(a))[lo:hi]
        if not np.array_equal(part, want):
            raise SystemExit(f"rank {rank}: shard {r} does not hold what rank {r} saved")
        loaded += part.nbytes
    return loaded


def main():
    d, shard_mb = sys.argv[1], int(sys.argv[2])
    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    os.makedirs(d, exist_ok=True)
    t0 = time.monotonic()
    saved = save(d, rank, ranks, shard_mb)
    comm.Barrier()
    if rank == 0:
        commit(d, ranks, shard_mb)
    comm.Barrier()
    t1 = time.monotonic()
    loaded = load(d, rank, ranks)
    t2 = time.monotonic()
    print(json.dumps({"rank": rank, "ranks": ranks, "saved": saved, "loaded": loaded,
                      "save_s": round(t1 - t0, 6), "load_s": round(t2 - t1, 6)}), flush=True)


if __name__ == "__main__":
    main()
