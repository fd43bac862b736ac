#include "operator/certs/x509.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <ctime>
#include <memory>

namespace allocguard::certs {
namespace {

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(BIGNUM* p) const { BN_free(p); }
  void operator()(GENERAL_NAMES* p) const { GENERAL_NAMES_free(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Free>;

// The text of the OpenSSL errors queued on this thread, then cleared.
std::string OpenSslError(const std::string& what) {
  std::string out = what;
  uint64_t e = 0;
  const char* sep = ": ";
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += sep;
    out += buf;
    sep = "; ";
  }
  return out;
}

Owned<EVP_PKEY> NewEcKey() { return Owned<EVP_PKEY>(EVP_EC_gen("P-256")); }

Owned<X509> ReadCert(const std::string& pem) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Owned<X509> x(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return x;
}

Owned<EVP_PKEY> ReadKey(const std::string& pem) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Owned<EVP_PKEY> k(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return k;
}

std::string CertPem(X509* x) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), x);
  char* data = nullptr;
  const int64_t n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string KeyPem(EVP_PKEY* k) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const int64_t n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

WallTime FromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return WallTime();
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

// A fresh X509 with a random positive 127-bit serial and the validity window.
Owned<X509> NewCertificate(const std::string& common_name, WallTime not_before,
                           WallTime not_after) {
  Owned<X509> x(X509_new());
  if (!x) return nullptr;
  X509_set_version(x.get(), X509_VERSION_3);
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;
  Owned<BIGNUM> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(x.get())) == nullptr) {
    return nullptr;
  }
  if (ASN1_TIME_set(X509_getm_notBefore(x.get()),
                    std::chrono::system_clock::to_time_t(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(x.get()), std::chrono::system_clock::to_time_t(not_after)) ==
          nullptr) {
    return nullptr;
  }
  X509_NAME* name = X509_get_subject_name(x.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1) {
    return nullptr;
  }
  return x;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Owned<X509_EXTENSION> ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

}  // namespace

