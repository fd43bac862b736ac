#pragma once

// Small helpers shared by the subcommands.

#include <cstdint>
#include <string>

#include "operator/common/status.h"

namespace allocguard::cli {

// Prints "allocguard: <message>" to stderr and returns exit code 1.
int Fail(const Status& status);

// Parses a positive memory quantity in bytes ("512Mi", "1.5Gi", "1G",
// "1048576") with api::ParseQuantityBytes, the parser the CRDs' quantities use.
Result<int64_t> ParseQuantity(const std::string& text);

}  // namespace allocguard::cli
