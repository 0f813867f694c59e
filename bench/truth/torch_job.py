#!/usr/bin/python3
"""The PyTorch job of the ground-truth harness (optional: Debian's python3-torch and numpy).

    torch_job.py DIR [MiB]

torch.save of a state dict of MiB (default 200) MiB, np.save of 64 MiB of float32 layers,
both fsynced and evicted from the page cache (POSIX_FADV_DONTNEED: this file only, not the
whole cache), then torch.load, and np.load(mmap_mode="r") touching every page of the mapping
once: the mapped bytes truth.py expects are the whole file, rounded up to pages.
"""
import os
import sys

import numpy as np
import torch

PAGE = 4096


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    out = sys.argv[1]
    mib = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    os.makedirs(out, exist_ok=True)
    ckpt, layers = os.path.join(out, "ckpt.pt"), os.path.join(out, "layers.npy")
    per = (mib << 20) // 8 // 4  # eight float32 tensors
    torch.save({f"w{i}": torch.full((per,), float(i)) for i in range(8)}, ckpt)
    np.save(layers, np.arange((64 << 20) // 4, dtype=np.float32))
    for path in (ckpt, layers):
        evict(path)
    state = torch.load(ckpt)
    assert len(state) == 8
    mapped = np.load(layers, mmap_mode="r")
    # One element per page of the mapping (np.load maps from the file's start).
    step = PAGE // mapped.itemsize
    total = float(mapped[::step].sum()) + float(mapped[-1])
    print(f"touched {mapped.nbytes // PAGE} pages, sum {total:.0f}")


if __name__ == "__main__":
    main()
