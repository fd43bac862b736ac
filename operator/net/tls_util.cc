#include "operator/net/tls_util.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <csignal>
#include <mutex>

namespace allocguard::net {

Result<std::vector<X509Ptr>> ParseCertificates(const std::string& pem, const char* what) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  ERR_clear_error();  // the loop ends on a "no start line" error
  if (certs.empty()) return InvalidArgument(std::string(what) + " holds no PEM certificate");
  return certs;
}

Result<PkeyPtr> ParsePrivateKey(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr);
  ERR_clear_error();
  if (key == nullptr) return InvalidArgument("client key holds no PEM private key");
  return PkeyPtr(key);
}

void IgnoreSigpipeOnce() {
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace allocguard::net
