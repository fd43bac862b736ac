#pragma once

// Small helpers shared by the subcommands.

#include <cstdint>
#include <string>

#include "operator/common/status.h"

namespace allocguard::cli {

// Prints "allocguard: <message>" to stderr and returns exit code 1.
int Fail(const Status& status);

// Parses a Kubernetes-style memory quantity: "512Mi", "4Gi", "1G", "1048576".
Result<int64_t> ParseQuantity(const std::string& text);

}  // namespace allocguard::cli
