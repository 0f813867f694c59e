// Importers for block-layer traces: ftrace text of block:* events (trace_pipe format), blkparse's
// default text output, and the CHEOPS'25 bpftrace CSV (nsecs, rwbs, bytes, sector, nr_sector).
// All produce BLOCK records; sectors are 512-byte units whatever the device's LBA size.
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <unordered_map>

#include "base/checked_math.h"
#include "format/dev_number.h"
#include "format/records.h"
#include "interop/block_text.h"
#include "interop/importer.h"
#include "interop/text_util.h"

namespace iotwin::interop {

std::optional<uint32_t> ParseRwbs(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint32_t flags = 0;
  size_t i = 0;
  auto is_op = [](char c) { return c == 'R' || c == 'W' || c == 'D' || c == 'F' || c == 'N' || c == 'Z'; };
  if (s[0] == 'F' && s.size() > 1 && is_op(s[1])) {
    flags |= IOT_BLKF_PREFLUSH;
    i = 1;
  }
  switch (s[i]) {
    case 'R':
      flags |= IOT_BLKF_READ;
      i++;
      break;
    case 'W':
      i++;
      if (i < s.size() && s[i] == 'Z') {
        flags |= IOT_BLKF_WRITE_ZEROES;
        i++;
      } else {
        flags |= IOT_BLKF_WRITE;
      }
      break;
    case 'D':
      i++;
      if (i < s.size() && s[i] == 'E') {
        flags |= IOT_BLKF_SECURE_ERASE;
        i++;
      } else {
        flags |= IOT_BLKF_DISCARD;
      }
      break;
    case 'F':
      flags |= IOT_BLKF_FLUSH;
      i++;
      break;
    case 'N':
      flags |= IOT_BLKF_OTHER;
      i++;
      break;
    case 'Z':
      // Zone management: ZA ZR ZRA ZO ZC ZF.
      flags |= IOT_BLKF_OTHER;
      i++;
      while (i < s.size() && (s[i] == 'A' || s[i] == 'R' || s[i] == 'O' || s[i] == 'C' ||
                              s[i] == 'F')) {
        i++;
      }
      break;
    default:
      return std::nullopt;
  }
  for (; i < s.size(); i++) {
    switch (s[i]) {
      case 'F':
        flags |= IOT_BLKF_FUA;
        break;
      case 'A':
        flags |= IOT_BLKF_READAHEAD;
        break;
      case 'S':
        flags |= IOT_BLKF_SYNC;
        break;
      case 'M':
        flags |= IOT_BLKF_META;
        break;
      case 'B':  // barrier, printed by old kernels: a preflush in today's terms
        flags |= IOT_BLKF_PREFLUSH;
        break;
      default:
        return std::nullopt;
    }
  }
  return flags;
}

std::string RwbsText(uint32_t flags) {
  std::string s;
  if (flags & IOT_BLKF_PREFLUSH) s += 'F';
  if (flags & IOT_BLKF_WRITE_ZEROES) {
    s += "WZ";
  } else if (flags & IOT_BLKF_WRITE) {
    s += 'W';
  } else if (flags & IOT_BLKF_SECURE_ERASE) {
    s += "DE";
  } else if (flags & IOT_BLKF_DISCARD) {
    s += 'D';
  } else if (flags & IOT_BLKF_FLUSH) {
    s += 'F';
  } else if (flags & IOT_BLKF_READ) {
    s += 'R';
  } else {
    s += 'N';
  }
  if (flags & IOT_BLKF_FUA) s += 'F';
  if (flags & IOT_BLKF_READAHEAD) s += 'A';
  if (flags & IOT_BLKF_SYNC) s += 'S';
  if (flags & IOT_BLKF_META) s += 'M';
  return s;
}

std::optional<uint32_t> ParseDevT(std::string_view s) {
  size_t comma = s.find(',');
  if (comma == std::string_view::npos) comma = s.find(':');
  if (comma == std::string_view::npos) return std::nullopt;
  return ParseDevParts(Trim(s.substr(0, comma)), Trim(s.substr(comma + 1)));
}

uint64_t RequestIds::Begin(uint32_t dev, uint64_t sector) {
  auto key = std::make_pair(dev, sector);
  auto it = inflight_.find(key);
  if (it != inflight_.end()) return it->second;
  if (inflight_.size() >= kMaxInflight) {
    // Requests whose completion never came (lost events): forget them rather than grow.
    inflight_.clear();
    forgotten_++;
  }
  uint64_t id = next_++;
  inflight_.emplace(key, id);
  return id;
}

uint64_t RequestIds::End(uint32_t dev, uint64_t sector) {
  auto it = inflight_.find(std::make_pair(dev, sector));
  if (it == inflight_.end()) return 0;
  uint64_t id = it->second;
  inflight_.erase(it);
  return id;
}

uint64_t BioIds::Insert(uint32_t dev, uint64_t sector, uint64_t id) {
  if (inflight_.size() >= kMaxInflight) {
    // Bios whose request never completed (lost events): forget them rather than grow.
    inflight_.clear();
    forgotten_++;
  }
  inflight_[std::make_pair(dev, sector)] = id;
  return id;
}

uint64_t BioIds::Queue(uint32_t dev, uint64_t sector) { return Insert(dev, sector, next_++); }

uint64_t BioIds::Find(uint32_t dev, uint64_t sector) const {
  auto it = inflight_.find(std::make_pair(dev, sector));
  return it == inflight_.end() ? 0 : it->second;
}

BioIds::SplitIds BioIds::Split(uint32_t dev, uint64_t sector, uint64_t rest) {
  SplitIds ids;
  ids.parent = Find(dev, sector);
  ids.piece = next_++;
  if (ids.parent != 0 && rest != sector) Insert(dev, rest, ids.parent);
  Insert(dev, sector, ids.piece);
  return ids;
}

uint64_t BioIds::Remap(uint32_t from_dev, uint64_t from_sector, uint32_t dev, uint64_t sector) {
  uint64_t id = End(from_dev, from_sector);
  return id != 0 ? Insert(dev, sector, id) : 0;
}

uint64_t BioIds::End(uint32_t dev, uint64_t sector) {
  auto it = inflight_.find(std::make_pair(dev, sector));
  if (it == inflight_.end()) return 0;
  uint64_t id = it->second;
  inflight_.erase(it);
  return id;
}

void BioIds::EndRange(uint32_t dev, uint64_t sector, uint64_t last) {
  if (last < sector) return;  // callers saturate; a reversed range erases nothing
  inflight_.erase(inflight_.lower_bound(std::make_pair(dev, sector)),
                  inflight_.upper_bound(std::make_pair(dev, last)));
}

namespace {

// The rest of `s` after its first `n` whitespace-separated tokens.
std::string_view AfterTokens(std::string_view s, size_t n) {
  size_t i = 0;
  for (size_t k = 0; k < n; k++) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) i++;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') i++;
  }
  return s.substr(i);
}

