// A synthetic Llama-style model laid out as safetensors shards, and a safetensors header parser.
//
// safetensors file: 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {...}, "<tensor>": {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]},
//   ...}
// padded with spaces to a multiple of 8, then the tensor data; offsets are relative to the data
// start (8 + N) and the tensors tile the data region without gaps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace iotwin::workload {

struct TensorPlan {
  std::string name;
  std::string dtype;  // "BF16"
  std::vector<uint64_t> shape;
  uint64_t nbytes = 0;
};

struct ShardPlan {
  std::string file_name;  // model-00001-of-00002.safetensors
  std::vector<TensorPlan> tensors;
  uint64_t data_bytes = 0;
};

std::string ShardFileName(int index1, int count);

// Llama-like tensors (embeddings, per layer: norms, q/k/v/o with 4:1 grouped KV, gate/up/down,
// final norm, lm_head) in BF16 with the given hidden size; as many layers as make the total about
// shards * shard_bytes, split into `shards` contiguous shards of about equal size.
Result<std::vector<ShardPlan>> PlanModel(int shards, uint64_t shard_bytes, uint64_t hidden);

// The first 8 + N bytes of a shard file.
std::string EncodeHeader(const ShardPlan& shard);

struct TensorExtent {
  std::string name;
  uint64_t begin = 0;  // absolute file offsets
  uint64_t end = 0;
};

struct ParsedHeader {
  uint64_t header_len = 0;            // N
  uint64_t data_start = 0;            // 8 + N
  std::vector<TensorExtent> tensors;  // in file order
};

// Decodes the 8-byte length prefix; fails if it cannot fit in a file of `file_size` bytes.
Result<uint64_t> DecodeHeaderLength(const uint8_t prefix[8], uint64_t file_size);
// Parses and checks the JSON header: dtypes known, sizes match shapes, tensors tile
// [data_start, file_size) exactly.
Result<ParsedHeader> ParseHeader(std::string_view json, uint64_t file_size);

}  // namespace iotwin::workload
