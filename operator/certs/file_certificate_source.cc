#include "operator/certs/file_certificate_source.h"

#include <fstream>
#include <sstream>

#include "operator/certs/x509.h"

namespace allocguard::certs {
namespace {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

Result<KeyPair> MakeKeyPair(std::string cert_chain_pem, std::string key_pem,
                            std::string ca_bundle_pem) {
  auto certs = ParseCertificates(cert_chain_pem);
  if (!certs.ok()) return certs.status().WithContext("serving certificate");
  if (!KeyMatchesCertificate(cert_chain_pem, key_pem)) {
    return InvalidArgument("the private key does not belong to the serving certificate");
  }
  if (!ca_bundle_pem.empty()) {
    auto cas = ParseCertificates(ca_bundle_pem);
    if (!cas.ok()) return cas.status().WithContext("CA bundle");
  }
  KeyPair pair;
  pair.not_after = certs->front().not_after;
  pair.cert_chain_pem = std::move(cert_chain_pem);
  pair.key_pem = std::move(key_pem);
  pair.ca_bundle_pem = std::move(ca_bundle_pem);
  return pair;
}

FileCertificateSource::FileCertificateSource(const FileCertificateSourceOptions& options)
    : options_(options), clock_(options.clock != nullptr ? options.clock : RealClock::Get()) {}

Result<std::unique_ptr<FileCertificateSource>> FileCertificateSource::Create(
    const FileCertificateSourceOptions& options) {
  std::unique_ptr<FileCertificateSource> source(new FileCertificateSource(options));
  AG_RETURN_IF_ERROR(source->Reload());
  return source;
}

Status FileCertificateSource::Reload() {
  AG_ASSIGN_OR_RETURN(std::string cert, ReadFile(options_.cert_file));
  AG_ASSIGN_OR_RETURN(std::string key, ReadFile(options_.key_file));
  std::string ca;
  if (!options_.ca_file.empty()) {
    auto read = ReadFile(options_.ca_file);
    if (read.ok()) ca = std::move(*read);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_check_ = clock_->Now();
    if (current_ != nullptr && current_->cert_chain_pem == cert && current_->key_pem == key &&
        current_->ca_bundle_pem == ca) {
      return Status::Ok();
    }
  }
  auto pair = MakeKeyPair(std::move(cert), std::move(key), std::move(ca));
  if (!pair.ok()) return pair.status().WithContext(options_.cert_file);
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::make_shared<const KeyPair>(std::move(*pair));
  return Status::Ok();
}

std::shared_ptr<const KeyPair> FileCertificateSource::Current() {
  bool due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    due = clock_->Now() - last_check_ >= options_.check_interval;
    if (due) last_check_ = clock_->Now();  // one reader re-reads; the others go on
  }
  if (due) (void)Reload();  // an invalid update keeps the current pair
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

}  // namespace allocguard::certs
