#include "operator/common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "operator/common/rfc3339.h"

namespace allocguard::log {

namespace {

thread_local const ReconcileScope* current_scope = nullptr;

std::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "debug";
    case spdlog::level::info:
      return "info";
    case spdlog::level::warn:
      return "warn";
    case spdlog::level::err:
    case spdlog::level::critical:
      return "error";
    case spdlog::level::off:
    case spdlog::level::n_levels:
      break;
  }
  return "info";
}

// spdlog's formatter, writing FormatLine's lines.
class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(Format format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string line = FormatLine(format_, msg.time, LevelName(msg.level),
                                        std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  Format format_;
};

// Text a log line carries from an object (a name, a field's value): control
// characters are written as escapes (\n, \r, \t, \xHH), so that no object
// can end a line early and forge the next one, or drive a terminal.
std::string EscapeControls(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    }
  }
  return out;
}

}  // namespace

struct ScopeAccess {
  static const std::string& Controller(const ReconcileScope& s) { return s.controller_; }
  static const std::string& Object(const ReconcileScope& s) { return s.object_; }
};

ReconcileScope::ReconcileScope(std::string controller, std::string object)
    : controller_(std::move(controller)),
      object_(std::move(object)),
      reconcile_id_(NewReconcileId()),
      outer_(current_scope) {
  current_scope = this;
}

ReconcileScope::~ReconcileScope() { current_scope = outer_; }

std::string NewReconcileId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const uint64_t hi = rng();
  const uint64_t lo = rng();
  unsigned char b[16];
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<unsigned char>(hi >> (56 - 8 * i));
    b[8 + i] = static_cast<unsigned char>(lo >> (56 - 8 * i));
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                b[15]);
  return out;
}

std::string FormatLine(Format format, std::chrono::system_clock::time_point time,
                       std::string_view level, std::string_view message) {
  // Milliseconds, like the rest of a log reader's lines; FormatRfc3339 has
  // seconds or microseconds.
  std::string ts = FormatRfc3339(time, /*micros=*/true);
  if (ts.size() == 27) ts = ts.substr(0, 23) + "Z";  // ...:SS.uuuuuuZ -> ...:SS.mmmZ
  const ReconcileScope* scope = current_scope;
  if (format == Format::kJson) {
    nlohmann::ordered_json j;
    j["ts"] = ts;
    j["level"] = level;
    j["msg"] = message;
    if (scope != nullptr) {
      j["controller"] = ScopeAccess::Controller(*scope);
      const std::string& object = ScopeAccess::Object(*scope);
      j["object"] = object;
      const auto slash = object.find('/');
      if (slash != std::string::npos) {
        j["namespace"] = object.substr(0, slash);
        j["name"] = object.substr(slash + 1);
      } else {
        j["name"] = object;
      }
      j["reconcileID"] = scope->reconcile_id();
    }
    // A message is whatever an object's fields held: bytes that are not
    // UTF-8 are replaced, never thrown on.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  // One line a message: what an object's fields put in it is escaped.
  std::string line = ts + " " + std::string(level) + " " + EscapeControls(message);
  if (scope != nullptr) {
    line += "  controller=" + ScopeAccess::Controller(*scope) +
            " object=" + EscapeControls(ScopeAccess::Object(*scope)) +
            " reconcileID=" + scope->reconcile_id();
  }
  return line;
}

Status Configure(const std::string& level, const std::string& format) {
  spdlog::level::level_enum lvl;
  if (level == "debug") {
    lvl = spdlog::level::debug;
  } else if (level == "info") {
    lvl = spdlog::level::info;
  } else if (level == "warn") {
    lvl = spdlog::level::warn;
  } else if (level == "error") {
    lvl = spdlog::level::err;
  } else {
    return InvalidArgument("--log-level " + level + ": must be debug, info, warn or error");
  }
  Format f;
  if (format == "text") {
    f = Format::kText;
  } else if (format == "json") {
    f = Format::kJson;
  } else {
    return InvalidArgument("--log-format " + format + ": must be text or json");
  }
  spdlog::set_level(lvl);
  spdlog::set_formatter(std::make_unique<LineFormatter>(f));
  return Status::Ok();
}

}  // namespace allocguard::log
