// Typed lookups in JSON a trace carries (header metadata, footer summary, and the copies of them
// in report models). That JSON is untrusted: nlohmann's value() and get<T>() throw when a value
// has another type or its parent is not an object. These never throw: a missing key, a parent
// that is not an object or a value of another type (or out of the asked type's range) gives the
// default.
//
// A path names nested objects: "layers/block/enabled" is j["layers"]["block"]["enabled"]. Keys
// holding '/' cannot be named by a path; look such an object up with Object() and iterate it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace iotwin::json_fields {

// The value at `path`, or null when a step is missing or not an object.
inline const nlohmann::json* Find(const nlohmann::json& j, std::string_view path) {
  const nlohmann::json* at = &j;
  for (;;) {
    if (!at->is_object()) return nullptr;
    const size_t slash = path.find('/');
    auto it = at->find(std::string(path.substr(0, slash)));
    if (it == at->end()) return nullptr;
    at = &*it;
    if (slash == std::string_view::npos) return at;
    path.remove_prefix(slash + 1);
  }
}

// The object at `path`, or null when it is absent or not an object.
inline const nlohmann::json* Object(const nlohmann::json& j, std::string_view path) {
  const nlohmann::json* v = Find(j, path);
  return v && v->is_object() ? v : nullptr;
}

// The array at `path`, or null when it is absent or not an array.
inline const nlohmann::json* Array(const nlohmann::json& j, std::string_view path) {
  const nlohmann::json* v = Find(j, path);
  return v && v->is_array() ? v : nullptr;
}

// The value itself, typed: the default when it has another type.
inline bool AsBool(const nlohmann::json& v, bool def) {
  return v.is_boolean() ? v.get<bool>() : def;
}

inline std::string AsString(const nlohmann::json& v, std::string_view def = {}) {
  return v.is_string() ? v.get<std::string>() : std::string(def);
}

// A non-negative integer (a float is not one: counts and sizes are written as integers).
inline uint64_t AsUint(const nlohmann::json& v, uint64_t def) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(v.get<int64_t>());
  }
  return def;
}

inline double AsDouble(const nlohmann::json& v, double def) {
  return v.is_number() ? v.get<double>() : def;
}

// The value at `path`, typed.
inline bool GetBool(const nlohmann::json& j, std::string_view path, bool def) {
  const nlohmann::json* v = Find(j, path);
  return v ? AsBool(*v, def) : def;
}

inline std::string GetString(const nlohmann::json& j, std::string_view path,
                             std::string_view def = {}) {
  const nlohmann::json* v = Find(j, path);
  return v ? AsString(*v, def) : std::string(def);
}

inline uint64_t GetUint(const nlohmann::json& j, std::string_view path, uint64_t def) {
  const nlohmann::json* v = Find(j, path);
  return v ? AsUint(*v, def) : def;
}

// GetUint, and the default when the value does not fit in 32 bits.
inline uint32_t GetUint32(const nlohmann::json& j, std::string_view path, uint32_t def) {
  const uint64_t v = GetUint(j, path, uint64_t{1} << 32);
  return v <= std::numeric_limits<uint32_t>::max() ? static_cast<uint32_t>(v) : def;
}

// Any number, as a double.
inline double GetDouble(const nlohmann::json& j, std::string_view path, double def) {
  const nlohmann::json* v = Find(j, path);
  return v ? AsDouble(*v, def) : def;
}

}  // namespace iotwin::json_fields
