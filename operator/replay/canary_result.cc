#include "operator/replay/canary_result.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

namespace allocguard::replay {

namespace {

using nlohmann::json;

// Messages longer than this are cut before anything else is given up.
constexpr size_t kMessageBudget = 1024;

json Number(double v, double scale) {
  if (!std::isfinite(v)) return nullptr;
  return std::round(v * scale) / scale;
}

// Cuts `s` to at most `max` bytes without splitting a UTF-8 sequence.
std::string CutUtf8(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end);
}

std::string Shortened(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  if (max < 4) return CutUtf8(s, max);
  return CutUtf8(s, max - 3) + "...";
}

json MiBList(const std::vector<double>& values) {
  json list = json::array();
  for (double v : values) list.push_back(Number(v, 10));
  return list;
}

// Every stride-th floor from the first, and always the last.
std::vector<double> Thinned(const std::vector<double>& floors, int stride) {
  std::vector<double> out;
  for (size_t i = 0; i < floors.size(); i += static_cast<size_t>(stride)) out.push_back(floors[i]);
  if (!floors.empty() && (floors.size() - 1) % static_cast<size_t>(stride) != 0) {
    out.push_back(floors.back());
  }
  return out;
}

// `k`: how many more times the floors are thinned than r.floor_stride says.
std::string Dump(const CanaryResult& r, int k, const std::string& message) {
  json f = MiBList(Thinned(r.floors_mib, k));
  json j = {
      {"v", r.version},
      {"variant", r.variant},
      {"allocator", r.allocator},
      {"verdict", VerdictName(r.verdict)},
      {"floors", std::move(f)},
      {"slope", Number(r.slope_gib_per_hour, 1000)},
      {"slope_low", Number(r.slope_low, 1000)},
      {"slope_high", Number(r.slope_high, 1000)},
      {"peak", Number(r.peak_mib, 10)},
      {"floor_level", Number(r.floor_level_mib, 10)},
      {"cpu_s", Number(r.cpu_seconds, 100)},
      {"p99_ms", Number(r.p99_ms, 10)},
      {"requests", r.requests},
      {"errors", r.errors},
      {"late", r.late},
      {"exited", r.workload_exited},
      {"anon_only", r.anon_only},
      {"minutes", r.minutes},
      {"message", message},
  };
  const int stride = std::max(1, r.floor_stride) * k;
  if (stride != 1) j["stride"] = stride;
  if (r.workload_exited) j["exit_minute"] = r.exit_minute;
  if (r.books_reading) {
    j["books"] = {{"reading", BooksReadingName(*r.books_reading)},
                  {"in_use", MiBList(Thinned(r.in_use_floors_mib, k))},
                  {"retained", MiBList(Thinned(r.retained_floors_mib, k))},
                  {"in_use_slope", Number(r.in_use_slope_gib_per_hour, 1000)},
                  {"retained_slope", Number(r.retained_slope_gib_per_hour, 1000)}};
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

template <typename T>
Status Read(const json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return InvalidArgument(std::string(key) + " must be a string");
    *out = it->template get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return InvalidArgument(std::string(key) + " must be true or false");
    *out = it->template get<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (it->is_null()) {
      *out = std::numeric_limits<double>::quiet_NaN();
    } else if (it->is_number()) {
      *out = it->template get<double>();
    } else {
      return InvalidArgument(std::string(key) + " must be a number");
    }
  } else {
    if (!it->is_number_integer()) return InvalidArgument(std::string(key) + " must be an integer");
    *out = it->template get<T>();
  }
  return Status::Ok();
}

Status ReadNumbers(const json& j, const char* key, std::vector<double>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  if (!it->is_array()) return InvalidArgument(std::string(key) + " must be a list of numbers");
  for (const json& v : *it) {
    if (!v.is_number()) return InvalidArgument(std::string(key) + " must be a list of numbers");
    out->push_back(v.get<double>());
  }
  return Status::Ok();
}

// The "books" member, when present.
Status ReadBooks(const json& j, CanaryResult* r) {
  auto it = j.find("books");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return InvalidArgument("books must be an object");
  const json& b = *it;
  std::string reading;
  AG_RETURN_IF_ERROR(Read(b, "reading", &reading).WithContext("books"));
  r->books_reading = BooksReadingFromName(reading);
  if (!r->books_reading) {
    return InvalidArgument("books.reading is \"" + Shortened(reading, 63) +
                           "\", which is not one allocguard writes");
  }
  AG_RETURN_IF_ERROR(ReadNumbers(b, "in_use", &r->in_use_floors_mib).WithContext("books"));
  AG_RETURN_IF_ERROR(ReadNumbers(b, "retained", &r->retained_floors_mib).WithContext("books"));
  AG_RETURN_IF_ERROR(Read(b, "in_use_slope", &r->in_use_slope_gib_per_hour).WithContext("books"));
  AG_RETURN_IF_ERROR(
      Read(b, "retained_slope", &r->retained_slope_gib_per_hour).WithContext("books"));
  return Status::Ok();
}

}  // namespace

std::string EncodeCanaryResult(const CanaryResult& result) {
  CanaryResult r = result;
  r.variant = Shortened(r.variant, 253);
  r.allocator = Shortened(r.allocator, 63);
  std::string message = Shortened(r.message, kMessageBudget);
  std::string out = Dump(r, 1, message);
  if (out.size() <= kMaxTerminationMessageBytes) return out;
  // Too long: thin the floors, the books' with them (a stride more each
  // time), until they fit beside a message of at most 256 bytes.
  message = Shortened(message, 256);
  const std::vector<double> longest(
      std::max({r.floors_mib.size(), r.in_use_floors_mib.size(), r.retained_floors_mib.size()}));
  for (int k = 1;; ++k) {
    out = Dump(r, k, message);
    if (out.size() <= kMaxTerminationMessageBytes || Thinned(longest, k).size() <= 2) break;
  }
  if (out.size() <= kMaxTerminationMessageBytes) return out;
  // Only huge names could get here; keep the verdict and say what was lost.
  CanaryResult minimal;
  minimal.version = r.version;
  minimal.verdict = r.verdict;
  return Dump(minimal, 1, "result too large for a termination message");
}

Result<CanaryResult> DecodeCanaryResult(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument("canary result is not JSON (" + std::to_string(text.size()) +
                           " bytes, perhaps truncated)");
  }
  if (!j.is_object()) return InvalidArgument("canary result is not a JSON object");
  CanaryResult r;
  int version = 0;
  AG_RETURN_IF_ERROR(Read(j, "v", &version));
  if (version != 1) {
    return InvalidArgument("canary result version " + std::to_string(version) +
                           " is not supported (expected 1)");
  }
  r.version = version;
  if (!j.contains("verdict")) return InvalidArgument("canary result has no verdict");
  std::string verdict;
  AG_RETURN_IF_ERROR(Read(j, "verdict", &verdict));
  std::optional<Verdict> known = VerdictFromName(verdict);
  if (!known.has_value()) {
    return InvalidArgument("canary result has verdict \"" + Shortened(verdict, 63) +
                           "\", which is not one allocguard writes");
  }
  r.verdict = *known;
  AG_RETURN_IF_ERROR(Read(j, "variant", &r.variant));
  AG_RETURN_IF_ERROR(Read(j, "allocator", &r.allocator));
  if (auto it = j.find("floors"); it != j.end()) {
    if (!it->is_array()) return InvalidArgument("floors must be a list of numbers");
    for (const json& f : *it) {
      if (!f.is_number()) return InvalidArgument("floors must be a list of numbers");
      r.floors_mib.push_back(f.get<double>());
    }
  }
  AG_RETURN_IF_ERROR(Read(j, "stride", &r.floor_stride));
  if (r.floor_stride < 1) return InvalidArgument("stride must be at least 1");
  AG_RETURN_IF_ERROR(Read(j, "slope", &r.slope_gib_per_hour));
  AG_RETURN_IF_ERROR(Read(j, "slope_low", &r.slope_low));
  AG_RETURN_IF_ERROR(Read(j, "slope_high", &r.slope_high));
  AG_RETURN_IF_ERROR(Read(j, "peak", &r.peak_mib));
  AG_RETURN_IF_ERROR(Read(j, "floor_level", &r.floor_level_mib));
  AG_RETURN_IF_ERROR(Read(j, "cpu_s", &r.cpu_seconds));
  AG_RETURN_IF_ERROR(Read(j, "p99_ms", &r.p99_ms));
  AG_RETURN_IF_ERROR(Read(j, "requests", &r.requests));
  AG_RETURN_IF_ERROR(Read(j, "errors", &r.errors));
  AG_RETURN_IF_ERROR(Read(j, "late", &r.late));
  AG_RETURN_IF_ERROR(Read(j, "exited", &r.workload_exited));
  AG_RETURN_IF_ERROR(Read(j, "exit_minute", &r.exit_minute));
  AG_RETURN_IF_ERROR(Read(j, "anon_only", &r.anon_only));
  AG_RETURN_IF_ERROR(Read(j, "minutes", &r.minutes));
  AG_RETURN_IF_ERROR(Read(j, "message", &r.message));
  AG_RETURN_IF_ERROR(ReadBooks(j, &r));
  return r;
}

}  // namespace allocguard::replay
