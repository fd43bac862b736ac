#include "operator/api/json_reader.h"

#include <cmath>

namespace allocguard::api::json_fields {
namespace {

using nlohmann::json;

bool IsFiniteNumber(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

}  // namespace

void Reader::String(const char* key, std::string* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  if (v->is_string()) {
    *out = v->get<std::string>();
  } else {
    Problem(key, "must be a string, got " + Dump(*v));
  }
}

void Reader::Bool(const char* key, bool* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  if (v->is_boolean()) {
    *out = v->get<bool>();
  } else {
    Problem(key, "must be a boolean, got " + Dump(*v));
  }
}

void Reader::Number(const char* key, std::optional<double>* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  if (IsFiniteNumber(*v)) {
    *out = v->get<double>();
  } else {
    Problem(key, "must be a finite number, got " + Dump(*v));
  }
}

void Reader::Int(const char* key, std::optional<int64_t>* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  auto n = AsInt(*v, PathOf(key));
  if (n.ok()) {
    *out = n.value();
  } else {
    Report(n.status().message());
  }
}

void Reader::Int(const char* key, int64_t* out) {
  std::optional<int64_t> n;
  Int(key, &n);
  if (n.has_value()) *out = *n;
}

void Reader::Numbers(const char* key, std::vector<double>* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    Problem(key, "must be a list of numbers, got " + Dump(*v));
    return;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& x = (*v)[i];
    if (IsFiniteNumber(x)) {
      out->push_back(x.get<double>());
    } else {
      Report(Item(PathOf(key), i) + ": must be a finite number, got " + Dump(x));
    }
  }
}

void Reader::Strings(const char* key, std::vector<std::string>* out) {
  const json* v = Member(object_, key);
  if (v == nullptr) return;
  if (!v->is_array()) {
    Problem(key, "must be a list of strings, got " + Dump(*v));
    return;
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const json& x = (*v)[i];
    if (x.is_string()) {
      out->push_back(x.get<std::string>());
    } else {
      Report(Item(PathOf(key), i) + ": must be a string, got " + Dump(x));
    }
  }
}

void Reader::StringMap(const char* key, std::map<std::string, std::string>* out) {
  const json* v = Object(key);
  if (v == nullptr) return;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it->is_string()) {
      (*out)[it.key()] = it->get<std::string>();
    } else {
      Report(PathOf(key) + "." + it.key() + ": must be a string, got " + Dump(*it));
    }
  }
}

const json* Reader::Array(const char* key) {
  const json* v = Member(object_, key);
  if (v == nullptr) return nullptr;
  if (v->is_array()) return v;
  Problem(key, "must be a list, got " + Dump(*v));
  return nullptr;
}

const json* Reader::Object(const char* key) {
  const json* v = Member(object_, key);
  if (v == nullptr) return nullptr;
  if (v->is_object()) return v;
  Problem(key, "must be an object, got " + Dump(*v));
  return nullptr;
}

void Reader::Report(const std::string& problem) {
  if (problems_ != nullptr) problems_->push_back(problem);
}

}  // namespace allocguard::api::json_fields
