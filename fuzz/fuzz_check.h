#pragma once

// What the fuzz targets share: invariant checks that abort with a message
// (libFuzzer then saves the input as a crash), and the input as text or JSON.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

namespace allocguard::fuzz {

[[noreturn]] inline void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n  %s\n", what, detail.c_str());
  std::abort();
}

// The input parsed as JSON; discarded when it is not JSON.
inline nlohmann::json ParseInput(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

// JSON text of value for a message, whatever bytes its strings hold.
inline std::string Show(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 2000 ? text.substr(0, 2000) + "..." : text;
}

// Returns f(); an exception out of it is a defect: the code under test
// promises Status values, never exceptions.
template <typename F>
auto NoThrow(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    Fail(what, std::string("an exception escaped: ") + e.what());
  } catch (...) {
    Fail(what, "a non-standard exception escaped");
  }
}

}  // namespace allocguard::fuzz

// Aborts with the condition's text and detail when cond is false.
#define AG_FUZZ_CHECK(cond, detail)                                    \
  do {                                                                 \
    if (!(cond)) ::allocguard::fuzz::Fail(#cond, std::string(detail)); \
  } while (false)
