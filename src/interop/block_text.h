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

}  // namespace iotwin::interop
