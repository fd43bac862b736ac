// ParseDuration (every duration of the CRDs, load files and flags)
// and api::FormatDuration. Invariants: parsing never throws; a parsed
// duration is >= 0; every duration formats to text that parses back to the
// same duration (from parsed text and from arbitrary millisecond counts up
// to kMaxDuration).

#include <cstring>

#include "fuzz/fuzz_check.h"
#include "operator/api/quantity.h"
#include "operator/common/duration.h"

namespace {

using std::chrono::milliseconds;

void RoundTrip(milliseconds d) {
  const std::string text = allocguard::api::FormatDuration(d);
  auto again =
      allocguard::fuzz::NoThrow("ParseDuration", [&] { return allocguard::ParseDuration(text); });
  AG_FUZZ_CHECK(again.ok(), text + ": " + again.status().message());
  AG_FUZZ_CHECK(*again == d, std::to_string(d.count()) + " ms -> " + text + " -> " +
                                 std::to_string(again->count()) + " ms");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto d =
      allocguard::fuzz::NoThrow("ParseDuration", [&] { return allocguard::ParseDuration(text); });
  if (d.ok()) {
    AG_FUZZ_CHECK(d->count() >= 0 && *d <= allocguard::kMaxDuration,
                  text + " -> " + std::to_string(d->count()) + " ms");
    RoundTrip(*d);
  } else {
    AG_FUZZ_CHECK(!d.status().message().empty(), text);
  }
  if (size >= sizeof(int64_t)) {
    int64_t raw;
    std::memcpy(&raw, data, sizeof raw);
    if (raw >= 0) RoundTrip(milliseconds(raw % (allocguard::kMaxDuration.count() + 1)));
  }
  return 0;
}
