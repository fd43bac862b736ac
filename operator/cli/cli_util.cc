#include "operator/cli/cli_util.h"

#include <cstdio>

#include "operator/api/quantity.h"

namespace allocguard::cli {

int Fail(const Status& status) {
  std::fprintf(stderr, "allocguard: %s\n", status.message().c_str());
  return 1;
}

Result<int64_t> ParseQuantity(const std::string& text) {
  AG_ASSIGN_OR_RETURN(int64_t bytes, api::ParseQuantityBytes(text));
  if (bytes < 1) return InvalidArgument("quantity \"" + text + "\" must be at least one byte");
  return bytes;
}

}  // namespace allocguard::cli
