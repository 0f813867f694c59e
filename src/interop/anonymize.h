// Anonymizer: replaces every name in a trace (path components, comms, command-line arguments,
// intent labels, host name) with a keyed hash, keeping what replay and analysis need: directory
// structure (components are hashed one by one, so /a/b and /a/c share /a's token), file identity
// (the same name always gives the same token under one key), the root and kernel-provided names
// below /proc, /sys and /dev (decided on the normalised path; names users choose there, such as
// what lies behind /proc/PID/root or cgroup names, are hashed: docs/interop.md), and optionally
// file extensions. The hash is keyed BLAKE2b
// (libsodium crypto_generichash): without the key, tokens can neither be reversed nor confirmed
// by guessing names.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace iotwin::interop {

struct AnonymizeOptions {
  bool keep_extensions = false;
  // Absolute prefixes kept verbatim (components below them too), besides /proc, /sys and /dev.
  std::vector<std::string> keep_prefixes;
};

class Anonymizer {
 public:
  static constexpr size_t kTokenChars = 15;  // fits a 16-byte comm with its NUL

  // The key file holds at least 16 bytes of secret (e.g. `head -c 32 /dev/urandom > key`).
  static Result<Anonymizer> FromKeyFile(const std::string& path, AnonymizeOptions options);
  // Writes a new key file of kNewKeyBytes random bytes (libsodium randombytes), mode 0600,
  // created exclusively: an existing file, or a symlink planted at `path`, is refused.
  static constexpr size_t kNewKeyBytes = 32;
  static Status CreateKeyFile(const std::string& path);
  static Result<Anonymizer> FromKey(std::string_view secret, AnonymizeOptions options);

  // One name (no '/'): base32 of its keyed hash, kTokenChars characters.
  std::string Token(std::string_view name) const;
  // A path: each component replaced, separators, "." and ".." kept; kernel-provided names kept,
  // in their normalised spelling.
  std::string Path(std::string_view path) const;
  // An inode number: imported traces derive it from the path (a guessable unkeyed hash), so it
  // is keyed too; equal (dev, ino) pairs stay equal. 0 stays 0.
  uint64_t Inode(uint32_t dev, uint64_t ino) const;
  // A comm (at most 15 bytes): the token of the whole name.
  std::string Comm(std::string_view comm) const { return Token(comm); }
  const AnonymizeOptions& options() const { return options_; }

 private:
  Anonymizer() = default;
  std::string Component(std::string_view c) const;
  std::string HashComponents(std::string_view path) const;
  std::array<uint8_t, 32> key_{};
  AnonymizeOptions options_;
};

struct AnonymizeResult {
  uint64_t records = 0;
  uint64_t strings = 0;
  uint64_t unknown_records_dropped = 0;
  std::vector<std::string> meta_keys_dropped;
  bool input_truncated = false;
};

Result<AnonymizeResult> AnonymizeTrace(const std::string& input, const std::string& output,
                                       const Anonymizer& anonymizer);

}  // namespace iotwin::interop
