#include "replay/async_contexts.h"

#include <algorithm>

#include "format/records.h"

namespace iotwin::replay {

using model::Op;
using model::OpKind;

bool SharedAsyncContext::TakePending(uint64_t token, PendingRequest* out) {
  auto it = pending_.find(token);
  if (it == pending_.end()) return false;
  *out = it->second;
  if (out->reaped_by_call) by_call_--;
  pending_.erase(it);
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  return true;
}

size_t SharedAsyncContext::PendingOf(uint32_t thread) const {
  size_t n = 0;
  for (const auto& entry : pending_) n += entry.second.thread == thread;
  return n;
}

std::vector<PendingRequest> SharedAsyncContext::TakePendingOf(uint32_t thread) {
  std::vector<PendingRequest> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.thread != thread) {
      ++it;
      continue;
    }
    if (it->second.reaped_by_call) by_call_--;
    out.push_back(it->second);
    it = pending_.erase(it);
  }
  pending_count_.store(pending_.size(), std::memory_order_relaxed);
  return out;
}

void SharedAsyncContext::DropAllPending() {
  pending_.clear();
  by_call_ = 0;
  pending_count_.store(0, std::memory_order_relaxed);
}

uint64_t SharedAsyncContext::CompletedBy(uint64_t t) const {
  return static_cast<uint64_t>(std::upper_bound(ends_.begin(), ends_.end(), t) - ends_.begin());
}

uint64_t SharedAsyncContext::UsesBefore(uint64_t t) const {
  return static_cast<uint64_t>(std::lower_bound(uses_.begin(), uses_.end(), t) - uses_.begin());
}

void AsyncContextTable::Init(const model::TraceModel& model) {
  std::call_once(once_, [&] {
    model_ = &model;
    const size_t n = model.async_contexts().size();
    std::vector<std::vector<uint64_t>> ends(n);
    kinds_.resize(n);
    std::vector<std::vector<uint16_t>> seen(n);
    for (const auto& th : model.threads()) {
      for (const Op& op : th.ops) {
        if (op.kind != OpKind::kAsyncSubmit || op.async_ctx >= n) continue;
        if (op.skip == model::Skip::kReplayable) ends[op.async_ctx].push_back(op.end);
        const uint16_t key = static_cast<uint16_t>((op.aio.engine << 8) | op.aio.opcode);
        auto& s = seen[op.async_ctx];
        if (std::find(s.begin(), s.end(), key) != s.end()) continue;
        s.push_back(key);
        kinds_[op.async_ctx].push_back(&op);
      }
    }
    for (uint32_t c = 0; c < n; c++) {
      const auto& ctx = model.async_contexts()[c];
      by_process_[ctx.process].push_back(c);
      if (ctx.engine == IOT_AIO_ENGINE_LIBAIO) aio_by_process_[ctx.process].push_back(c);
    }
    IndexRings(model);
    std::vector<std::vector<uint64_t>> uses(n);
    for (const auto& th : model.threads()) {
      for (const Op& op : th.ops) {
        const uint32_t c = UseContext(op);
        if (c < n) uses[c].push_back(op.ts);
      }
    }
    contexts_.reserve(n);
    for (uint32_t c = 0; c < n; c++) {
      std::sort(ends[c].begin(), ends[c].end());
      std::sort(uses[c].begin(), uses[c].end());
      first_use_.push_back(uses[c].empty() ? UINT64_MAX : uses[c].front());
      contexts_.push_back(
          std::make_shared<SharedAsyncContext>(std::move(ends[c]), std::move(uses[c])));
    }
  });
}

// A ring's descriptor is known from its setup (when the model linked the setup to the context)
// and from every io_uring_enter that carried requests of the context.
void AsyncContextTable::IndexRings(const model::TraceModel& model) {
  const size_t n = model.async_contexts().size();
  auto note = [&](uint32_t process, int64_t fd, uint64_t ts, uint32_t ctx) {
    if (fd < 0 || fd > INT32_MAX || ctx >= n) return;
    rings_[(static_cast<uint64_t>(process) << 32) | static_cast<uint64_t>(fd)].emplace_back(ts, ctx);
  };
  for (const auto& th : model.threads()) {
    for (size_t i = 0; i < th.ops.size(); i++) {
      const Op& op = th.ops[i];
      if (op.kind != OpKind::kSyscall) continue;
      if (op.sc.op == IOT_OP_IO_URING_SETUP && op.async_ctx != model::kNone) {
        note(op.process, op.sc.ret, op.ts, op.async_ctx);
      } else if (op.sc.op == IOT_OP_IO_URING_ENTER) {
        // The requests a call carried sit next to it in its thread (model: batches).
        const Op* before = i > 0 ? &th.ops[i - 1] : nullptr;
        const Op* after = i + 1 < th.ops.size() ? &th.ops[i + 1] : nullptr;
        if (before && before->kind == OpKind::kAsyncSubmit) {
          note(op.process, op.sc.fd, op.ts, before->async_ctx);
        } else if (after && after->kind == OpKind::kAsyncSubmit && after->ts <= op.end) {
          note(op.process, op.sc.fd, op.ts, after->async_ctx);
        }
      }
    }
  }
  for (auto& entry : rings_) {
    auto& v = entry.second;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end(),
                        [](const auto& a, const auto& b) { return a.second == b.second; }),
            v.end());
  }
}

