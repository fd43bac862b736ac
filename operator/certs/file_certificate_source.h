#pragma once

// Certificates provided as files, as cert-manager provides them: a Secret
// mounted as a volume holding tls.crt, tls.key and ca.crt. The kubelet
// replaces the files when cert-manager renews the Secret; the source notices
// and serves the new pair from the next handshake on.

#include <memory>
#include <mutex>
#include <string>

#include "operator/certs/certificate_source.h"
#include "operator/common/clock.h"
#include "operator/common/status.h"

namespace allocguard::certs {

struct FileCertificateSourceOptions {
  std::string cert_file;  // tls.crt: leaf first, then intermediates
  std::string key_file;   // tls.key
  std::string ca_file;    // ca.crt; optional ("" or absent: empty bundle)
  // Current() re-reads the files at most this often.
  Clock::Duration check_interval = std::chrono::seconds(10);
  Clock* clock = nullptr;  // nullptr: the real clock
};

class FileCertificateSource final : public CertificateSource {
 public:
  // Fails when the files cannot be read, do not parse, or the key does not
  // belong to the certificate.
  static Result<std::unique_ptr<FileCertificateSource>> Create(
      const FileCertificateSourceOptions& options);

  // Re-reads the files once check_interval has passed since the last read.
  std::shared_ptr<const KeyPair> Current() override;

  // Re-reads the files now. A pair that changed and is valid replaces the
  // current one; an invalid one (half-written, mismatched key) is reported
  // and the current pair is kept.
  Status Reload();

 private:
  explicit FileCertificateSource(const FileCertificateSourceOptions& options);

  FileCertificateSourceOptions options_;
  Clock* clock_;
  std::mutex mu_;
  std::shared_ptr<const KeyPair> current_;
  Clock::TimePoint last_check_{};
};

// Reads cert, key and CA PEM into a validated KeyPair.
Result<KeyPair> MakeKeyPair(std::string cert_chain_pem, std::string key_pem,
                            std::string ca_bundle_pem);

}  // namespace allocguard::certs
