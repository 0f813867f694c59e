// NewestItems: the newest N items of a stream, oldest first, as a vector erased at its front
// when full would hold them, but forgetting the oldest in O(1) (a ring once N are held): the
// analyzer keeps one per file and appends to it on every data call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace iotwin::analysis {

template <typename T, size_t N>
class NewestItems {
  static_assert(N > 1 && N < UINT32_MAX);

 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The newest item is held in place (not behind a pointer): most appends only look at it.
  T& back() { return newest_; }

  // Appends `item`; when N are held, the oldest is forgotten. Forced inline: the analyzer
  // appends for every data call, and the compiler called it out of line.
  [[gnu::always_inline]] void push_back(const T& item) {
    if (size_ == N) {  // full: the common case of a long stream, without the vector's size
      older_[oldest_] = newest_;
      oldest_ = oldest_ + 1 == N - 1 ? 0 : oldest_ + 1;
      newest_ = item;
      return;
    }
    if (size_ > 0) {
      // The newest becomes the newest of the older ones (a ring of N - 1).
      if (older_.size() < N - 1) {
        older_.push_back(newest_);
      } else {
        older_[oldest_] = newest_;
        oldest_ = oldest_ + 1 == N - 1 ? 0 : oldest_ + 1;
      }
    }
    newest_ = item;
    size_ = older_.size() + 1;
  }

  // Newest first.
  class reverse_iterator {
   public:
    reverse_iterator(NewestItems* items, size_t newer) : items_(items), newer_(newer) {}
    T& operator*() const { return items_->Newer(newer_); }
    T* operator->() const { return &**this; }
    reverse_iterator& operator++() {
      ++newer_;
      return *this;
    }
    bool operator==(const reverse_iterator& o) const { return newer_ == o.newer_; }

   private:
    NewestItems* items_;
    size_t newer_;  // items newer than this one
  };
  reverse_iterator rbegin() { return {this, 0}; }
  reverse_iterator rend() { return {this, size_}; }

 private:
  // The item with `newer` items newer than it (newer < size()).
  T& Newer(size_t newer) {
    if (newer == 0) return newest_;
    const size_t i = older_.size() - newer;  // among the older ones, oldest first
    const size_t slot = oldest_ + i < N - 1 ? oldest_ + i : oldest_ + i - (N - 1);
    return older_[slot];
  }

  T newest_{};
  std::vector<T> older_;  // the ring of the others (oldest_: the oldest's slot once full)
  uint32_t oldest_ = 0;
  uint32_t size_ = 0;
};

}  // namespace iotwin::analysis
