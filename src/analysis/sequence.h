// Sequence matching for compare: how many operations of two threads' sequences agree in order
// and arguments (longest common subsequence of operation fingerprints), and which threads of
// two traces correspond.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace iotwin::analysis {

struct LcsResult {
  size_t length = 0;    // operations matched in order
  bool exact = true;    // false: a lower bound from the windowed fallback (very different inputs)
  size_t first_difference = 0;  // index of the first position where the sequences differ
};

// Longest common subsequence length. Myers' O((N+M)·D) algorithm while the edit distance D
// stays within `max_work` / (N+M) steps; beyond that a linear windowed greedy match (a lower
// bound) with resynchronisation within `window` operations.
LcsResult LongestCommonSubsequence(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b,
                                   uint64_t max_work = 400'000'000, size_t window = 256);

// One thread's identity and sequence, as compare sees it.
struct ThreadSeq {
  uint32_t tid = 0, tgid = 0;
  uint32_t process_rank = 0, thread_rank = 0;  // order of first appearance
  const std::vector<uint64_t>* ops = nullptr;
};

struct ThreadPair {
  int a = -1, b = -1;  // indices into the inputs; -1 for a thread without counterpart
  double similarity = 0;
};

// Maps threads of trace A to threads of trace B: first by order of first appearance within
// each process (process rank, thread rank), then reassigned by sequence similarity where another
// pairing matches much better (threads started in a different order). Unpaired threads of either
// side appear with -1 on the other. `known` pairs (tid in A, tid in B), e.g. the thread map a
// replay recorded, are taken first where each tid names one thread on its side.
std::vector<ThreadPair> MapThreads(const std::vector<ThreadSeq>& a, const std::vector<ThreadSeq>& b,
                                   const std::vector<std::pair<uint32_t, uint32_t>>& known = {});

// Jaccard similarity of the sets of distinct fingerprints of two sequences, estimated from
// bottom-k sketches (exact while both have at most k distinct fingerprints).
double SequenceSimilarity(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b,
                          size_t k = 256);

}  // namespace iotwin::analysis
