// RenderLayersText(): the layers report model (LayersReport()) as text tables, one section per
// part of the model. Every value is read with a default: the model may come from a damaged trace.
#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "base/bytes_text.h"
#include "base/json_fields.h"
#include "correlate/layers_report.h"

namespace iotwin::correlate {
namespace {

using nlohmann::json;

std::string Ns(const json& v) {
  if (!v.is_number()) return "-";
  double ns = v.get<double>();
  if (ns < 10'000) return fmt::format("{:.1f}us", ns / 1e3);
  if (ns < 10'000'000) return fmt::format("{:.0f}us", ns / 1e3);
  return fmt::format("{:.1f}ms", ns / 1e6);
}

std::string Bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.1f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

void LayerTable(std::string& out, const json& layers, const std::string& indent) {
  out += fmt::format("{}{:<46} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}\n", indent, "layer", "n", "mean",
                     "p50", "p90", "p99", "max");
  for (const json& l : layers) {
    out += fmt::format("{}{:<46} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}\n", indent,
                       l.value("title", ""), l.value("n", 0ull), Ns(l.value("mean_ns", json())),
                       Ns(l.value("p50_ns", json())), Ns(l.value("p90_ns", json())),
                       Ns(l.value("p99_ns", json())), Ns(l.value("max_ns", json())));
  }
}

// Which layers were captured, and how many requests are linked to a cause.
void LayersAndCoverageText(std::string& out, const json& r) {
  out += "== Layers: what each application I/O became on the way down ==\n";
  for (const auto& [name, l] : r["layers"].items()) {
    out += fmt::format("  {:<7} {:<3} {}\n", name,
                       json_fields::GetBool(l, "enabled", false) ? "on" : "off",
                       json_fields::GetString(l, "reason"));
  }
  if (r.contains("damage")) {
    out += fmt::format("  damage  {} (the layers of what could be read)\n",
                       json_fields::GetString(r, "damage"));
  }
  if (const json* scope = json_fields::Object(r, "scope")) {
    out += fmt::format("  scope   {}; left out {} requests\n",
                       json_fields::GetString(*scope, "description"),
                       json_fields::GetUint(*scope, "left_out/requests", 0));
  }
  if (const json* hosts = json_fields::Array(r, "hosts/kept")) {
    std::string names;
    for (const json& h : *hosts) names += (names.empty() ? "" : ", ") + h.get<std::string>();
    out += fmt::format("  hosts   {} (requests submitted there){}\n", names,
                       r.contains("scope") ? "" : fmt::format("; left out {} requests",
                                                             json_fields::GetUint(r, "hosts/left_out/requests", 0)));
  }
  const json& cov = r["coverage"];
  out += fmt::format(
      "\nRequests: {} ({} linked to a cause, {} unattributed); {} bios, {} NVMe "
      "commands ({} not joined); lost: block {}, nvme {}, sched {}\n",
      cov.value("requests", 0ull), cov.value("linked", 0ull), cov.value("unattributed", 0ull),
      cov.value("bios", 0ull), cov.value("nvme_commands", 0ull), cov.value("nvme_unjoined", 0ull),
      cov["lost"].value("block", 0ull), cov["lost"].value("nvme", 0ull), cov["lost"].value("sched", 0ull));
  for (const auto& [cause, n] : cov["by_cause"].items()) {
    out += fmt::format("  {:<14} {}\n", cause, n.get<uint64_t>());
  }
  for (const auto& [why, n] : cov["unattributed_reasons"].items()) {
    out += fmt::format("  unattributed: {} x {}\n", n.get<uint64_t>(), why);
  }
}

void LatencyText(std::string& out, const json& lat) {
  out += fmt::format(
      "\nPer-request latency by layer ({} requests of calls and async requests; "
      "each row's parts sum to its call's duration: {} within max({} ns, {}%), "
      "largest deviation {})\n",
      lat.value("requests", 0ull), lat.value("within_tolerance", 0ull), lat["tolerance"].value("ns", 0ull),
      lat["tolerance"].value("fraction", 0.0) * 100, Ns(lat.value("max_deviation_ns", json())));
  LayerTable(out, lat["layers"], "  ");
  for (const auto& [op, t] : lat["by_op"].items()) {
    out += fmt::format("  -- {}\n", op);
    LayerTable(out, t, "  ");
  }
  for (const json& f : lat["by_file"]) {
    out += fmt::format("  -- file {} ({} requests)\n", f.value("file", ""), f.value("requests", 0ull));
    LayerTable(out, f["layers"], "  ");
  }
}

void BttText(std::string& out, const json& btt) {
  out += "\nBlock layer in btt terms (all followed requests)\n";
  out += fmt::format("  {:<6} {:>7} {:>9} {:>9} {:>9} {:>8}\n", "metric", "n", "min", "avg", "max",
                     "% Q2C");
  for (const json& b : btt) {
    out += fmt::format(
        "  {:<6} {:>7} {:>9} {:>9} {:>9} {:>8}\n", b.value("metric", ""), b.value("n", 0ull),
        Ns(b.value("min_ns", json())), Ns(b.value("mean_ns", json())),
        Ns(b.value("max_ns", json())),
        b.contains("pct_of_q2c") ? fmt::format("{:.1f}", b["pct_of_q2c"].get<double>()) : "");
  }
}

void SplitsAndMergesText(std::string& out, const json& sp) {
  out += fmt::format(
      "\nSplits and merges: {} calls became several requests (at most {}); {} "
      "pieces split by the block layer\n",
      sp.value("calls_split", 0ull), sp.value("max_requests_per_call", 0ull),
      sp.value("kernel_split_pieces", 0ull));
  for (const auto& [why, n] : sp["kernel_split_reasons"].items()) {
    out += fmt::format("  split because of {}: {} pieces\n", why, n.get<uint64_t>());
  }
  for (const json& cj : sp["calls"]) {
    out += fmt::format(
        "  {} tid {} {} bytes at {} -> {} bios from the file system, {} split "
        "pieces, {} requests of {}..{}\n",
        cj.value("op", ""), cj.value("tid", 0ull), cj.value("length", 0ull), cj.value("offset", 0ull),
        cj.value("bios_built_by_fs", 0ull), cj.value("kernel_split_pieces", 0ull),
        cj.value("requests", 0ull), Bytes(cj.value("request_bytes_min", 0ull)),
        Bytes(cj.value("request_bytes_max", 0ull)));
  }
  out += fmt::format("  application-side pre-split: {} runs ({} calls)\n",
                     sp.value("app_presplit_runs", 0ull), sp.value("app_presplit_calls", 0ull));
  for (const json& run : sp["app_presplit"]) {
    out += fmt::format("    tid {} {}: {}\n", run.value("tid", 0ull), run.value("file", ""),
                       run.value("suggestion", ""));
  }
  const json& m = sp["merges"];
  out += fmt::format(
      "  merges: {} bios merged into requests, {} requests of several bios, {} "
      "requests merged into others\n",
      m.value("bios_merged", 0ull), m.value("requests_with_several_bios", 0ull),
      m.value("requests_merged_into_others", 0ull));
}

void AmplificationText(std::string& out, const json& amp) {
  auto amp_line = [&](const char* dir) {
    const json& d = amp[dir];
    std::string s =
        fmt::format("  {:<5} application {}  block bios {}  device requests {}", dir,
                    Bytes(d.value("application", 0ull)), Bytes(d.value("block_bios", 0ull)),
                    Bytes(d.value("device_requests", 0ull)));
    if (d.contains("nvme_commands")) s += "  NVMe " + Bytes(d["nvme_commands"].get<uint64_t>());
    if (d.contains("page_cache_inserted")) {
      s += "  page cache " + Bytes(d["page_cache_inserted"].get<uint64_t>());
    }
    return s + "\n";
  };
  out += "\nBytes at each layer\n" + amp_line("read") + amp_line("write");
  out += fmt::format("  read amplification {}, write amplification {} (device / application)\n",
                     amp.contains("read_amplification")
                         ? fmt::format("{:.2f}", amp["read_amplification"].get<double>())
                         : "-",
                     amp.contains("write_amplification")
                         ? fmt::format("{:.2f}", amp["write_amplification"].get<double>())
                         : "-");
}

void SoftwareShareText(std::string& out, const json& sw) {
  out += fmt::format("\nKernel software share of synchronous calls with device I/O: {} calls",
                     sw.value("calls", 0ull));
  if (!sw.contains("mean_pct")) {
    out += "\n";
    return;
  }
  const json& d = sw["distribution"];
  out +=
      fmt::format(", mean {:.1f}%, p50 {:.1f}%, p90 {:.1f}% ({})\n", sw["mean_pct"].get<double>(),
                  d.value("p50_pct", 0.0), d.value("p90_pct", 0.0), sw.value("device_time", ""));
  for (const auto& [k, v] : sw["by_size"].items()) {
    out += fmt::format("  {:<8} {} calls, mean {:.1f}%\n", k, v.value("calls", 0ull),
                       v.value("mean_pct", 0.0));
  }
  out += "  reference: " + sw.value("reference", "") + "\n";
}

void DependentChainsText(std::string& out, const json& dc) {
  out += fmt::format(
      "\nDependent read chains (one per `{}` marker, else next batch within {} after the "
      "previous completed and re-reading none of the chain; at least {} reads): {} chains, {} "
      "reads",
      dc.value("query_marker", ""), Ns(dc.value("gap_threshold_ns", json())),
      dc.value("min_reads", 0ull), dc.value("chains", 0ull), dc.value("reads_in_chains", 0ull));
  if (dc.contains("estimated_speedup")) {
    out += fmt::format("; {} -> {} with in-kernel resubmission (x{:.2f}, an estimate)\n",
                       Ns(dc["span_ns"]), Ns(dc["estimated_with_driver_resubmission_ns"]),
                       dc["estimated_speedup"].get<double>());
  } else {
    out += "\n";
  }
  if (!dc.contains("per_chain_mean")) return;
  const json& m = dc["per_chain_mean"];
  out += fmt::format(
      "  told apart by: {} by query marker, {} by dependence (cuts: {})\n"
      "  per chain: {:.1f} hops of {:.1f} reads, {} per hop",
      dc.value("chains_by_query_marker", 0ull), dc.value("chains_by_dependence", 0ull),
      dc.value("cuts", json::object()).dump(), m.value("hops", 0.0),
      m.value("reads_per_hop", 0.0), Ns(m.value("hop_ns", json())));
  if (m.contains("hop_device_ns")) {
    out += fmt::format(" (software {}, device {}); estimated saving per chain {}",
                       Ns(m["hop_software_ns"]), Ns(m["hop_device_ns"]),
                       Ns(m["estimated_saving_ns"]));
  }
  out += "\n";
  for (const json& ch : dc.value("top", json::array())) {
    out += fmt::format("  tid {} {} at {}: {} reads in {} hops, {}", ch.value("tid", 0ull),
                       ch.value("file", ""), Ns(ch.value("start_ts", json())), ch.value("reads", 0ull),
                       ch.value("hops", 0ull), Ns(ch.value("span_ns", json())));
    if (ch.contains("estimated_saving_ns")) {
      out += fmt::format(", estimated saving {}", Ns(ch["estimated_saving_ns"]));
    }
    out += fmt::format(" ({})\n", ch.value("by", ""));
  }
}

void InterferenceText(std::string& out, const json& in) {
  out += fmt::format(
      "\nInterference while I/O was in flight: {} of {} requests of traced threads "
      "disturbed; summed over requests: preempted {}, hard irq {}, soft irq {} "
      "(blocked waiting {})\n",
      in.value("requests_disturbed", 0ull), in.value("requests_of_traced_threads", 0ull),
      Ns(in["total_ns"].value("preempted", json())), Ns(in["total_ns"].value("hardirq", json())),
      Ns(in["total_ns"].value("softirq", json())),
      Ns(in["total_ns"].value("blocked_waiting", json())));
  out += "  hardware counters: " + in.value("pmu", "") + "\n";
}

void WritebackText(std::string& out, const json& wb) {
  if (wb.empty()) return;
  out += "\nWrite-back and readahead by other threads, per file\n";
  for (const json& w : wb) {
    out += fmt::format(
        "  {}: {} requests, {}; dirtied by {} calls and {} faults; {} during a "
        "traced sync call; {} with unknown dirtier\n",
        w.value("file", ""), w.value("requests", 0ull), Bytes(w.value("bytes", 0ull)),
        w.value("dirtying_calls", 0ull), w.value("dirtying_faults", 0ull),
        w.value("during_traced_sync_call", 0ull), w.value("requests_with_unknown_dirtier", 0ull));
  }
}

// One request: what it is and its cause, then its latency split, then its NVMe commands.
void RequestRowText(std::string& out, const json& q) {
  static const json kNoLatency = json::object();
  // A request with no phase pair (a lone completion) has no latency_ns object.
  auto lat = q.find("latency_ns");
  const json& l = lat != q.end() && lat->is_object() ? *lat : kNoLatency;
  std::string what = q.value("cause", "");
  if (q.contains("syscall")) {
    what += fmt::format(" {}(tid {})", q["syscall"].value("op", ""), q["syscall"].value("tid", 0ull));
  }
  if (q.contains("file")) what += " " + q["file"].get<std::string>();
  if (q.contains("why")) what += " [" + q["why"].get<std::string>() + "]";
  out += fmt::format("  #{:x} {} {:<4} {:>9} @{:<10} {}\n", q.value("id", 0ull), q.value("dev", ""),
                     q.value("rwbs", ""), Bytes(q.value("bytes", 0ull)), q.value("sector", 0ull),
                     what);
  std::string parts = l.contains("Q2D") || !l.contains("Q2C")
                          ? fmt::format("      Q2D {} D2C {}", Ns(l.value("Q2D", json())),
                                        Ns(l.value("D2C", json())))
                          : fmt::format(
                                "      Q2C {} (never issued: completed by the flush "
                                "machinery)",
                                Ns(l["Q2C"]));
  if (l.contains("nvme")) parts += " NVMe " + Ns(l["nvme"]);
  if (l.contains("total")) {
    parts += l.contains("Q2D")
                 ? fmt::format("  | {} | {} | {} | {} = {}", Ns(l["syscall_fs"]), Ns(l["Q2D"]),
                               Ns(l.value("D2C", json())), Ns(l["completion"]), Ns(l["total"]))
                 : fmt::format("  | {} | {} | {} = {}", Ns(l["syscall_fs"]),
                               Ns(l.value("Q2C", json())), Ns(l["completion"]), Ns(l["total"]));
  }
  if (q.contains("interference_ns")) {
    const json& i = q["interference_ns"];
    parts += fmt::format("  preempted {} irq {}", Ns(i["offcpu_preempted"]),
                         Ns(json(i["hardirq"].get<uint64_t>() + i["softirq"].get<uint64_t>())));
  }
  out += parts + "\n";
  if (q.contains("nvme")) {
    for (const json& n : q["nvme"]) {
      out += fmt::format("      nvme {} qid {} cid {} {} lba {} status {:#x}\n", n.value("op", ""),
                         n.value("qid", 0ull), n.value("cid", 0ull), n.value("detail", ""),
                         n.value("lba_size", 0ull), n.value("status", 0ull));
    }
  }
}

void RequestsText(std::string& out, const json& r) {
  const json& rows = r["requests"];
  out += fmt::format(
      "\nRequests ({} of {}): cause, then Q2D / D2C / NVMe and the call's split "
      "(syscall+fs | block | device | completion = total)\n",
      rows.size(), r.value("requests_total", 0ull));
  for (const json& q : rows) RequestRowText(out, q);
}

}  // namespace

// Requests in flight per device, time-weighted (iostat's aqu-sz).
void QueueDepthText(std::string& out, const json& qd) {
  if (!qd.is_object() || qd.empty()) return;
  out += "\nQueue depth (requests in flight, time-weighted; on the device: issued, not given back)\n";
  out += fmt::format("  {:<10} {:>9} {:>5} {:>5} {:>13} {:>5}\n", "device", "average", "p99", "max",
                     "on device avg", "max");
  for (const auto& [dev, q] : qd.items()) {
    const json& d = q.value("device", json::object());
    out += fmt::format("  {:<10} {:>9.2f} {:>5} {:>5} {:>13.2f} {:>5}\n", dev,
                       q.value("average", 0.0), q.value("p99", 0ull), q.value("max", 0ull),
                       d.value("average", 0.0), d.value("max", 0ull));
  }
}

std::string RenderLayersText(const json& r) {
  std::string out;
  LayersAndCoverageText(out, r);
  LatencyText(out, r["latency"]);
  BttText(out, r["btt"]);
  if (r.contains("queue_depth")) QueueDepthText(out, r["queue_depth"]);
  SplitsAndMergesText(out, r["splits"]);
  AmplificationText(out, r["amplification"]);
  SoftwareShareText(out, r["software_share"]);
  DependentChainsText(out, r["dependent_chains"]);
  InterferenceText(out, r["interference"]);
  WritebackText(out, r["writeback"]);
  RequestsText(out, r);
  // File names and header strings come from the trace as bytes: escaped here, all at once, so
  // none of them can put a control sequence on the terminal.
  return LinesToText(out);
}

}  // namespace iotwin::correlate
