#include "operator/common/base64.h"

#include <openssl/evp.h>

namespace allocguard {

std::string EncodeBase64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

Result<std::string> DecodeBase64(const std::string& text) {
  // EVP_DecodeBlock wants whole, padded quads and decodes the padding as zero
  // bytes; so whitespace goes, the alphabet and the padding's place are
  // checked here, and the padding is put back.
  std::string quads;
  quads.reserve(text.size() + 3);
  size_t padding = 0;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const bool alphabet = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (!alphabet || padding > 0) return InvalidArgument("not base64");
    quads.push_back(c);
  }
  if (quads.size() % 4 == 1) return InvalidArgument("not base64 (truncated)");
  const size_t missing = (4 - quads.size() % 4) % 4;
  quads.append(missing, '=');
  std::string out(3 * (quads.size() / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(quads.data()),
                                static_cast<int>(quads.size()));
  if (n < 0 || static_cast<size_t>(n) < missing) return InvalidArgument("not base64");
  out.resize(static_cast<size_t>(n) - missing);
  return out;
}

}  // namespace allocguard
