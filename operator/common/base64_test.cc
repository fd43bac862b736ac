#include "operator/common/base64.h"

#include <gtest/gtest.h>

namespace allocguard {
namespace {

TEST(Base64Test, EncodesWithPaddingAndRoundTrips) {
  EXPECT_EQ(EncodeBase64(""), "");
  EXPECT_EQ(EncodeBase64("f"), "Zg==");
  EXPECT_EQ(EncodeBase64("fo"), "Zm8=");
  EXPECT_EQ(EncodeBase64("foo"), "Zm9v");
  EXPECT_EQ(EncodeBase64("foobar"), "Zm9vYmFy");
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  auto back = DecodeBase64(EncodeBase64(binary));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, binary);
}

TEST(Base64Test, DecodesUnpaddedAndWrappedTextAndRefusesWhatIsNot) {
  EXPECT_EQ(DecodeBase64("Zm8").value(), "fo");
  EXPECT_EQ(DecodeBase64("Zg").value(), "f");
  EXPECT_EQ(DecodeBase64(" Zm9v\nYmFy\r\n").value(), "foobar");
  EXPECT_EQ(DecodeBase64("").value(), "");
  for (const char* text : {"Zm9v!", "Z", "Zm9vY", "Zg==Zg==", "Zm-v", "Zm_v"}) {
    EXPECT_FALSE(DecodeBase64(text).ok()) << text;
  }
}

}  // namespace
}  // namespace allocguard
