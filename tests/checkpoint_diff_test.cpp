// The diff of two checkpoints' records (`epochrun inspect --diff`): what counts as added,
// removed, changed and unchanged, and configuration changes.
#include <gtest/gtest.h>

#include "inspect/checkpoint_diff.hpp"

namespace epochrun::testing {
namespace {

CheckpointHeader header(std::int64_t epoch, std::map<std::string, std::vector<BlobRecord>> blobs,
                        std::string config) {
  CheckpointHeader h;
  h.epoch = epoch;
  h.job = "job";
  for (const auto& [node, records] : blobs) {
    h.node_names.push_back(node);
  }
  h.blobs = std::move(blobs);
  h.config_json = std::move(config);
  return h;
}

std::vector<std::string> names(const nlohmann::json& blobs) {
  std::vector<std::string> out;
  for (const auto& blob : blobs) {
    out.push_back(blob["blob"].get<std::string>());
  }
  return out;
}

TEST(CheckpointDiff, BlobsAreAddedRemovedChangedByDtypeShapeOrChecksumOrUnchanged) {
  const auto from = header(1,
                           {{"n0",
                             {{"same", DType::kF64, {4}, 1},
                              {"gone", DType::kI64, {}, 2},
                              {"sum", DType::kF64, {4}, 3},
                              {"shape", DType::kF64, {4}, 4},
                              {"dtype", DType::kF64, {4}, 5}}},
                            {"n1", {{"w", DType::kF32, {2, 2}, 6}}}},
                           R"({"a": "1", "b": "2", "gone": "x"})");
  const auto to = header(2,
                         {{"n0",
                           {{"same", DType::kF64, {4}, 1},
                            {"sum", DType::kF64, {4}, 30},
                            {"shape", DType::kF64, {2, 2}, 4},
                            {"dtype", DType::kI64, {4}, 5},
                            {"new", DType::kBytes, {9}, 7}}},
                          {"n2", {{"w", DType::kF32, {2, 2}, 6}}}},
                         R"({"a": "1", "b": "3", "new": "y"})");
  const auto diff = cli::diff_checkpoints(from, to);
  EXPECT_EQ(diff["from_epoch"], 1);
  EXPECT_EQ(diff["to_epoch"], 2);
  EXPECT_EQ(names(diff["changed"]), (std::vector<std::string>{"n0/dtype", "n0/shape", "n0/sum"}));
  EXPECT_EQ(names(diff["added"]), (std::vector<std::string>{"n0/new", "n2/w"}));
  EXPECT_EQ(names(diff["removed"]), (std::vector<std::string>{"n0/gone", "n1/w"}));
  EXPECT_EQ(diff["unchanged"], 1);
  EXPECT_EQ(diff["changed"][1]["to"]["shape"], nlohmann::json({2, 2}));
  EXPECT_EQ(diff["changed"][2]["from"]["xxh64"], "0000000000000003");
  EXPECT_EQ(diff["changed"][2]["to"]["xxh64"], "000000000000001e");
  EXPECT_EQ(diff["config_changes"], nlohmann::json::parse(R"([{"key": "b", "from": "2", "to": "3"},
                                      {"key": "gone", "from": "x", "to": null},
                                      {"key": "new", "from": null, "to": "y"}])"));

  std::ostringstream text;
  cli::print_diff(text, diff);
  EXPECT_EQ(text.str(),
            "epoch 1 -> epoch 2: 3 changed, 2 added, 2 removed, 1 unchanged blobs; 3 "
            "configuration changes\n"
            "changed  n0/dtype  f64[4] -> i64[4]  xxh64 0000000000000005 -> 0000000000000005\n"
            "changed  n0/shape  f64[4] -> f64[2, 2]  xxh64 0000000000000004 -> 0000000000000004\n"
            "changed  n0/sum  f64[4]  xxh64 0000000000000003 -> 000000000000001e\n"
            "added    n0/new  bytes[9]\n"
            "added    n2/w  f32[2, 2]\n"
            "removed  n0/gone  i64[]\n"
            "removed  n1/w  f32[2, 2]\n"
            "config   b: \"2\" -> \"3\"\n"
            "config   gone: \"x\" -> null\n"
            "config   new: null -> \"y\"\n");
}

TEST(CheckpointDiff, AnUnreadableConfigurationCountsAsEmpty) {
  const auto a = header(1, {}, "not json");
  const auto b = header(2, {}, R"({"k": 1})");
  EXPECT_EQ(cli::diff_checkpoints(a, b)["config_changes"].size(), 1u);
  EXPECT_EQ(cli::diff_checkpoints(a, a)["config_changes"].size(), 0u);
}

}  // namespace
}  // namespace epochrun::testing
