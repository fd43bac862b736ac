#include "operator/common/version.h"

#ifndef ALLOCGUARD_VERSION
#error "ALLOCGUARD_VERSION is set by operator/CMakeLists.txt from the VERSION file"
#endif

namespace allocguard {

std::string_view Version() { return ALLOCGUARD_VERSION; }

}  // namespace allocguard