void SetComm(iot_block* b, std::string_view comm) {
  size_t n = std::min(comm.size(), sizeof b->comm - 1);
  std::memset(b->comm, 0, sizeof b->comm);
  if (n > 0) std::memcpy(b->comm, comm.data(), n);
}

bool IsRequestStart(uint16_t phase) {
  return phase == IOT_BLK_INSERT || phase == IOT_BLK_ISSUE || phase == IOT_BLK_REQUEUE;
}

// Where the submitting task is meaningful: events raised in the submitter's context.
bool InSubmitterContext(uint16_t phase) {
  return phase != IOT_BLK_COMPLETE && phase != IOT_BLK_BIO_COMPLETE;
}

// "class,hint,level" -> the kernel's ioprio value (class << 13 | hint << 3 | level).
std::optional<uint64_t> ParseIoprio(std::string_view s) {
  size_t c1 = s.find(',');
  if (c1 == std::string_view::npos) return std::nullopt;
  size_t c2 = s.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return std::nullopt;
  std::string_view cls = s.substr(0, c1);
  uint64_t c;
  if (cls == "none") {
    c = 0;
  } else if (cls == "rt") {
    c = 1;
  } else if (cls == "be") {
    c = 2;
  } else if (cls == "idle") {
    c = 3;
  } else if (cls == "invalid") {
    c = 7;
  } else {
    return std::nullopt;
  }
  auto hint = ParseDec(s.substr(c1 + 1, c2 - c1 - 1));
  auto level = ParseDec(s.substr(c2 + 1));
  if (!hint || !level) return std::nullopt;
  return (c << 13) | ((*hint & 0x3ff) << 3) | (*level & 7);
}

// The part of a block event after "MAJ,MIN RWBS": numbers, "(CMD)", "+ NR" or "/ NEW", optional
// ioprio triple, "[COMM]" or "[ERR]", remap source. Shared by ftrace and blkparse.
struct BlockTail {
  std::optional<uint64_t> bytes;
  std::optional<uint64_t> sector;
  uint64_t nr_sector = 0;
  std::optional<uint64_t> new_sector;  // split
  std::optional<uint64_t> ioprio;
  std::string_view bracket;  // content of [..]: comm or error
  std::optional<uint32_t> remap_dev;
  std::optional<uint64_t> remap_sector;
};

