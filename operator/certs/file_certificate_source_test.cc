#include "operator/certs/file_certificate_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "operator/certs/x509.h"

namespace allocguard::certs {
namespace {

using std::chrono::hours;

PemCertificateAndKey MakeServing(const std::string& name, PemCertificateAndKey* ca_out) {
  const WallTime now = std::chrono::system_clock::now();
  auto ca = GenerateCa("ca", now - hours(1), now + hours(48));
  EXPECT_TRUE(ca.ok());
  ServingCertificateRequest request{name, {name}, {}, now - hours(1), now + hours(24)};
  auto serving = IssueServingCertificate(request, ca->cert_pem, ca->key_pem);
  EXPECT_TRUE(serving.ok());
  *ca_out = *ca;
  return *serving;
}

class FileCertificateSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ag-certs-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& content) {
    // Like the kubelet: write aside, then rename into place.
    std::ofstream((dir_ / (name + ".tmp")).string()) << content;
    std::filesystem::rename(dir_ / (name + ".tmp"), dir_ / name);
  }
  void WritePair(const PemCertificateAndKey& serving, const PemCertificateAndKey& ca) {
    Write("tls.crt", serving.cert_pem);
    Write("tls.key", serving.key_pem);
    Write("ca.crt", ca.cert_pem);
  }
  FileCertificateSourceOptions Options() {
    FileCertificateSourceOptions o;
    o.cert_file = (dir_ / "tls.crt").string();
    o.key_file = (dir_ / "tls.key").string();
    o.ca_file = (dir_ / "ca.crt").string();
    o.check_interval = std::chrono::seconds(10);
    o.clock = &clock_;
    return o;
  }
  std::filesystem::path dir_;
  FakeClock clock_;
};

TEST_F(FileCertificateSourceTest, ServesTheFilesAndPicksUpARenewalAfterTheInterval) {
  PemCertificateAndKey ca1;
  PemCertificateAndKey ca2;
  PemCertificateAndKey first = MakeServing("first.example", &ca1);
  WritePair(first, ca1);
  auto source = FileCertificateSource::Create(Options());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto pair = (*source)->Current();
  ASSERT_NE(pair, nullptr);
  EXPECT_EQ(pair->cert_chain_pem, first.cert_pem);
  EXPECT_EQ(pair->ca_bundle_pem, ca1.cert_pem);

  PemCertificateAndKey second = MakeServing("second.example", &ca2);
  WritePair(second, ca2);
  EXPECT_EQ((*source)->Current(), pair) << "files are re-read only after check_interval";
  clock_.Advance(std::chrono::seconds(10));
  auto renewed = (*source)->Current();
  ASSERT_NE(renewed, nullptr);
  EXPECT_EQ(renewed->cert_chain_pem, second.cert_pem);
  EXPECT_EQ(renewed->key_pem, second.key_pem);
  EXPECT_EQ(renewed->ca_bundle_pem, ca2.cert_pem);
  clock_.Advance(std::chrono::seconds(10));
  EXPECT_EQ((*source)->Current(), renewed) << "unchanged files keep the same pair object";
}

TEST_F(FileCertificateSourceTest, KeepsTheGoodPairWhenAnUpdateIsInconsistent) {
  PemCertificateAndKey ca1;
  PemCertificateAndKey ca2;
  PemCertificateAndKey first = MakeServing("first.example", &ca1);
  PemCertificateAndKey second = MakeServing("second.example", &ca2);
  WritePair(first, ca1);
  auto source = FileCertificateSource::Create(Options());
  ASSERT_TRUE(source.ok());
  auto pair = (*source)->Current();
  Write("tls.crt", second.cert_pem);  // the key has not been replaced yet
  Status reload = (*source)->Reload();
  EXPECT_FALSE(reload.ok());
  EXPECT_NE(reload.message().find("does not belong"), std::string::npos) << reload.ToString();
  EXPECT_EQ((*source)->Current(), pair);
  Write("tls.key", second.key_pem);
  EXPECT_TRUE((*source)->Reload().ok());
  EXPECT_EQ((*source)->Current()->cert_chain_pem, second.cert_pem);
}

TEST_F(FileCertificateSourceTest, CreateFailsWithoutUsableFiles) {
  auto missing = FileCertificateSource::Create(Options());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  Write("tls.crt", "not a certificate");
  Write("tls.key", "not a key");
  EXPECT_EQ(FileCertificateSource::Create(Options()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace allocguard::certs
