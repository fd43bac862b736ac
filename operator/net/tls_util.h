#pragma once

// OpenSSL helpers shared by the HTTPS client (http_transport.cc) and the
// HTTPS server (https_server.cc). Internal to operator/net.

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::net {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

// Every certificate in pem, in order; kInvalidArgument naming `what` when none.
Result<std::vector<X509Ptr>> ParseCertificates(const std::string& pem, const char* what);
// The first private key in pem; kInvalidArgument when none.
Result<PkeyPtr> ParsePrivateKey(const std::string& pem);

// cpp-httplib 0.11 sends without MSG_NOSIGNAL, and OpenSSL writes through a
// plain socket BIO: a write to a connection the peer closed would kill the
// process with SIGPIPE. Sets SIGPIPE to SIG_IGN, once, if it is at its default.
void IgnoreSigpipeOnce();

}  // namespace allocguard::net
