#pragma once

// base64 as Kubernetes writes it (Secret data, caBundle, kubeconfig *-data,
// AdmissionReview patches): the standard alphabet. The one encoder and
// decoder of the operator, on OpenSSL's.

#include <string>

#include "operator/common/status.h"

namespace allocguard {

// Standard alphabet, padding optional, whitespace ignored. Never throws.
Result<std::string> DecodeBase64(const std::string& text);
// Standard alphabet, padded, no line breaks.
std::string EncodeBase64(const std::string& data);

}  // namespace allocguard
