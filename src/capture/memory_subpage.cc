#include "capture/memory_subpage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/page_cache.h"
#include "capture/proc_snapshot.h"
#include "format/records.h"

namespace iotwin::capture {
namespace {

Result<UniqueFd> OpenThroughMapFiles(const PageBaseline& b) {
  std::string path = fmt::format("/proc/{}/map_files/{:x}-{:x}", b.tgid, b.vm_start, b.vm_end);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME));
  if (!fd.valid() && errno == EPERM) fd.Reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Status::FromErrno(errno, "opening " + path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno(errno, "fstat " + path);
  if (st.st_ino != b.ino || KernelDev(st.st_dev) != b.dev) {
    return Status::NotFound("{} is no longer the mapped file", path);
  }
  return fd;
}

}  // namespace

SubpageTracker::SubpageTracker(uint64_t max_bytes, Sink sink, Opener opener)
    : max_pages_(max_bytes / kSubpageSize),
      sink_(std::move(sink)),
      opener_(opener ? std::move(opener) : Opener(OpenThroughMapFiles)) {}

uint32_t SubpageTracker::DiffWords(const uint8_t* before, const uint8_t* after,
                                   uint64_t bitmap[8]) {
  uint32_t changed = 0;
  for (size_t i = 0; i < 8; i++) bitmap[i] = 0;
  for (size_t w = 0; w < kSubpageWords; w++) {
    uint64_t a, b;
    memcpy(&a, before + w * 8, 8);
    memcpy(&b, after + w * 8, 8);
    if (a != b) {
      bitmap[w / 64] |= 1ull << (w % 64);
      changed++;
    }
  }
  return changed;
}

SubpageTracker::Read SubpageTracker::ReadPage(int fd, uint64_t pgoff, uint8_t* out) const {
  // RWF_NOWAIT: a page that left the page cache is not read back from the device.
  struct iovec iov = {out, kSubpageSize};
  ssize_t n = preadv2(fd, &iov, 1, static_cast<off_t>(pgoff * kSubpageSize), RWF_NOWAIT);
  if (n < 0) return errno == EAGAIN ? Read::kNotCached : Read::kError;
  // Past the end of the file (truncated): the missing bytes read as zero, as the mapping shows.
  if (static_cast<size_t>(n) < kSubpageSize) memset(out + n, 0, kSubpageSize - n);
  return Read::kOk;
}

Status SubpageTracker::Emit(const PageKey& key, const Page& page, uint64_t ts,
                            const uint8_t* now) {
  iot_subpage rec;
  memset(&rec, 0, sizeof rec);
  InitRecord(&rec, IOT_REC_SUBPAGE);
  rec.changed_words = DiffWords(page.shadow.get(), now, rec.bitmap);
  if (rec.changed_words == 0) return Status::Ok();
  rec.tgid = page.tgid;
  rec.ts = ts;
  rec.ino = key.file.ino;
  rec.dev = key.file.dev;
  rec.pgoff = key.pgoff;
  stats_.records++;
  stats_.changed_words += rec.changed_words;
  return sink_(rec);
}

Status SubpageTracker::OnBaseline(const PageBaseline& b) {
  stats_.baselines++;
  FileKey fk{b.dev, b.ino};
  auto fit = files_.find(fk);
  if (fit == files_.end()) {
    File f;
    auto fd = opener_(b);
    if (fd.ok()) {
      f.fd = std::move(fd).value();
    } else {
      stats_.files_unopenable++;
    }
    fit = files_.emplace(fk, std::move(f)).first;
  }
  if (!fit->second.fd.valid()) return Status::Ok();

  PageKey pk{fk, b.pgoff};
  auto pit = pages_.find(pk);
  if (pit == pages_.end()) {
    if (pages_.size() >= max_pages_) {
      stats_.over_budget++;
      return Status::Ok();
    }
    pit = pages_.emplace(pk, Page{}).first;
    stats_.pages_max = std::max<uint64_t>(stats_.pages_max, pages_.size());
  }
  Page& page = pit->second;
  if (!b.data) {
    stats_.baselines_without_data++;
    page.tgid = b.tgid;
    return Status::Ok();  // the next sample takes the shadow
  }
  if (page.shadow) {
    // Written back and dirtied again since the last sample: the baseline is what was written,
    // so what changed until then is reported now.
    IOTWIN_RETURN_IF_ERROR(Emit(pk, page, b.ts, b.data));
  } else {
    page.shadow = std::make_unique<uint8_t[]>(kSubpageSize);
  }
  memcpy(page.shadow.get(), b.data, kSubpageSize);
  page.tgid = b.tgid;
  return Status::Ok();
}

Status SubpageTracker::Sample(uint64_t now_ns) {
  stats_.samples++;
  std::vector<uint8_t> buf(kSubpageSize);
  for (auto it = pages_.begin(); it != pages_.end();) {
    const PageKey& key = it->first;
    Page& page = it->second;
    int fd = files_.at(key.file).fd.get();
    // Clean before the comparison means every store up to now is in what we read; a store
    // after this point dirties the page again and brings a new baseline.
    auto state = CachestatRange(fd, key.pgoff * kSubpageSize, kSubpageSize);
    bool clean = state.ok() && state->dirty == 0 && state->writeback == 0;
    Read r = ReadPage(fd, key.pgoff, buf.data());
    if (r != Read::kOk) {
      if (r == Read::kNotCached) stats_.pages_evicted++;
      it = pages_.erase(it);
      continue;
    }
    if (!page.shadow) {
      page.shadow = std::make_unique<uint8_t[]>(kSubpageSize);
    } else {
      IOTWIN_RETURN_IF_ERROR(Emit(key, page, now_ns, buf.data()));
    }
    memcpy(page.shadow.get(), buf.data(), kSubpageSize);
    if (clean) {
      stats_.pages_cleaned++;
      it = pages_.erase(it);
      continue;
    }
    ++it;
  }
  return Status::Ok();
}

}  // namespace iotwin::capture
