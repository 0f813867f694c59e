// nvme_guest_probe: a known sequence of O_DIRECT reads and writes and one flush on an NVMe
// namespace, each logged as it is done, so a test can compare the NVMe commands the kernel issued
// with what was asked for. Built statically to run in the tools/nvme-guest initramfs.
//
// Usage: nvme_guest_probe [--dev /dev/nvme0n1] [--log FILE] [--random OPS --seed N]
//   --random OPS: instead of the fixed sequence, OPS reads and writes of 4 to 64 KiB (multiples
//   of 4 KiB) at random 4 KiB-aligned offsets in the first 8 MiB, about a third writes, with an
//   fsync after the first and the second half; deterministic for a given --seed. A read returns
//   the probe's pattern where the probe wrote and zeroes elsewhere (the namespace starts zeroed).
// Log lines (stdout, and FILE when given):
//   lba_size=N dev=PATH size=BYTES
//   op=write|read offset=BYTES bytes=BYTES     one per completed pwrite/pread
//   op=flush                                   one per completed fsync
// Exit status 0 when every call succeeded and every read returned the bytes written there.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum { kAlign = 4096, kMiB = 1 << 20 };

static FILE* log_file;

static void Log(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char line[256];
  vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  printf("%s\n", line);
  fflush(stdout);
  if (log_file) {
    fprintf(log_file, "%s\n", line);
    fflush(log_file);
  }
}

static int Fail(const char* what, const char* detail) {
  fprintf(stderr, "nvme_guest_probe: %s: %s\n", what, detail);
  return 1;
}

// The byte at absolute device offset `pos` as written by this probe: distinct per offset, so a
// read that returns the wrong block is caught.
static uint8_t PatternByte(uint64_t pos) { return (uint8_t)((pos * 2654435761u) >> 13); }

static long ReadLbaSize(const char* dev) {
  const char* name = strrchr(dev, '/');
  name = name ? name + 1 : dev;
  char path[256];
  snprintf(path, sizeof path, "/sys/block/%s/queue/logical_block_size", name);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  long lba_size = -1;
  if (fscanf(f, "%ld", &lba_size) != 1) lba_size = -1;
  fclose(f);
  return lba_size;
}

static int DoWrite(int fd, uint8_t* buf, uint64_t offset, size_t bytes) {
  for (size_t i = 0; i < bytes; i++) buf[i] = PatternByte(offset + i);
  ssize_t n = pwrite(fd, buf, bytes, (off_t)offset);
  if (n != (ssize_t)bytes) return Fail("pwrite", n < 0 ? strerror(errno) : "short write");
  Log("op=write offset=%llu bytes=%zu", (unsigned long long)offset, bytes);
  return 0;
}

// Reads back a range this probe wrote (`written` true) or any range (contents not checked).
static int DoRead(int fd, uint8_t* buf, uint64_t offset, size_t bytes, int written) {
  ssize_t n = pread(fd, buf, bytes, (off_t)offset);
  if (n != (ssize_t)bytes) return Fail("pread", n < 0 ? strerror(errno) : "short read");
  if (written) {
    for (size_t i = 0; i < bytes; i++) {
      if (buf[i] != PatternByte(offset + i))
        return Fail("pread", "data differs from what was written");
    }
  }
  Log("op=read offset=%llu bytes=%zu", (unsigned long long)offset, bytes);
  return 0;
}

static int DoFsync(int fd) {
  if (fsync(fd) != 0) return Fail("fsync", strerror(errno));
  Log("op=flush");
  return 0;
}

// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014):
// the same sequence for a seed on every build.
static uint64_t NextRandom(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

enum { kRandomBlocks = 8 * kMiB / kAlign, kRandomMaxBlocks = 16 };

// Checks a read of blocks [first, first + count): the pattern where written, zeroes elsewhere.
static int CheckRandomRead(const uint8_t* buf, uint64_t first, uint64_t count,
                           const uint8_t* written) {
  for (uint64_t b = 0; b < count; b++) {
    const uint8_t* block = buf + b * kAlign;
    const uint64_t base = (first + b) * kAlign;
    for (size_t i = 0; i < kAlign; i++) {
      const uint8_t want = written[first + b] ? PatternByte(base + i) : 0;
      if (block[i] != want) return Fail("pread", "data differs from what was written");
    }
  }
  return 0;
}

// --random: `ops` reads and writes at random offsets, an fsync after each half.
static int RunRandom(int fd, uint8_t* buf, long ops, uint64_t seed) {
  uint8_t written[kRandomBlocks] = {0};
  uint64_t state = seed;
  for (long i = 0; i < ops; i++) {
    const uint64_t count = 1 + NextRandom(&state) % kRandomMaxBlocks;
    const uint64_t first = NextRandom(&state) % (kRandomBlocks - count + 1);
    const int write = NextRandom(&state) % 3 == 0;
    if (write) {
      if (DoWrite(fd, buf, first * kAlign, count * kAlign)) return 1;
      memset(written + first, 1, count);
    } else {
      if (DoRead(fd, buf, first * kAlign, count * kAlign, 0) ||
          CheckRandomRead(buf, first, count, written))
        return 1;
    }
    if ((i + 1 == ops / 2 || i + 1 == ops) && DoFsync(fd)) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* dev = "/dev/nvme0n1";
  const char* log_path = NULL;
  long random_ops = 0;
  uint64_t seed = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--dev") == 0 && i + 1 < argc) {
      dev = argv[++i];
    } else if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) {
      log_path = argv[++i];
    } else if (strcmp(argv[i], "--random") == 0 && i + 1 < argc) {
      random_ops = strtol(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 10);
    } else {
      fprintf(stderr,
              "usage: nvme_guest_probe [--dev DEVICE] [--log FILE] [--random OPS --seed N]\n");
      return 2;
    }
  }
  if (random_ops < 0 || random_ops > 100000) return Fail("--random", "expected 0 to 100000");
  if (log_path && !(log_file = fopen(log_path, "w"))) return Fail(log_path, strerror(errno));

  long lba_size = ReadLbaSize(dev);
  if (lba_size <= 0) return Fail(dev, "cannot read queue/logical_block_size from sysfs");
  int fd = open(dev, O_RDWR | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return Fail(dev, strerror(errno));
  uint64_t size = 0;
  if (ioctl(fd, BLKGETSIZE64, &size) != 0) return Fail("BLKGETSIZE64", strerror(errno));
  if (size < 8 * kMiB) return Fail(dev, "namespace smaller than the 8 MiB the probe uses");
  Log("lba_size=%ld dev=%s size=%llu", lba_size, dev, (unsigned long long)size);

  uint8_t* buf = NULL;
  if (posix_memalign((void**)&buf, kAlign, kMiB) != 0) return Fail("posix_memalign", "failed");
  if (random_ops > 0) {
    Log("random ops=%ld seed=%llu", random_ops, (unsigned long long)seed);
    int failed = RunRandom(fd, buf, random_ops, seed);
    free(buf);
    close(fd);
    if (log_file) fclose(log_file);
    return failed;
  }

  // Offsets and sizes are multiples of 4096, valid for both LBA sizes; the 1 MiB read exceeds the
  // emulated controller's 512 KiB transfer limit, so the block layer splits it in two commands.
  int failed = DoWrite(fd, buf, 1 * kMiB, 8192) || DoRead(fd, buf, 1 * kMiB + 4096, 4096, 1) ||
               DoWrite(fd, buf, 2 * kMiB, 65536);
  if (!failed) failed = DoFsync(fd);
  if (!failed) failed = DoRead(fd, buf, 4 * kMiB, kMiB, 0);
  // With 512-byte blocks, one single-block read: its NVMe length field is 0 (0-based count).
  if (!failed && lba_size == 512) failed = DoRead(fd, buf, 1 * kMiB + 512, 512, 1);
  free(buf);
  close(fd);
  if (log_file) fclose(log_file);
  return failed;
}