std::optional<BlockTail> ParseTail(std::string_view s, bool bytes_first) {
  BlockTail t;
  std::vector<std::string_view> tok;
  // Tokens, keeping "(...)" and "[...]" whole (they may hold spaces).
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') i++;
    if (i >= s.size()) break;
    size_t start = i;
    char open = s[i];
    if (open == '(' || open == '[') {
      char close = open == '(' ? ')' : ']';
      size_t e = s.find(close, i);
      if (e == std::string_view::npos) return std::nullopt;
      i = e + 1;
    } else {
      while (i < s.size() && s[i] != ' ') i++;
    }
    tok.push_back(s.substr(start, i - start));
  }
  size_t k = 0;
  if (bytes_first && k + 1 < tok.size() && tok[k + 1].front() == '(') {
    t.bytes = ParseDec(tok[k]);
    if (!t.bytes) return std::nullopt;
    k++;
  }
  if (k < tok.size() && tok[k].front() == '(') k++;  // (CMD), empty on modern kernels
  if (k < tok.size() && ParseDec(tok[k])) {
    t.sector = ParseDec(tok[k]);
    k++;
    if (k + 1 < tok.size() && tok[k] == "+") {
      auto nr = ParseDec(tok[k + 1]);
      if (!nr) return std::nullopt;
      t.nr_sector = *nr;
      k += 2;
    } else if (k + 1 < tok.size() && tok[k] == "/") {
      t.new_sector = ParseDec(tok[k + 1]);
      if (!t.new_sector) return std::nullopt;
      k += 2;
    }
  }
  if (k < tok.size() && tok[k].front() != '[' && tok[k] != "<-" && tok[k].find(',') != std::string_view::npos) {
    t.ioprio = ParseIoprio(tok[k]);
    if (!t.ioprio) return std::nullopt;
    k++;
  }
  if (k < tok.size() && tok[k].front() == '[') {
    t.bracket = tok[k].substr(1, tok[k].size() - 2);
    k++;
  }
  if (k + 2 < tok.size() && tok[k] == "<-") {
    // "<- (MAJ,MIN) OLD_SECTOR"
    std::string_view d = tok[k + 1];
    if (d.size() < 3 || d.front() != '(') return std::nullopt;
    t.remap_dev = ParseDevT(d.substr(1, d.size() - 2));
    t.remap_sector = ParseDec(tok[k + 2]);
    if (!t.remap_dev || !t.remap_sector) return std::nullopt;
    k += 3;
  }
  // blkparse prints a request count after [COMM] for unplugs; nothing else may follow.
  if (k < tok.size() && !(k + 1 == tok.size() && ParseDec(tok[k]))) return std::nullopt;
  return t;
}

// Fills the phase-independent parts of a BLOCK record from a parsed tail.
void FillFromTail(iot_block* b, const BlockTail& t, bool bracket_is_error) {
  b->sector = t.sector.value_or(0);
  b->nr_sector = static_cast<uint32_t>(std::min<uint64_t>(t.nr_sector, UINT32_MAX));
  uint64_t bytes = t.bytes ? *t.bytes : SaturatingMul(t.nr_sector, kSectorBytes);
  b->bytes = static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX));
  if (t.new_sector) b->aux = *t.new_sector;
  if (t.remap_sector) b->aux = *t.remap_sector;
  if (t.ioprio && !t.new_sector && !t.remap_sector) b->aux = *t.ioprio;
  if (bracket_is_error) {
    if (auto e = ParseCInt(t.bracket)) b->error = static_cast<int32_t>(*e);
  } else {
    SetComm(b, t.bracket);
  }
}

// Request identities of flushes without data in text traces. Their sector is meaningless (the
// issue prints 0, the completion (sector_t)-1), so (dev, sector) cannot join them: a device's
// flushes are taken to complete in the order they were issued, the usual case (the flush
// machinery keeps one in flight per queue). Each flush is kept in RequestIds (which numbers all
// requests) under a key sector of its own, from 2^63 up: no request of a valid trace starts
// there (its byte offset would pass 2^64). Bounded like RequestIds.
class FlushIds {
 public:
  static constexpr size_t kMaxInflightPerDevice = 1 << 12;

  // A data-less flush request: the ones (dev, sector) cannot join.
  static bool Applies(const iot_block& b) {
    return (b.flags & (IOT_BLKF_FLUSH | IOT_BLKF_PREFLUSH)) && b.nr_sector == 0 && b.bytes == 0;
  }

