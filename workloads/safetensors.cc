#include "safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace iotwin::workload {

namespace {

constexpr uint64_t kMaxHeaderLen = 100 * 1024 * 1024;  // the reference implementation's limit

uint64_t DtypeSize(std::string_view dtype) {
  static const std::map<std::string_view, uint64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

TensorPlan Tensor(std::string name, std::vector<uint64_t> shape) {
  TensorPlan t;
  t.name = std::move(name);
  t.dtype = "BF16";
  t.nbytes = 2;
  for (uint64_t d : shape) t.nbytes *= d;
  t.shape = std::move(shape);
  return t;
}

}  // namespace

std::string ShardFileName(int index1, int count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index1, count);
}

Result<std::vector<ShardPlan>> PlanModel(int shards, uint64_t shard_bytes, uint64_t hidden) {
  if (shards < 1 || shards > 99999) return Status::Invalid("--shards must be in 1..99999");
  if (hidden < 64 || hidden % 64 != 0 || hidden > 65536) {
    return Status::Invalid("--hidden must be a multiple of 64 in 64..65536 (got {})", hidden);
  }
  const uint64_t h = hidden;
  const uint64_t kv = h / 4;                           // grouped-query attention, 4:1
  const uint64_t inter = (h * 11 / 4 + 63) / 64 * 64;  // Llama's ~2.7x MLP width
  const uint64_t vocab = 16 * h;

  auto layer = [&](uint64_t i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    return std::vector<TensorPlan>{
        Tensor(p + "input_layernorm.weight", {h}),
        Tensor(p + "self_attn.q_proj.weight", {h, h}),
        Tensor(p + "self_attn.k_proj.weight", {kv, h}),
        Tensor(p + "self_attn.v_proj.weight", {kv, h}),
        Tensor(p + "self_attn.o_proj.weight", {h, h}),
        Tensor(p + "post_attention_layernorm.weight", {h}),
        Tensor(p + "mlp.gate_proj.weight", {inter, h}),
        Tensor(p + "mlp.up_proj.weight", {inter, h}),
        Tensor(p + "mlp.down_proj.weight", {h, inter}),
    };
  };
  uint64_t layer_bytes = 0;
  for (const auto& t : layer(0)) layer_bytes += t.nbytes;
  const uint64_t fixed_bytes = 2 * vocab * h * 2 + h * 2;
  const uint64_t target = static_cast<uint64_t>(shards) * shard_bytes;
  const uint64_t layers =
      target > fixed_bytes
          ? std::max<uint64_t>(1, (target - fixed_bytes + layer_bytes / 2) / layer_bytes)
          : 1;

  std::vector<TensorPlan> all;
  all.push_back(Tensor("model.embed_tokens.weight", {vocab, h}));
  for (uint64_t i = 0; i < layers; i++) {
    for (auto& t : layer(i)) all.push_back(std::move(t));
  }
  all.push_back(Tensor("model.norm.weight", {h}));
  all.push_back(Tensor("lm_head.weight", {vocab, h}));
  uint64_t total = 0;
  for (const auto& t : all) total += t.nbytes;

  // Contiguous split: a tensor goes to the shard its midpoint falls in.
  std::vector<ShardPlan> plan(static_cast<size_t>(shards));
  uint64_t before = 0;
  for (auto& t : all) {
    const uint64_t mid = before + t.nbytes / 2;
    const auto s = std::min<uint64_t>(
        static_cast<uint64_t>(shards) - 1,
        static_cast<uint64_t>(static_cast<unsigned __int128>(mid) * shards / total));
    before += t.nbytes;
    plan[s].data_bytes += t.nbytes;
    plan[s].tensors.push_back(std::move(t));
  }
  for (int s = 0; s < shards; s++) {
    auto& shard = plan[static_cast<size_t>(s)];
    shard.file_name = ShardFileName(s + 1, shards);
    if (shard.tensors.empty()) {
      return Status::Invalid(
          "{} shards of {} bytes are too small for a model with hidden size {} (the largest "
          "tensor is {} bytes): use fewer --shards, a larger --shard-mb or a smaller --hidden",
          shards, shard_bytes, hidden, vocab * h * 2);
    }
  }
  return plan;
}

std::string EncodeHeader(const ShardPlan& shard) {
  nlohmann::ordered_json j;
  j["__metadata__"] = {{"format", "pt"}, {"generator", "iotwin-workload"}};
  uint64_t off = 0;
  for (const auto& t : shard.tensors) {
    j[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.nbytes}}};
    off += t.nbytes;
  }
  std::string json = j.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; i++) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + json;
}

Result<uint64_t> DecodeHeaderLength(const uint8_t prefix[8], uint64_t file_size) {
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (n == 0 || n > kMaxHeaderLen || file_size < 8 || n > file_size - 8) {
    return Status::Corrupt("safetensors header length {} does not fit a {}-byte file", n,
                           file_size);
  }
  return n;
}

Result<ParsedHeader> ParseHeader(std::string_view json, uint64_t file_size) {
  ParsedHeader out;
  out.header_len = json.size();
  out.data_start = 8 + json.size();
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::Corrupt("safetensors header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets") || !v["dtype"].is_string() || !v["shape"].is_array() ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return Status::Corrupt("safetensors tensor {}: needs dtype, shape and data_offsets [b, e]",
                             it.key());
    }
    const uint64_t elem = DtypeSize(v["dtype"].get<std::string>());
    if (elem == 0) return Status::Corrupt("safetensors tensor {}: unknown dtype", it.key());
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned())
        return Status::Corrupt("safetensors tensor {}: bad shape", it.key());
      count *= d.get<uint64_t>();
    }
    const auto& offs = v["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      return Status::Corrupt("safetensors tensor {}: bad data_offsets", it.key());
    }
    const uint64_t b = offs[0].get<uint64_t>(), e = offs[1].get<uint64_t>();
    if (e < b || e - b != count * elem) {
      return Status::Corrupt(
          "safetensors tensor {}: data_offsets [{}, {}] do not match {} x {} bytes", it.key(), b, e,
          count, elem);
    }
    out.tensors.push_back({it.key(), out.data_start + b, out.data_start + e});
  }
  std::sort(out.tensors.begin(), out.tensors.end(),
            [](const TensorExtent& a, const TensorExtent& b) { return a.begin < b.begin; });
  uint64_t expect = out.data_start;
  for (const auto& t : out.tensors) {
    if (t.begin != expect) {
      return Status::Corrupt("safetensors tensor {} starts at {}, expected {} (gap or overlap)",
                             t.name, t.begin, expect);
    }
    expect = t.end;
  }
  if (expect != file_size) {
    return Status::Corrupt("safetensors data ends at {} but the file has {} bytes", expect,
                           file_size);
  }
  return out;
}

}  // namespace iotwin::workload
