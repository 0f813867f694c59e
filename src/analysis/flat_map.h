// FlatMap: an open-addressing hash map (linear probing, backward-shift deletion) for the analysis
// hot path, where std::unordered_map's node allocation and pointer chasing cost more than the
// rest of the per-record work together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace iotwin::analysis {

// 64-bit mixer (the finaliser of splitmix64): spreads keys built from small integers.
inline uint64_t MixBits(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The default hasher: keys are uint64_t (callers pack composite keys).
struct MixHash {
  uint64_t operator()(uint64_t key) const { return MixBits(key); }
};

// Values are default-constructible; keys are uint64_t, or a small struct with operator== and a
// hasher (a key that does not pack into 64 bits without collisions).
template <typename V, typename K = uint64_t, typename Hash = MixHash>
class FlatMap {
 public:
  FlatMap() { Rehash(16); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  V* Find(const K& key) {
    const size_t i = FindSlot(key);
    return i == kNone ? nullptr : &slots_[i].value;
  }
  const V* Find(const K& key) const { return const_cast<FlatMap*>(this)->Find(key); }

  // The slot holding `key` (kNone: absent), for a caller that reads, then erases, one member
  // without hashing its key twice: At(slot), EraseSlot(slot). Valid until the next insertion.
  static constexpr size_t kNone = SIZE_MAX;
  size_t FindSlot(const K& key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = Hash()(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (!s.used) return kNone;
      if (s.key == key) return i;
    }
  }
  V& At(size_t slot) { return slots_[slot].value; }

  // Returns the value for `key`, inserting a default one if absent; *inserted tells which.
  V& FindOrInsert(const K& key, bool* inserted = nullptr) {
    if ((size_ + 1) * 4 > slots_.size() * 3) Rehash(slots_.size() * 2);
    size_t mask = slots_.size() - 1;
    for (size_t i = Hash()(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = key;
        s.value = V();
        ++size_;
        if (inserted) *inserted = true;
        return s.value;
      }
      if (s.key == key) {
        if (inserted) *inserted = false;
        return s.value;
      }
    }
  }

  bool Erase(const K& key) {
    const size_t i = FindSlot(key);
    if (i == kNone) return false;
    EraseSlot(i);
    return true;
  }

  void EraseSlot(size_t i) {
    const size_t mask = slots_.size() - 1;
    // Backward-shift: move later members of the probe run into the hole so lookups that
    // stop at the first empty slot stay correct.
    size_t hole = i;
    for (size_t j = (i + 1) & mask; slots_[j].used; j = (j + 1) & mask) {
      size_t home = Hash()(slots_[j].key) & mask;
      bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (movable) {
        slots_[hole] = std::move(slots_[j]);
        hole = j;
      }
    }
    slots_[hole].used = false;
    slots_[hole].value = V();
    --size_;
  }

  void Clear() {
    slots_.clear();
    size_ = 0;
    Rehash(16);
  }

  // Calls f(key, value&) for every member, in unspecified order.
  template <typename F>
  void ForEach(F&& f) {
    for (auto& s : slots_)
      if (s.used) f(s.key, s.value);
  }
  template <typename F>
  void ForEach(F&& f) const {
    for (const auto& s : slots_)
      if (s.used) f(s.key, s.value);
  }

 private:
  struct Slot {
    K key{};
    bool used = false;
    V value{};
  };

  void Rehash(size_t capacity) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(capacity, Slot());
    size_ = 0;
    size_t mask = capacity - 1;
    for (auto& s : old) {
      if (!s.used) continue;
      size_t i = Hash()(s.key) & mask;
      while (slots_[i].used) i = (i + 1) & mask;
      slots_[i] = std::move(s);
      ++size_;
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace iotwin::analysis
