// A node-local epoch's manifest read back: a damaged one is refused with a short reason, and
// the numbers it states are reported as written, not as a 32-bit truncation of them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "epochrun/errors.hpp"
#include "local_manifest.hpp"

namespace epochrun::testing {
namespace {

std::string manifest_text() {
  LocalManifest manifest{"sgd_regression", 3, 2, "none", "{}", {}};
  manifest.parts = {{0, "host1", 11, 4096}, {1, "host2", 22, 4096}};
  return local_manifest_text(manifest);
}

// The CorruptCheckpoint message `text` is refused with.
std::string refusal(const std::string& text) {
  try {
    parse_local_manifest(text, "D/epoch-000003.local.json");
  } catch (const CorruptCheckpoint& error) {
    return error.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

TEST(LocalManifest, AWholeOneReadsBack) {
  const auto manifest = parse_local_manifest(manifest_text(), "m");
  EXPECT_EQ(manifest.epoch, 3);
  ASSERT_EQ(manifest.parts.size(), 2u);
  EXPECT_EQ(manifest.parts[1].host, "host2");
}

// Cut anywhere, the reason is one short line, not the JSON parser's echo of what it read.
TEST(LocalManifest, ATruncatedOneIsRefusedInAShortLine) {
  const auto text = manifest_text() + std::string(2000, ' ');
  for (const auto cut : {std::size_t{1}, text.size() / 2, manifest_text().size() - 1}) {
    const auto reason = refusal(text.substr(0, cut) + std::string(1000, 'x'));
    EXPECT_NE(reason.find("D/epoch-000003.local.json: not valid JSON"), std::string::npos)
        << reason;
    EXPECT_LT(reason.size(), 120u) << reason;
  }
}

TEST(LocalManifest, NumbersOutOfRangeAreReportedAsWritten) {
  auto json = nlohmann::json::parse(manifest_text());
  json["ranks"] = 1000000000000LL;
  EXPECT_NE(refusal(json.dump()).find("1000000000000 ranks"), std::string::npos)
      << refusal(json.dump());
  json = nlohmann::json::parse(manifest_text());
  json["parts"][1]["rank"] = 4294967297LL;  // 2^32 + 1: 1 as a 32-bit int
  EXPECT_NE(refusal(json.dump()).find("4294967297"), std::string::npos) << refusal(json.dump());
}

}  // namespace
}  // namespace epochrun::testing
