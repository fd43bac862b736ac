#include "operator/common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "operator/common/rfc3339.h"

namespace allocguard::log {
namespace {

std::chrono::system_clock::time_point At(const char* rfc3339) {
  return ParseRfc3339(rfc3339).value();
}

TEST(LogLineTest, TextOutsideAReconcileIsTimeLevelMessage) {
  EXPECT_EQ(FormatLine(Format::kText, At("2026-12-04T20:10:00.123456Z"), "info", "caches synced"),
            "2026-12-04T20:10:00.123Z info caches synced");
}

TEST(LogLineTest, JsonCarriesTheReconcileFieldsControllerRuntimeNames) {
  ReconcileScope scope("canary", "shop/web-8c41d2f07a");
  const auto j = nlohmann::json::parse(
      FormatLine(Format::kJson, At("2026-12-04T20:10:00Z"), "warn", "retrying \"x\""));
  EXPECT_EQ(j["ts"], "2026-12-04T20:10:00.000Z");
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["msg"], "retrying \"x\"");
  EXPECT_EQ(j["controller"], "canary");
  EXPECT_EQ(j["object"], "shop/web-8c41d2f07a");
  EXPECT_EQ(j["namespace"], "shop");
  EXPECT_EQ(j["name"], "web-8c41d2f07a");
  EXPECT_EQ(j["reconcileID"], scope.reconcile_id());
}

TEST(LogLineTest, TextCarriesTheReconcileFieldsAfterTheMessage) {
  ReconcileScope scope("policy", "shop/jemalloc");
  EXPECT_EQ(FormatLine(Format::kText, At("2026-12-04T20:10:00Z"), "info", "deciding"),
            "2026-12-04T20:10:00.000Z info deciding  controller=policy object=shop/jemalloc "
            "reconcileID=" +
                scope.reconcile_id());
}

TEST(LogLineTest, ScopesNestAndEnd) {
  const auto fields = [] {
    const auto j =
        nlohmann::json::parse(FormatLine(Format::kJson, At("2026-12-04T20:10:00Z"), "info", "m"));
    return j.value("controller", std::string("-"));
  };
  {
    ReconcileScope outer("deployment", "shop/web");
    {
      ReconcileScope inner("canary", "shop/web-1");
      EXPECT_EQ(fields(), "canary");
    }
    EXPECT_EQ(fields(), "deployment");
  }
  EXPECT_EQ(fields(), "-");
}

TEST(LogLineTest, AMessageThatIsNotUtf8IsRepairedNotThrownOn) {
  std::string line;
  ASSERT_NO_THROW(line =
                      FormatLine(Format::kJson, At("2026-12-04T20:10:00Z"), "error", "bad \xff"));
  EXPECT_EQ(nlohmann::json::parse(line)["msg"], "bad \xef\xbf\xbd");
}

// A name or field value an object chose cannot end the line and forge the
// next one, or send a terminal escape: text lines escape control characters
// (JSON lines escape them anyway).
TEST(LogLineTest, TextEscapesControlCharactersSoAnObjectCannotForgeALine) {
  ReconcileScope scope("canary", "shop/web\nx");
  const std::string line =
      FormatLine(Format::kText, At("2026-12-04T20:10:00Z"), "warn",
                 "pod web-\n2026-12-04T20:10:01.000Z error forged\r\t\x1b[2J\x7f ok");
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_EQ(line,
            "2026-12-04T20:10:00.000Z warn pod web-\\n2026-12-04T20:10:01.000Z error "
            "forged\\r\\t\\x1b[2J\\x7f ok  controller=canary object=shop/web\\nx reconcileID=" +
                scope.reconcile_id());
  const auto j =
      nlohmann::json::parse(FormatLine(Format::kJson, At("2026-12-04T20:10:00Z"), "warn", "a\nb"));
  EXPECT_EQ(j["msg"], "a\nb");  // JSON keeps the text exactly, escaped by the encoding
}

TEST(LogLineTest, ReconcileIdsAreVersion4UuidsAndDiffer) {
  const std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewReconcileId();
    EXPECT_TRUE(std::regex_match(id, uuid)) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(LogConfigureTest, RefusesUnknownValuesNamingTheFlag) {
  const Status level = Configure("verbose", "text");
  EXPECT_FALSE(level.ok());
  EXPECT_NE(level.message().find("--log-level verbose"), std::string::npos) << level.message();
  const Status format = Configure("info", "logfmt");
  EXPECT_FALSE(format.ok());
  EXPECT_NE(format.message().find("--log-format logfmt"), std::string::npos) << format.message();
  EXPECT_TRUE(Configure("debug", "json").ok());
  EXPECT_TRUE(Configure("info", "text").ok());
}

}  // namespace
}  // namespace allocguard::log