  // Insert, issue or requeue: the id of the flush it continues, else of a new one.
  uint64_t Start(uint32_t dev, uint16_t phase, RequestIds* rqs) {
    std::deque<Entry>& q = inflight_[dev];
    if (phase != IOT_BLK_INSERT) {
      // An issue or requeue continues the oldest flush not issued yet (inserted or requeued);
      // a requeue without one puts back the oldest issued flush.
      Entry* e = Oldest(q, false);
      if (!e && phase == IOT_BLK_REQUEUE) e = Oldest(q, true);
      if (e) {
        e->issued = phase == IOT_BLK_ISSUE;
        return rqs->Begin(dev, e->key);
      }
    }
    if (q.size() >= kMaxInflightPerDevice) {
      for (const Entry& e : q) rqs->End(dev, e.key);  // completions went missing: forget them
      q.clear();
      forgotten_++;
    }
    q.push_back({next_key_++, phase == IOT_BLK_ISSUE});
    return rqs->Begin(dev, q.back().key);
  }

  // A completion: the oldest issued flush of the device (else the oldest at all); 0 when none.
  uint64_t Complete(uint32_t dev, RequestIds* rqs) {
    auto it = inflight_.find(dev);
    if (it == inflight_.end() || it->second.empty()) return 0;
    std::deque<Entry>& q = it->second;
    auto e = std::find_if(q.begin(), q.end(), [](const Entry& x) { return x.issued; });
    if (e == q.end()) e = q.begin();
    const uint64_t key = e->key;
    q.erase(e);
    return rqs->End(dev, key);
  }

  uint64_t forgotten() const { return forgotten_; }

 private:
  struct Entry {
    uint64_t key;
    bool issued;
  };
  static Entry* Oldest(std::deque<Entry>& q, bool issued) {
    auto it = std::find_if(q.begin(), q.end(),
                           [issued](const Entry& e) { return e.issued == issued; });
    return it == q.end() ? nullptr : &*it;
  }
  std::map<uint32_t, std::deque<Entry>> inflight_;
  uint64_t next_key_ = uint64_t{1} << 63;
  uint64_t forgotten_ = 0;
};

// Request and bio identities for text traces, which print none (RequestIds, BioIds), and the
// completion's "bytes left before" (aux), which they do not print either: each completion is
// taken to finish its request, as the kernel's block_rq_complete does unless it is partial.
void AssignIds(iot_block* b, const BlockTail& t, bool request_event, RequestIds* rqs,
               BioIds* bios, FlushIds* flushes) {
  if (request_event) {
    if (FlushIds::Applies(*b)) {
      if (IsRequestStart(b->phase)) b->rq_id = flushes->Start(b->dev, b->phase, rqs);
      if (b->phase == IOT_BLK_COMPLETE) {
        b->rq_id = flushes->Complete(b->dev, rqs);
        b->aux = b->bytes;
      }
    } else if (IsRequestStart(b->phase)) {
      b->rq_id = rqs->Begin(b->dev, b->sector);
    } else if (b->phase == IOT_BLK_COMPLETE) {
      b->rq_id = rqs->End(b->dev, b->sector);
      b->aux = b->bytes;
      bios->EndRange(b->dev, b->sector, LastOfRun(b->sector, b->nr_sector));
    } else if (b->phase == IOT_BLK_RQ_MERGE) {
      b->rq_id = rqs->End(b->dev, b->sector);  // merged into another: it completes no more
    }
    return;
  }
  switch (b->phase) {
    case IOT_BLK_QUEUE: b->bio_id = bios->Queue(b->dev, b->sector); break;
    case IOT_BLK_BACKMERGE:
    case IOT_BLK_FRONTMERGE:
    case IOT_BLK_GETRQ: b->bio_id = bios->Find(b->dev, b->sector); break;
    case IOT_BLK_BIO_COMPLETE: b->bio_id = bios->End(b->dev, b->sector); break;
    case IOT_BLK_SPLIT: {
      if (!t.new_sector) break;
      BioIds::SplitIds ids = bios->Split(b->dev, b->sector, *t.new_sector);
      b->bio_id = ids.piece;
      b->parent_id = ids.parent;
      // The piece is [sector, new_sector): the event prints no size.
      if (*t.new_sector > b->sector) {
        uint64_t sectors = std::min<uint64_t>(*t.new_sector - b->sector, UINT32_MAX / 512);
        b->nr_sector = static_cast<uint32_t>(sectors);
        b->bytes = static_cast<uint32_t>(sectors * 512);
      }
      break;
    }
    case IOT_BLK_REMAP:
      if (t.remap_dev && t.remap_sector) {
        b->bio_id = bios->Remap(*t.remap_dev, *t.remap_sector, b->dev, b->sector);
      }
      break;
    default: break;
  }
}

