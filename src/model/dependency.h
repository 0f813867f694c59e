// The vocabulary shared by the trace model and the ordering tracker: "no index" and a wait for
// another thread's progress. Kept apart so that ordering.h needs nothing of the model.
#pragma once

#include <cstdint>

namespace iotwin::model {

inline constexpr uint32_t kNone = UINT32_MAX;

// A wait for another thread's progress: the op may start once thread `thread` has completed its
// first `count` stream elements (ops are 0-based, so count = index + 1).
struct Dep {
  uint32_t thread = 0;
  uint32_t count = 0;
};

}  // namespace iotwin::model
