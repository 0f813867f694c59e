// KeepRequests: a correlation narrowed to some of its requests (a data scope, correlate.h).
#include <vector>

#include "correlate/correlate.h"

namespace iotwin::correlate {

size_t KeepRequests(Correlation* c, const std::function<bool(const Request&)>& keep) {
  std::vector<size_t> request_at(c->requests.size(), kNone);
  std::vector<Request> requests;
  for (size_t i = 0; i < c->requests.size(); i++) {
    if (!keep(c->requests[i])) continue;
    request_at[i] = requests.size();
    requests.push_back(std::move(c->requests[i]));
  }
  const size_t dropped = c->requests.size() - requests.size();
  if (dropped == 0) {
    c->requests = std::move(requests);
    return 0;
  }
  c->requests = std::move(requests);
  // The bios of the requests left out go with them.
  std::vector<size_t> bio_at(c->bios.size(), kNone);
  std::vector<Bio> bios;
  for (size_t i = 0; i < c->bios.size(); i++) {
    Bio& b = c->bios[i];
    if (b.request != kNone) {
      b.request = b.request < request_at.size() ? request_at[b.request] : kNone;
      if (b.request == kNone) continue;
    }
    bio_at[i] = bios.size();
    bios.push_back(std::move(b));
  }
  c->bios = std::move(bios);
  auto renumber = [](std::vector<size_t>& v, const std::vector<size_t>& at) {
    std::vector<size_t> out;
    for (size_t i : v)
      if (i < at.size() && at[i] != kNone) out.push_back(at[i]);
    v = std::move(out);
  };
  for (Request& q : c->requests) renumber(q.bios, bio_at);
  for (Syscall& s : c->syscalls) renumber(s.requests, request_at);
  for (AsyncRequest& a : c->asyncs) renumber(a.requests, request_at);
  return dropped;
}

}  // namespace iotwin::correlate
