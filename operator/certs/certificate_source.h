#pragma once

// Where the webhook server's certificate comes from: a CertificateSource hands
// out the current key pair, and a new pair object each time it changes, so an
// HTTPS server built on it (net::NewHttpsServer) presents a rotated
// certificate from the next handshake on, without a restart.

#include <chrono>
#include <memory>
#include <string>

#include "operator/net/http.h"

namespace allocguard::certs {

// The net::TlsKeyPair part (cert_chain_pem, key_pem) is what the server
// presents; the rest is for the webhook configurations and for status.
struct KeyPair : net::TlsKeyPair {
  std::string ca_bundle_pem;                        // the CAs clients must trust, one or more
  std::chrono::system_clock::time_point not_after;  // of the serving certificate
};

class CertificateSource {
 public:
  virtual ~CertificateSource() = default;
  // The current pair, or nullptr when there is none yet. The same pointer is
  // returned until the pair changes. Thread-safe and cheap: it is called on
  // every TLS handshake.
  virtual std::shared_ptr<const KeyPair> Current() = 0;
};

// The provider net::HttpsServerOptions::key_pair expects, reading source.
inline net::TlsKeyPairProvider TlsKeyPairProviderOf(std::shared_ptr<CertificateSource> source) {
  return [source = std::move(source)]() -> std::shared_ptr<const net::TlsKeyPair> {
    return source->Current();
  };
}

}  // namespace allocguard::certs
