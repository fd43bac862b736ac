#include "operator/api/json_fields.h"

#include <gtest/gtest.h>

namespace allocguard::api::json_fields {
namespace {

using nlohmann::json;

TEST(JsonFieldsTest, AnnotationIsTheStringOrNothingAndNeverThrows) {
  const json d = json::parse(R"({"metadata": {"annotations": {"a": "x", "e": "", "n": 3,
                                  "z": null, "o": {"k": "v"}}}})");
  EXPECT_EQ(Annotation(d, "a"), "x");
  EXPECT_EQ(Annotation(d, "e"), "");
  for (const char* key : {"n", "z", "o", "missing"}) EXPECT_EQ(Annotation(d, key), "") << key;
  EXPECT_TRUE(HasAnnotation(d, "a"));
  EXPECT_TRUE(HasAnnotation(d, "e"));  // an empty value is still there
  for (const char* key : {"n", "z", "o", "missing"}) EXPECT_FALSE(HasAnnotation(d, key)) << key;
  // Objects without (usable) metadata have no annotations.
  for (const char* text : {R"(null)", R"([])", R"("s")", R"({})", R"({"metadata": 1})",
                           R"({"metadata": {"annotations": []}})"}) {
    const json o = json::parse(text);
    EXPECT_EQ(Annotation(o, "a"), "") << text;
    EXPECT_FALSE(HasAnnotation(o, "a")) << text;
  }
}

TEST(JsonFieldsTest, PausedOnlyWhenTheBooleanTrue) {
  EXPECT_TRUE(Paused(json::parse(R"({"spec": {"paused": true}})")));
  for (const char* text :
       {R"({"spec": {"paused": false}})", R"({"spec": {"paused": "true"}})",
        R"({"spec": {"paused": 1}})", R"({"spec": {}})", R"({"spec": 1})", R"({})", R"(null)"}) {
    EXPECT_FALSE(Paused(json::parse(text))) << text;  // never throws on a wrong type either
  }
}

}  // namespace
}  // namespace allocguard::api::json_fields