Result<PemCertificateAndKey> GenerateCa(const std::string& common_name, WallTime not_before,
                                        WallTime not_after) {
  Owned<EVP_PKEY> key = NewEcKey();
  if (!key) return Internal(OpenSslError("cannot generate a CA key"));
  Owned<X509> x = NewCertificate(common_name, not_before, not_after);
  if (!x) return Internal(OpenSslError("cannot build the CA certificate"));
  X509_set_issuer_name(x.get(), X509_get_subject_name(x.get()));
  X509_set_pubkey(x.get(), key.get());
  if (!AddExtension(x.get(), x.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(x.get(), x.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(x.get(), x.get(), NID_subject_key_identifier, "hash") ||
      !AddExtension(x.get(), x.get(), NID_authority_key_identifier, "keyid:always")) {
    return Internal(OpenSslError("cannot add CA certificate extensions"));
  }
  if (X509_sign(x.get(), key.get(), EVP_sha256()) == 0) {
    return Internal(OpenSslError("cannot sign the CA certificate"));
  }
  return PemCertificateAndKey{CertPem(x.get()), KeyPem(key.get())};
}

Result<PemCertificateAndKey> IssueServingCertificate(const ServingCertificateRequest& request,
                                                     const std::string& ca_cert_pem,
                                                     const std::string& ca_key_pem) {
  if (request.dns_names.empty() && request.ip_addresses.empty()) {
    return InvalidArgument("a serving certificate needs at least one DNS name or IP address");
  }
  Owned<X509> ca = ReadCert(ca_cert_pem);
  Owned<EVP_PKEY> ca_key = ReadKey(ca_key_pem);
  if (!ca || !ca_key) return InvalidArgument("the CA certificate or key does not parse");
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the CA key does not belong to the CA certificate");
  }
  std::string san;
  for (const auto& dns : request.dns_names) {
    if (dns.empty() || dns.find_first_of(", \t\n") != std::string::npos) {
      return InvalidArgument("DNS name \"" + dns + "\" is not valid in a certificate");
    }
    san += (san.empty() ? "DNS:" : ",DNS:") + dns;
  }
  for (const auto& ip : request.ip_addresses) {
    if (ip.empty() || ip.find_first_of(", \t\n") != std::string::npos) {
      return InvalidArgument("IP address \"" + ip + "\" is not valid in a certificate");
    }
    san += (san.empty() ? "IP:" : ",IP:") + ip;
  }
  Owned<EVP_PKEY> key = NewEcKey();
  if (!key) return Internal(OpenSslError("cannot generate a serving key"));
  Owned<X509> x = NewCertificate(request.common_name, request.not_before, request.not_after);
  if (!x) return Internal(OpenSslError("cannot build the serving certificate"));
  X509_set_issuer_name(x.get(), X509_get_subject_name(ca.get()));
  X509_set_pubkey(x.get(), key.get());
  if (!AddExtension(x.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(x.get(), ca.get(), NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(x.get(), ca.get(), NID_ext_key_usage, "serverAuth") ||
      !AddExtension(x.get(), ca.get(), NID_subject_key_identifier, "hash") ||
      !AddExtension(x.get(), ca.get(), NID_authority_key_identifier, "keyid:always")) {
    return Internal(OpenSslError("cannot add serving certificate extensions"));
  }
  if (!AddExtension(x.get(), ca.get(), NID_subject_alt_name, san)) {
    return InvalidArgument(OpenSslError("subjectAltName \"" + san + "\" is not valid"));
  }
  if (X509_sign(x.get(), ca_key.get(), EVP_sha256()) == 0) {
    return Internal(OpenSslError("cannot sign the serving certificate"));
  }
  return PemCertificateAndKey{CertPem(x.get()), KeyPem(key.get())};
}

Result<std::vector<CertificateInfo>> ParseCertificates(const std::string& pem) {
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::vector<CertificateInfo> out;
  while (true) {
    Owned<X509> x(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!x) break;
    CertificateInfo info;
    info.pem = CertPem(x.get());
    info.not_before = FromAsn1(X509_get0_notBefore(x.get()));
    info.not_after = FromAsn1(X509_get0_notAfter(x.get()));
    info.is_ca = X509_check_ca(x.get()) != 0;
    char cn[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(x.get()), NID_commonName, cn, sizeof cn) >
        0) {
      info.common_name = cn;
    }
    Owned<GENERAL_NAMES> names(static_cast<GENERAL_NAMES*>(
        X509_get_ext_d2i(x.get(), NID_subject_alt_name, nullptr, nullptr)));
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names.get(), i);
      if (name->type == GEN_DNS) {
        const ASN1_IA5STRING* s = name->d.dNSName;
        info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                    static_cast<size_t>(ASN1_STRING_length(s)));
      } else if (name->type == GEN_IPADD) {
        int len = ASN1_STRING_length(name->d.iPAddress);
        char text[INET6_ADDRSTRLEN] = {0};
        if ((len == 4 || len == 16) &&
            inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(name->d.iPAddress), text,
                      sizeof text) != nullptr) {
          info.ip_addresses.emplace_back(text);
        }
      }
    }
    out.push_back(std::move(info));
  }
  const uint64_t err = ERR_peek_last_error();
  bool clean_end = ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  if (!clean_end && !out.empty()) return InvalidArgument("a certificate in the PEM does not parse");
  if (out.empty()) return InvalidArgument("no PEM certificate found");
  return out;
}

bool KeyMatchesCertificate(const std::string& cert_pem, const std::string& key_pem) {
  Owned<X509> x = ReadCert(cert_pem);
  Owned<EVP_PKEY> k = ReadKey(key_pem);
  bool ok = x && k && X509_check_private_key(x.get(), k.get()) == 1;
  ERR_clear_error();
  return ok;
}

bool IsSignedBy(const std::string& cert_pem, const std::string& issuer_pem) {
  Owned<X509> x = ReadCert(cert_pem);
  Owned<X509> issuer = ReadCert(issuer_pem);
  if (!x || !issuer) return false;
  if (X509_check_issued(issuer.get(), x.get()) != X509_V_OK) return false;
  EVP_PKEY* issuer_key = X509_get0_pubkey(issuer.get());
  bool ok = issuer_key != nullptr && X509_verify(x.get(), issuer_key) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace allocguard::certs
