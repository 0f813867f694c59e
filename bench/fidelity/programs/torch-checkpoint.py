#!/usr/bin/python3
"""PyTorch (Debian python3-torch) and NumPy storage I/O of a training/inference job: a state dict
checkpointed with torch.save and loaded back with torch.load, a weights file read layer by layer
through np.load(mmap_mode="r"), and a KV-cache offload loop (chunk files of 128 KiB written with
fsync, read back in a shuffled order). Fixed seeds.

  torch-checkpoint.py prepare DIR SIZE   write DIR/weights.npy (not recorded)
  torch-checkpoint.py run DIR SIZE       the recorded workload
SIZE: full (~100 MB state dict, 64 MiB weights in 16 layers, 256 chunks) or
      ci (~8 MB state dict, 8 MiB weights in 8 layers, 32 chunks).
The interpreter is Debian's /usr/bin/python3 (the #! line), whatever python3 is first on PATH."""
import os
import random
import sys

SIZES = {
    # tensors × floats per tensor, weight layers × floats per layer, KV chunks
    "full": {"tensors": 25, "floats": 1 << 20, "layers": 16, "layer_floats": 1 << 20, "chunks": 256},
    "ci": {"tensors": 8, "floats": 1 << 18, "layers": 8, "layer_floats": 1 << 18, "chunks": 32},
}
CHUNK_BYTES = 128 << 10
SEED = 1234


def prepare(d, s):
    import numpy as np
    rng = np.random.default_rng(SEED)
    w = rng.standard_normal((s["layers"], s["layer_floats"]), dtype=np.float32)
    np.save(os.path.join(d, "weights.npy"), w)


def run(d, s):
    import numpy as np
    import torch
    torch.manual_seed(SEED)
    # Checkpoint: save, then load back onto the CPU.
    state = {f"layer{i}.weight": torch.randn(s["floats"]) for i in range(s["tensors"])}
    ckpt = os.path.join(d, "checkpoint.pt")
    torch.save(state, ckpt)
    loaded = torch.load(ckpt, map_location="cpu")
    checksum = sum(float(t[0]) for t in loaded.values())
    # Memory-mapped weights: each layer copied out of the mapping (page faults on the file).
    w = np.load(os.path.join(d, "weights.npy"), mmap_mode="r")
    for layer in range(w.shape[0]):
        checksum += float(np.array(w[layer]).sum())
    # KV offload: each chunk written and fsynced, then all read back in a shuffled order.
    kv = os.path.join(d, "kv")
    os.makedirs(kv, exist_ok=True)
    payload = bytes(random.Random(SEED).getrandbits(8) for _ in range(4096)) * (CHUNK_BYTES // 4096)
    for i in range(s["chunks"]):
        fd = os.open(os.path.join(kv, f"chunk{i:05d}.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, payload)
        os.fsync(fd)
        os.close(fd)
    order = list(range(s["chunks"]))
    random.Random(SEED).shuffle(order)
    for i in order:
        fd = os.open(os.path.join(kv, f"chunk{i:05d}.bin"), os.O_RDONLY)
        if len(os.read(fd, CHUNK_BYTES)) != CHUNK_BYTES:
            sys.exit(f"chunk {i} short")
        os.close(fd)
    print(f"torch-checkpoint: checksum {checksum:.3f}")


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("prepare", "run") or sys.argv[3] not in SIZES:
        sys.exit("usage: torch-checkpoint.py prepare|run DIR full|ci")
    (prepare if sys.argv[1] == "prepare" else run)(sys.argv[2], SIZES[sys.argv[3]])


if __name__ == "__main__":
    main()
