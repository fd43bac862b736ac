#pragma once

// Reads the members of one JSON object into typed fields, for the parsers of
// operator/api that turn objects from the API server into C++ values. It
// never throws: a member of the wrong type is left unread and reported, with
// its path ("status.variants[1].phase: must be a string, got 7"), in the
// caller's `problems` list (which may be null when nobody reads them). An
// absent or null member is simply not read.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "operator/api/json_fields.h"

namespace allocguard::api::json_fields {

class Reader {
 public:
  // `object` must outlive the Reader. A non-object has no members.
  Reader(const nlohmann::json& object, std::string path, std::vector<std::string>* problems)
      : object_(object), path_(std::move(path)), problems_(problems) {}

  void String(const char* key, std::string* out);
  void Bool(const char* key, bool* out);
  // A finite number; NaN and infinities are reported.
  void Number(const char* key, std::optional<double>* out);
  // An integer that fits int64_t (a float without a fraction counts).
  void Int(const char* key, std::optional<int64_t>* out);
  void Int(const char* key, int64_t* out);
  // A list of finite numbers; entries of another type are reported and left
  // out.
  void Numbers(const char* key, std::vector<double>* out);
  // A list of strings; entries of another type are reported and left out.
  void Strings(const char* key, std::vector<std::string>* out);
  // An object of strings (labels, annotations, nodeSelector); members of
  // another type are reported and left out.
  void StringMap(const char* key, std::map<std::string, std::string>* out);

  // The member as a list, or nullptr (reported when it is something else).
  const nlohmann::json* Array(const char* key);
  // The member as an object, or nullptr (reported when it is something else).
  const nlohmann::json* Object(const char* key);

  // Calls each(item, item_path) for every object in the member's list; an
  // entry that is not an object is reported and skipped, as is a member
  // that is not a list.
  template <typename Each>
  void Objects(const char* key, Each each) {
    const nlohmann::json* list = Array(key);
    if (list == nullptr) return;
    for (size_t i = 0; i < list->size(); ++i) {
      const nlohmann::json& item = (*list)[i];
      const std::string item_path = Item(PathOf(key), i);
      if (item.is_object()) {
        each(item, item_path);
      } else {
        Report(item_path + ": must be an object, got " + Dump(item));
      }
    }
  }

  // The path of a member, for readers of nested objects.
  std::string PathOf(const char* key) const { return Path(path_, key); }
  // Adds a problem as it is written (with its own path).
  void Report(const std::string& problem);
  // Adds "<path>.<key>: <what>".
  void Problem(const char* key, const std::string& what) { Report(PathOf(key) + ": " + what); }

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::vector<std::string>* problems_;
};

}  // namespace allocguard::api::json_fields
