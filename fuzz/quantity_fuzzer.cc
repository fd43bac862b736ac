// api::ParseQuantityBytes and FormatQuantityBytes. Invariants: parsing never
// throws; a parsed quantity is >= 0; every byte count formats to a quantity
// that parses back to the same count (both from parsed text and from
// arbitrary 64-bit counts).

#include <cstring>

#include "fuzz/fuzz_check.h"
#include "operator/api/quantity.h"

namespace {

void RoundTrip(int64_t bytes) {
  const std::string text = allocguard::api::FormatQuantityBytes(bytes);
  auto again = allocguard::fuzz::NoThrow("ParseQuantityBytes",
                                         [&] { return allocguard::api::ParseQuantityBytes(text); });
  AG_FUZZ_CHECK(again.ok(), text + ": " + again.status().message());
  AG_FUZZ_CHECK(*again == bytes,
                std::to_string(bytes) + " -> " + text + " -> " + std::to_string(*again));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto bytes = allocguard::fuzz::NoThrow("ParseQuantityBytes",
                                         [&] { return allocguard::api::ParseQuantityBytes(text); });
  if (bytes.ok()) {
    AG_FUZZ_CHECK(*bytes >= 0, text + " -> " + std::to_string(*bytes));
    RoundTrip(*bytes);
  } else {
    AG_FUZZ_CHECK(!bytes.status().message().empty(), text);
  }
  if (size >= sizeof(int64_t)) {
    int64_t raw;
    std::memcpy(&raw, data, sizeof raw);
    if (raw >= 0) RoundTrip(raw);
  }
  return 0;
}
