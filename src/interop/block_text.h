// Block-trace vocabulary shared by the importers and exporters: RWBS strings, dev_t text, and
// request identities for text traces that have none.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace iotwin::interop {

// RWBS as blk_fill_rwbs prints it ("R", "WS", "FWS", "RA", "DE", "WZ", ...) -> IOT_BLKF_* bits;
// nullopt for characters outside the vocabulary.
std::optional<uint32_t> ParseRwbs(std::string_view rwbs);
// IOT_BLKF_* bits -> RWBS text.
std::string RwbsText(uint32_t flags);

// "8,0" or "8:0" -> kernel dev_t (major << 20 | minor).
std::optional<uint32_t> ParseDevT(std::string_view s);

// Gives the phases of one request a shared rq_id in traces that carry no request identity: a
// request is keyed by (dev, sector) from insert/issue to completion. Bounded: if completions go
// missing, the table is reset rather than grown past kMaxInflight.
class RequestIds {
 public:
  static constexpr size_t kMaxInflight = 1 << 20;
  uint64_t Begin(uint32_t dev, uint64_t sector);  // insert, issue, requeue: same id if in flight
  uint64_t End(uint32_t dev, uint64_t sector);    // complete: the id, 0 when unknown
  uint64_t forgotten() const { return forgotten_; }

 private:
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> inflight_;
  uint64_t next_ = 1;
  uint64_t forgotten_ = 0;
};

// Gives the bio events of traces that carry no bio identity a shared bio_id: a bio is keyed by
// (dev, sector) from its queue event. Merges, getrq and completion of the bio find it there; a
// split gives the piece it cuts off a new identity (its parent: the bio) and moves the bio to
// where its rest starts; a remap moves it to its new device and sector. A request's completion
// forgets the bios inside its sectors. Bounded like RequestIds.
class BioIds {
 public:
  static constexpr size_t kMaxInflight = 1 << 20;
  uint64_t Queue(uint32_t dev, uint64_t sector);       // a new identity
  uint64_t Find(uint32_t dev, uint64_t sector) const;  // 0 when unknown
  struct SplitIds {
    uint64_t piece = 0, parent = 0;  // parent 0 when the bio was not seen
  };
  // The bio at `sector` was cut at `rest`: the front piece [sector, rest) is a new bio.
  SplitIds Split(uint32_t dev, uint64_t sector, uint64_t rest);
  // The bio at (from_dev, from_sector) is now at (dev, sector): its id, 0 when unknown.
  uint64_t Remap(uint32_t from_dev, uint64_t from_sector, uint32_t dev, uint64_t sector);
  uint64_t End(uint32_t dev, uint64_t sector);  // bio completion: the id, 0 when unknown
  // A request completed sectors [sector, last] of `dev`: the bios it held are done.
  void EndRange(uint32_t dev, uint64_t sector, uint64_t last);
  uint64_t forgotten() const { return forgotten_; }

 private:
  uint64_t Insert(uint32_t dev, uint64_t sector, uint64_t id);
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> inflight_;
  uint64_t next_ = 1;
  uint64_t forgotten_ = 0;
};

}  // namespace iotwin::interop
