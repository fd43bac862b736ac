#pragma once

// X.509 certificates for the webhook server: generation of a CA and of a
// serving certificate signed by it, and the facts the rotation decision needs
// read back from PEM. ECDSA P-256 keys, SHA-256 signatures (OpenSSL 3 EVP).
// Times are wall-clock times passed in by the caller (from its Clock).

#include <chrono>
#include <string>
#include <vector>

#include "operator/common/status.h"

namespace allocguard::certs {

using WallTime = std::chrono::system_clock::time_point;

struct PemCertificateAndKey {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8
};

// A self-signed CA certificate (basicConstraints CA:TRUE, pathlen 0,
// keyUsage keyCertSign+cRLSign) valid in [not_before, not_after].
Result<PemCertificateAndKey> GenerateCa(const std::string& common_name, WallTime not_before,
                                        WallTime not_after);

struct ServingCertificateRequest {
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries, e.g. "127.0.0.1"
  WallTime not_before;
  WallTime not_after;
};

// A serving certificate (serverAuth, not a CA) for request's names, signed by
// the CA. REQUIRES: at least one DNS name or IP address.
Result<PemCertificateAndKey> IssueServingCertificate(const ServingCertificateRequest& request,
                                                     const std::string& ca_cert_pem,
                                                     const std::string& ca_key_pem);

struct CertificateInfo {
  std::string pem;  // this certificate alone
  std::string common_name;
  WallTime not_before;
  WallTime not_after;
  bool is_ca = false;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
};

// Every certificate in a PEM text, in order. Fails when there is none or one
// does not parse.
Result<std::vector<CertificateInfo>> ParseCertificates(const std::string& pem);

// True when key_pem is the private key of the (first) certificate in cert_pem.
bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem);

// True when the first certificate of cert_pem is signed by the first
// certificate of issuer_pem (names chain and the signature verifies).
bool IsSignedBy(const std::string& cert_pem, const std::string& issuer_pem);

}  // namespace allocguard::certs