void AsyncContextTable::CloseAll() {
  for (auto& c : contexts_) {
    MutexLock lock(&c->mu);
    if (!c->closed()) {
      c->DropAllPending();
      c->Close();
    }
  }
}

std::shared_ptr<SharedAsyncContext> AsyncContextTable::Get(uint32_t index) const {
  return index < contexts_.size() ? contexts_[index] : nullptr;
}

uint32_t AsyncContextTable::RingOf(uint32_t process, const Op& op) const {
  if (op.sc.fd < 0) return model::kNone;
  auto it = rings_.find((static_cast<uint64_t>(process) << 32) | static_cast<uint64_t>(op.sc.fd));
  if (it == rings_.end() || it->second.empty()) return model::kNone;
  const auto& v = it->second;
  const uint64_t by = op.end == UINT64_MAX ? op.ts : op.end;
  auto later = std::upper_bound(v.begin(), v.end(), by,
                                [](uint64_t t, const auto& e) { return t < e.first; });
  return later == v.begin() ? v.front().second : std::prev(later)->second;
}

uint32_t AsyncContextTable::SetupContext(const Op& op) const {
  if (op.async_ctx != model::kNone) return op.async_ctx;
  if (op.kind != OpKind::kSyscall || op.sc.ret < 0) return model::kNone;
  uint32_t best = model::kNone;
  auto consider = [&](uint32_t c) {
    if (c < first_use_.size() && first_use_[c] >= op.ts &&
        (best == model::kNone || first_use_[c] < first_use_[best])) {
      best = c;
    }
  };
  if (op.sc.op == IOT_OP_IO_SETUP) {
    for (uint32_t c : AioContextsOf(op.process)) {
      if (model_->async_contexts()[c].ctx == op.sc.aux) consider(c);
    }
  } else if (op.sc.op == IOT_OP_IO_URING_SETUP && op.sc.ret <= INT32_MAX) {
    auto it = rings_.find((static_cast<uint64_t>(op.process) << 32) |
                          static_cast<uint64_t>(op.sc.ret));
    if (it != rings_.end()) {
      for (const auto& entry : it->second) consider(entry.second);
    }
  }
  return best;
}

uint32_t AsyncContextTable::UseContext(const Op& op) const {
  if (op.skip != model::Skip::kReplayable) return model::kNone;
  if (op.kind == OpKind::kAsyncSubmit) return op.async_ctx;
  if (op.kind != OpKind::kSyscall) return model::kNone;
  const uint16_t code = op.sc.op;
  if (code == IOT_OP_IO_URING_ENTER || code == IOT_OP_IO_URING_REGISTER) {
    return RingOf(op.process, op);
  }
  if (code == IOT_OP_IO_GETEVENTS || code == IOT_OP_IO_PGETEVENTS) {
    const std::vector<uint32_t>& aio = AioContextsOf(op.process);
    return aio.size() == 1 ? aio.front() : model::kNone;
  }
  return model::kNone;
}

const std::vector<uint32_t>& AsyncContextTable::AioContextsOf(uint32_t process) const {
  auto it = aio_by_process_.find(process);
  return it == aio_by_process_.end() ? none_ : it->second;
}

const std::vector<uint32_t>& AsyncContextTable::ContextsOf(uint32_t process) const {
  auto it = by_process_.find(process);
  return it == by_process_.end() ? none_ : it->second;
}

const std::vector<const Op*>& AsyncContextTable::RequestKinds(uint32_t index) const {
  static const std::vector<const Op*> kNoKinds;
  return index < kinds_.size() ? kinds_[index] : kNoKinds;
}

}  // namespace iotwin::replay