nlohmann::json BlockLayers(std::string_view source) {
  return {{"syscall", {{"enabled", false}, {"reason", std::string("not in ") + std::string(source)}}},
          {"block", {{"enabled", true}, {"reason", std::string("imported from ") + std::string(source)}}}};
}

// ---- ftrace ----------------------------------------------------------------------------------

struct FtraceEvent {
  std::string_view name;
  uint16_t phase;
  enum Format { kRq, kRqComplete, kBio, kBioComplete, kSplit, kRemap } format;
};

const FtraceEvent* FindFtraceEvent(std::string_view name) {
  static const FtraceEvent kEvents[] = {
      {"block_rq_issue", IOT_BLK_ISSUE, FtraceEvent::kRq},
      {"block_rq_insert", IOT_BLK_INSERT, FtraceEvent::kRq},
      {"block_rq_merge", IOT_BLK_RQ_MERGE, FtraceEvent::kRq},
      {"block_rq_complete", IOT_BLK_COMPLETE, FtraceEvent::kRqComplete},
      {"block_rq_error", IOT_BLK_COMPLETE, FtraceEvent::kRqComplete},
      {"block_rq_requeue", IOT_BLK_REQUEUE, FtraceEvent::kRqComplete},
      {"block_bio_queue", IOT_BLK_QUEUE, FtraceEvent::kBio},
      {"block_bio_backmerge", IOT_BLK_BACKMERGE, FtraceEvent::kBio},
      {"block_bio_frontmerge", IOT_BLK_FRONTMERGE, FtraceEvent::kBio},
      {"block_getrq", IOT_BLK_GETRQ, FtraceEvent::kBio},
      {"block_bio_bounce", 0, FtraceEvent::kBio},
      {"block_bio_complete", IOT_BLK_BIO_COMPLETE, FtraceEvent::kBioComplete},
      {"block_split", IOT_BLK_SPLIT, FtraceEvent::kSplit},
      {"block_bio_remap", IOT_BLK_REMAP, FtraceEvent::kRemap},
      {"block_rq_remap", IOT_BLK_REMAP, FtraceEvent::kRemap},
  };
  for (const auto& e : kEvents) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

class FtraceBlockImporter : public Importer {
 public:
  using Importer::Importer;

  nlohmann::json Meta() const override {
    return {{"tool", "iotwin import (ftrace block)"}, {"layers", BlockLayers("ftrace block events")}};
  }

  std::optional<uint64_t> MergeKey(std::string_view text) const override {
    auto p = Split(text);
    if (!p) return std::nullopt;
    return p->ts;
  }

  Status Line(std::string_view text, const LinePos& pos) override {
    std::string_view t = Trim(text);
    if (t.front() == '#') {
      stats_.comment_lines++;
      return Status::Ok();
    }
    if (StartsWith(t, "CPU:")) return LostLine(t, pos, text);
    auto p = Split(text);
    if (!p) return Unknown(pos, text, "not an ftrace event line (TASK-PID [CPU] FLAGS TS: EVENT:)");
    if (!clock_set_) {
      clock_set_ = true;
      sink_->SetClock({{"clock", "ftrace"}});
    }
    last_ts_ = p->ts;
    if (!lost_before_events_.empty()) IOTWIN_RETURN_IF_ERROR(AppendLostBeforeEvents(p->ts));
    const FtraceEvent* ev = FindFtraceEvent(p->event);
    if (!ev || ev->phase == 0) {
      stats_.skipped[std::string(p->event)]++;
      return Status::Ok();
    }
    auto toks = SplitWhitespace(p->payload);
    if (toks.size() < 2) return Unknown(pos, text, "short block event payload");
    auto dev = ParseDevT(toks[0]);
    auto flags = ParseRwbs(toks[1]);
    if (!dev || !flags) return Unknown(pos, text, "bad MAJ,MIN or RWBS");
    auto tail = ParseTail(AfterTokens(p->payload, 2), ev->format == FtraceEvent::kRq);
    if (!tail || !tail->sector) return Unknown(pos, text, "bad block event payload");
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = ev->phase;
    b.cpu = p->cpu;
    b.ts = p->ts;
    b.dev = *dev;
    b.flags = *flags;
    bool error_bracket = ev->format == FtraceEvent::kRqComplete || ev->format == FtraceEvent::kBioComplete;
    FillFromTail(&b, *tail, error_bracket);
    if (InSubmitterContext(b.phase)) {
      b.tid = p->pid;
      b.tgid = p->tgid;
      if (tail->bracket.empty()) SetComm(&b, p->task);
    }
    const bool request_event = ev->format == FtraceEvent::kRq ||
                               ev->format == FtraceEvent::kRqComplete ||
                               p->event == "block_rq_remap";
    AssignIds(&b, *tail, request_event, &ids_, &bio_ids_, &flush_ids_);
    if (p->event == "block_rq_error") stats_.counters["block_rq_error"]++;
    return sink_->Append(b);
  }

  Status Finish() override {
    if (ids_.forgotten()) stats_.counters["request_ids_forgotten"] += ids_.forgotten();
    if (bio_ids_.forgotten()) stats_.counters["bio_ids_forgotten"] += bio_ids_.forgotten();
    if (flush_ids_.forgotten()) stats_.counters["flush_ids_forgotten"] += flush_ids_.forgotten();
    if (!clock_set_) sink_->SetClock({{"clock", "ftrace"}});
    return AppendLostBeforeEvents(0);  // losses of a trace without events: at no known time
  }

 private:
  struct Parts {
    std::string_view task;
    uint32_t pid = 0, tgid = 0;
    uint16_t cpu = 0;
    uint64_t ts = 0;
    std::string_view event, payload;
  };

  // TASK-PID [(TGID)] [CPU] [FLAGS] SECS.USECS: EVENT: PAYLOAD
  static std::optional<Parts> Split(std::string_view line) {
    size_t from = 0;
    while (true) {
      size_t open = line.find('[', from);
      if (open == std::string_view::npos) return std::nullopt;
      from = open + 1;
      size_t close = line.find(']', open);
      if (close == std::string_view::npos) return std::nullopt;
      auto cpu = ParseDec(line.substr(open + 1, close - open - 1));
      if (!cpu || *cpu > 0xffff) continue;
      Parts p;
      p.cpu = static_cast<uint16_t>(*cpu);
      // After [CPU]: optional FLAGS, then "TS:" then "EVENT:".
      std::string_view rest = line.substr(close + 1);
      auto toks = SplitWhitespace(rest.substr(0, std::min<size_t>(rest.size(), 64)));
      size_t ti = 0;
      std::optional<uint64_t> ts;
      for (; ti < toks.size() && ti < 2; ti++) {
        if (toks[ti].size() > 1 && toks[ti].back() == ':') {
          ts = ParseSecondsToNs(toks[ti].substr(0, toks[ti].size() - 1));
          if (ts) break;
        }
      }
      if (!ts) continue;
      p.ts = *ts;
      size_t ts_end = rest.find(toks[ti]) + toks[ti].size();
      std::string_view ev = TrimLeft(rest.substr(ts_end));
      size_t colon = ev.find(':');
      if (colon == std::string_view::npos) continue;
      p.event = ev.substr(0, colon);
      p.payload = Trim(ev.substr(colon + 1));
      // Before [CPU]: TASK-PID and maybe (TGID).
      std::string_view left = TrimRight(line.substr(0, open));
      if (!left.empty() && left.back() == ')') {
        size_t lp = left.rfind('(');
        if (lp == std::string_view::npos) continue;
        if (auto tg = ParseDec(Trim(left.substr(lp + 1, left.size() - lp - 2)))) {
          p.tgid = static_cast<uint32_t>(*tg);
        }
        left = TrimRight(left.substr(0, lp));
      }
      size_t dash = left.rfind('-');
      if (dash == std::string_view::npos) continue;
      auto pid = ParseDec(left.substr(dash + 1));
      if (!pid || *pid > UINT32_MAX) continue;
      p.pid = static_cast<uint32_t>(*pid);
      p.task = TrimLeft(left.substr(0, dash));
      return p;
    }
  }

  Status LostLine(std::string_view t, const LinePos& pos, std::string_view text) {
    // CPU:3 [LOST 123 EVENTS]
    size_t sp = t.find(' ');
    auto cpu = ParseDec(t.substr(4, sp == std::string_view::npos ? sp : sp - 4));
    std::string_view rest = sp == std::string_view::npos ? "" : Trim(t.substr(sp));
    if (!cpu || !StartsWith(rest, "[LOST ") || !EndsWith(rest, " EVENTS]")) {
      return Unknown(pos, text, "bad 'CPU:N [LOST M EVENTS]' line");
    }
    auto n = ParseDec(rest.substr(6, rest.size() - 6 - 8));
    if (!n) return Unknown(pos, text, "bad lost count");
    uint64_t& total = lost_[static_cast<uint16_t>(*cpu)];
    total += *n;
    stats_.counters["lost_events"] += *n;
    iot_lost l{};
    InitRecord(&l, IOT_REC_LOST);
    l.source = IOT_SRC_BLOCK;
    l.cpu = static_cast<uint16_t>(*cpu);
    l.ts = last_ts_;
    l.count = total;
    if (!clock_set_) {
      // No event yet, so no time: the loss takes the first event's (0 is a time, and would
      // stretch the import back to the clock's origin). Counts are cumulative: one per CPU.
      lost_before_events_[l.cpu] = l;
      return Status::Ok();
    }
    return sink_->Append(l);
  }

  Status AppendLostBeforeEvents(uint64_t ts) {
    for (auto& [cpu, l] : lost_before_events_) {
      l.ts = ts;
      IOTWIN_RETURN_IF_ERROR(sink_->Append(l));
    }
    lost_before_events_.clear();
    return Status::Ok();
  }

  RequestIds ids_;
  BioIds bio_ids_;
  FlushIds flush_ids_;
  std::unordered_map<uint16_t, uint64_t> lost_;
  std::map<uint16_t, iot_lost> lost_before_events_;  // by CPU, until the first event's time
  uint64_t last_ts_ = 0;
  bool clock_set_ = false;
};

// ---- blkparse --------------------------------------------------------------------------------

class BlkparseImporter : public Importer {
 public:
  using Importer::Importer;

  nlohmann::json Meta() const override {
    return {{"tool", "iotwin import (blkparse)"}, {"layers", BlockLayers("blkparse output")}};
  }

  std::optional<uint64_t> MergeKey(std::string_view text) const override {
    auto t = SplitWhitespace(text);
    if (t.size() < 4) return std::nullopt;
    return ParseSecondsToNs(t[3]);
  }

  Status Line(std::string_view text, const LinePos& pos) override {
    std::string_view t = Trim(text);
    if (in_summary_ || StartsWith(t, "CPU") || StartsWith(t, "Total (") ||
        StartsWith(t, "Throughput") || StartsWith(t, "Events (") || StartsWith(t, "Skips:")) {
      // blkparse's closing per-CPU and per-device summaries: everything from here on.
      if (!in_summary_ && StartsWith(t, "CPU") && t.find('(') == std::string_view::npos) {
        return Unknown(pos, text, "not a blkparse event line");
      }
      in_summary_ = true;
      stats_.comment_lines++;
      return Status::Ok();
    }
    auto tok = SplitWhitespace(t);
    if (tok.size() < 6) return Unknown(pos, text, "short blkparse line");
    auto dev = ParseDevT(tok[0]);
    auto cpu = ParseDec(tok[1]);
    auto ts = ParseSecondsToNs(tok[3]);
    auto pid = ParseDec(tok[4]);
    if (!dev || !cpu || !ParseDec(tok[2]) || !ts || !pid || *pid > UINT32_MAX) {
      return Unknown(pos, text, "bad blkparse header (dev cpu seq time pid)");
    }
    if (!clock_set_) {
      clock_set_ = true;
      sink_->SetClock({{"clock", "relative"}});
    }
    std::string_view action = tok[5];
    uint16_t phase = 0;
    if (action.size() == 1) {
      switch (action[0]) {
        case 'Q': phase = IOT_BLK_QUEUE; break;
        case 'G': phase = IOT_BLK_GETRQ; break;
        case 'I': phase = IOT_BLK_INSERT; break;
        case 'D': phase = IOT_BLK_ISSUE; break;
        case 'C': phase = IOT_BLK_COMPLETE; break;
        case 'M': phase = IOT_BLK_BACKMERGE; break;
        case 'F': phase = IOT_BLK_FRONTMERGE; break;
        case 'X': phase = IOT_BLK_SPLIT; break;
        case 'A': phase = IOT_BLK_REMAP; break;
        case 'R': phase = IOT_BLK_REQUEUE; break;
        default: break;
      }
    }
    if (phase == 0) {
      // P plug, U/UT unplug, S sleep, B bounce, T timer, m messages: no BLOCK record.
      stats_.skipped[std::string("action ") + std::string(action)]++;
      return Status::Ok();
    }
    if (tok.size() < 7) return Unknown(pos, text, "no RWBS");
    auto flags = ParseRwbs(tok[6]);
    if (!flags) return Unknown(pos, text, "bad RWBS");
    auto tail = ParseTail(AfterTokens(t, 7), true);
    if (!tail) return Unknown(pos, text, "bad blkparse event tail");
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = phase;
    b.cpu = static_cast<uint16_t>(*cpu);
    b.ts = *ts;
    b.dev = *dev;
    b.flags = *flags;
    FillFromTail(&b, *tail, phase == IOT_BLK_COMPLETE);
    if (tail->bytes && !tail->sector) b.nr_sector = 0;  // passthrough: "BYTES (CDB)"
    if (InSubmitterContext(phase)) b.tid = static_cast<uint32_t>(*pid);
    const bool request_event = IsRequestStart(phase) || phase == IOT_BLK_COMPLETE;
    AssignIds(&b, *tail, request_event, &ids_, &bio_ids_, &flush_ids_);
    return sink_->Append(b);
  }

  Status Finish() override {
    if (ids_.forgotten()) stats_.counters["request_ids_forgotten"] += ids_.forgotten();
    if (bio_ids_.forgotten()) stats_.counters["bio_ids_forgotten"] += bio_ids_.forgotten();
    if (flush_ids_.forgotten()) stats_.counters["flush_ids_forgotten"] += flush_ids_.forgotten();
    if (!clock_set_) sink_->SetClock({{"clock", "relative"}});
    return Status::Ok();
  }

 private:
  RequestIds ids_;
  BioIds bio_ids_;
  FlushIds flush_ids_;
  bool in_summary_ = false;
  bool clock_set_ = false;
};

// ---- CHEOPS'25 bpftrace CSV -------------------------------------------------------------------

class BpftraceCsvImporter : public Importer {
 public:
  using Importer::Importer;

  nlohmann::json Meta() const override {
    return {{"tool", "iotwin import (bpftrace csv)"},
            {"layers", BlockLayers("bpftrace block_rq_issue CSV")}};
  }

  std::optional<uint64_t> MergeKey(std::string_view text) const override {
    size_t c = text.find(',');
    return ParseDec(Trim(text.substr(0, c)));
  }

  Status Line(std::string_view text, const LinePos& pos) override {
    std::string_view t = Trim(text);
    if (StartsWith(t, "Attaching ") || t.front() == '@' || StartsWith(t, "nsecs")) {
      stats_.comment_lines++;
      return Status::Ok();
    }
    std::string_view f[5];
    size_t n = 0, at = 0;
    for (;;) {
      size_t c = t.find(',', at);
      if (n == 5) return Unknown(pos, text, "more than 5 fields");
      f[n++] = Trim(t.substr(at, c == std::string_view::npos ? c : c - at));
      if (c == std::string_view::npos) break;
      at = c + 1;
    }
    if (n != 5) return Unknown(pos, text, "expected 'nsecs, rwbs, bytes, sector, nr_sector'");
    auto ts = ParseDec(f[0]);
    auto flags = ParseRwbs(f[1]);
    auto bytes = ParseDec(f[2]);
    auto sector = ParseDec(f[3]);
    auto nr = ParseDec(f[4]);
    if (!ts || !flags || !bytes || !sector || !nr || *bytes > UINT32_MAX || *nr > UINT32_MAX) {
      return Unknown(pos, text, "bad number or RWBS");
    }
    if (!clock_set_) {
      clock_set_ = true;
      sink_->SetClock({{"clock", "monotonic"}});
    }
    iot_block b{};
    InitRecord(&b, IOT_REC_BLOCK);
    b.phase = IOT_BLK_ISSUE;
    b.ts = *ts;
    b.sector = *sector;
    b.nr_sector = static_cast<uint32_t>(*nr);
    b.bytes = static_cast<uint32_t>(*bytes);
    b.flags = *flags;
    b.dev = options_.dev;
    b.rq_id = ++next_id_;
    return sink_->Append(b);
  }

  Status Finish() override {
    if (!clock_set_) sink_->SetClock({{"clock", "monotonic"}});
    return Status::Ok();
  }

 private:
  bool clock_set_ = false;
  uint64_t next_id_ = 0;
};

}  // namespace

std::unique_ptr<Importer> MakeFtraceBlockImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<FtraceBlockImporter>(sink, options);
}
std::unique_ptr<Importer> MakeBlkparseImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<BlkparseImporter>(sink, options);
}
std::unique_ptr<Importer> MakeBpftraceCsvImporter(RecordSink* sink, const ImportOptions& options) {
  return std::make_unique<BpftraceCsvImporter>(sink, options);
}

}  // namespace iotwin::interop
