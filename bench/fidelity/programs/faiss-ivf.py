#!/usr/bin/python3
"""A vector search with faiss (Debian python3-faiss): an IVF-Flat index built over random vectors
and written to a file, the file flushed and the page cache dropped (echo 3 >
/proc/sys/vm/drop_caches, as a benchmark of cold search does), the index read back memory-mapped
with faiss.IO_FLAG_MMAP, and a batch of queries searched through it. Fixed seeds; needs root.

  faiss-ivf.py prepare DIR SIZE   nothing to prepare (kept for run.sh's interface)
  faiss-ivf.py run DIR SIZE       the recorded workload
SIZE: full (200,000 × 64-d vectors, 256 lists, 2,000 queries) or
      ci (20,000 × 64-d, 64 lists, 200 queries)."""
import os
import sys

SIZES = {
    "full": {"vectors": 200_000, "lists": 256, "queries": 2_000},
    "ci": {"vectors": 20_000, "lists": 64, "queries": 200},
}
DIM = 64
NPROBE = 8
SEED = 1234


def run(d, s):
    import faiss
    import numpy as np
    rng = np.random.default_rng(SEED)
    xb = rng.standard_normal((s["vectors"], DIM), dtype=np.float32)
    xq = rng.standard_normal((s["queries"], DIM), dtype=np.float32)
    quantizer = faiss.IndexFlatL2(DIM)
    index = faiss.IndexIVFFlat(quantizer, DIM, s["lists"])
    # k-means on a sample of 100 vectors per list, 10 iterations: the I/O, not the training, is
    # what this scenario is about.
    index.cp.seed = SEED
    index.cp.niter = 10
    index.train(xb[:100 * s["lists"]])
    index.add(xb)
    path = os.path.join(d, "ivf.index")
    faiss.write_index(index, path)
    del index
    # Only clean pages are dropped: flush the index first.
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    index = faiss.read_index(path, faiss.IO_FLAG_MMAP)
    index.nprobe = NPROBE
    dist, ids = index.search(xq, 10)
    print(f"faiss-ivf: {int((ids >= 0).sum())} neighbours, mean distance {float(dist.mean()):.4f}")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("prepare", "run") or sys.argv[3] not in SIZES:
        sys.exit("usage: faiss-ivf.py prepare|run DIR full|ci")
    if sys.argv[1] == "run":
        run(sys.argv[2], SIZES[sys.argv[3]])


if __name__ == "__main__":
    main()
