#include "operator/certs/x509.h"

#include <gtest/gtest.h>

namespace allocguard::certs {
namespace {

using std::chrono::hours;

const WallTime kStart = std::chrono::system_clock::from_time_t(1767225600);  // 2026-01-01

TEST(X509Test, CaIsACaWithTheRequestedValidity) {
  auto ca = GenerateCa("test-ca", kStart, kStart + hours(24));
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto info = ParseCertificates(ca->cert_pem);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->size(), 1u);
  EXPECT_TRUE(info->front().is_ca);
  EXPECT_EQ(info->front().common_name, "test-ca");
  EXPECT_EQ(info->front().not_before, kStart);
  EXPECT_EQ(info->front().not_after, kStart + hours(24));
  EXPECT_TRUE(KeyMatchesCertificate(ca->cert_pem, ca->key_pem));
  EXPECT_TRUE(IsSignedBy(ca->cert_pem, ca->cert_pem));
}

TEST(X509Test, ServingCertificateCarriesItsNamesAndChainsToItsCaOnly) {
  auto ca = GenerateCa("ca", kStart, kStart + hours(48));
  auto other_ca = GenerateCa("ca", kStart, kStart + hours(48));  // same name, other key
  ASSERT_TRUE(ca.ok() && other_ca.ok());
  ServingCertificateRequest request;
  request.common_name = "svc.ns.svc";
  request.dns_names = {"svc.ns.svc", "svc.ns.svc.cluster.local"};
  request.ip_addresses = {"127.0.0.1", "::1"};
  request.not_before = kStart;
  request.not_after = kStart + hours(24);
  auto serving = IssueServingCertificate(request, ca->cert_pem, ca->key_pem);
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  auto info = ParseCertificates(serving->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->front().is_ca);
  EXPECT_EQ(info->front().dns_names, request.dns_names);
  EXPECT_EQ(info->front().ip_addresses, request.ip_addresses);
  EXPECT_TRUE(KeyMatchesCertificate(serving->cert_pem, serving->key_pem));
  EXPECT_FALSE(KeyMatchesCertificate(serving->cert_pem, ca->key_pem));
  EXPECT_TRUE(IsSignedBy(serving->cert_pem, ca->cert_pem));
  EXPECT_FALSE(IsSignedBy(serving->cert_pem, other_ca->cert_pem));
}

TEST(X509Test, RefusesBadInput) {
  auto ca = GenerateCa("ca", kStart, kStart + hours(48));
  auto other = GenerateCa("ca", kStart, kStart + hours(48));
  ASSERT_TRUE(ca.ok() && other.ok());
  ServingCertificateRequest request;
  request.not_before = kStart;
  request.not_after = kStart + hours(1);
  EXPECT_EQ(IssueServingCertificate(request, ca->cert_pem, ca->key_pem).status().code(),
            StatusCode::kInvalidArgument);  // no names
  request.dns_names = {"a.example"};
  EXPECT_FALSE(IssueServingCertificate(request, ca->cert_pem, other->key_pem).ok());
  request.ip_addresses = {"not-an-ip"};
  EXPECT_FALSE(IssueServingCertificate(request, ca->cert_pem, ca->key_pem).ok());
  EXPECT_FALSE(ParseCertificates("").ok());
  EXPECT_FALSE(
      ParseCertificates("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").ok());
  EXPECT_FALSE(KeyMatchesCertificate("garbage", "garbage"));
}

TEST(X509Test, ParsesABundleInOrder) {
  auto a = GenerateCa("a", kStart, kStart + hours(1));
  auto b = GenerateCa("b", kStart, kStart + hours(2));
  ASSERT_TRUE(a.ok() && b.ok());
  auto info = ParseCertificates(a->cert_pem + b->cert_pem);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->size(), 2u);
  EXPECT_EQ((*info)[0].common_name, "a");
  EXPECT_EQ((*info)[1].common_name, "b");
  EXPECT_EQ((*info)[1].pem, b->cert_pem);
}

}  // namespace
}  // namespace allocguard::certs
