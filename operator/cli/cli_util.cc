#include "operator/cli/cli_util.h"

#include <cmath>
#include <cstdio>

namespace allocguard::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "allocguard: %s\n", status.message().c_str());
  return 1;
}

Result<int64_t> ParseQuantity(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return InvalidArgument("quantity \"" + text + "\" does not start with a number");
  double value;
  try {
    value = std::stod(text.substr(0, i));
  } catch (const std::exception&) {
    return InvalidArgument("quantity \"" + text + "\" is not a number");
  }
  std::string suffix = text.substr(i);
  double mult = 1;
  if (suffix == "Ki") {
    mult = 1024.0;
  } else if (suffix == "Mi") {
    mult = 1024.0 * 1024;
  } else if (suffix == "Gi") {
    mult = 1024.0 * 1024 * 1024;
  } else if (suffix == "Ti") {
    mult = 1024.0 * 1024 * 1024 * 1024;
  } else if (suffix == "k") {
    mult = 1e3;
  } else if (suffix == "M") {
    mult = 1e6;
  } else if (suffix == "G") {
    mult = 1e9;
  } else if (!suffix.empty()) {
    return InvalidArgument("quantity \"" + text + "\" has unknown suffix \"" + suffix +
                           "\" (use Ki, Mi, Gi, Ti, k, M or G)");
  }
  double bytes = value * mult;
  if (bytes < 1 || bytes > 9e18) return InvalidArgument("quantity \"" + text + "\" out of range");
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace allocguard::cli
