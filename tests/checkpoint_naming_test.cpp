#include <gtest/gtest.h>

#include "durable_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/errors.hpp"

namespace epochrun {
namespace {

// The reference's test_ckpt_name: each epoch has one predictable file name.
TEST(CheckpointNaming, EachEpochHasItsOwnFile) {
  CheckpointDirectory directory("/data/run");
  EXPECT_EQ(directory.file_for(5), std::filesystem::path("/data/run/epoch-000005.h5"));
  EXPECT_EQ(directory.file_for(0), std::filesystem::path("/data/run/epoch-000000.h5"));
  EXPECT_EQ(checkpoint_file_name(1234567), "epoch-1234567.h5");
  EXPECT_THROW(checkpoint_file_name(-1), UsageError);
}

TEST(CheckpointNaming, OnlyCanonicalNamesParse) {
  EXPECT_EQ(parse_checkpoint_file_name("epoch-000005.h5"), 5);
  EXPECT_EQ(parse_checkpoint_file_name("epoch-1234567.h5"), 1234567);
  for (const char* other :
       {"epoch-5.h5", "epoch-0000005.h5", ".epoch-000005.h5.tmp.1.2", "epoch-000005.h5.tmp",
        "epoch--00005.h5", "index.json", "epoch-00000a.h5"}) {
    EXPECT_FALSE(parse_checkpoint_file_name(other).has_value()) << other;
  }
}

// Stale-temporary cleanup deletes by name: only what temporary_sibling makes may match.
TEST(TemporaryNames, OnlyWhatTemporarySiblingMakesIsATemporaryName) {
  for (const char* target : {"epoch-000005.h5", "index.json", "x"}) {
    const auto made = temporary_sibling(std::filesystem::path("/data/run") / target);
    EXPECT_EQ(made.parent_path(), "/data/run");
    EXPECT_EQ(temporary_target(made.filename().string()), target) << made;
  }
  EXPECT_EQ(temporary_target(".epoch-000005.h5.tmp.4242.0123456789abcdef"), "epoch-000005.h5");
  for (const char* other :
       {".notes.tmp.txt", ".epoch-000005.h5.tmp.4242.12345", ".epoch-000005.h5.tmp.4242.draft",
        ".epoch-000005.h5.tmp.4242.0123456789ABCDEF", ".epoch-000005.h5.tmp.4242.0123456789abcde",
        ".epoch-000005.h5.tmp.4242.0123456789abcdef0",
        ".epoch-000005.h5.tmp.04242.0123456789abcdef", ".epoch-000005.h5.tmp..0123456789abcdef",
        ".epoch-000005.h5.tmp.x4.0123456789abcdef", "epoch-000005.h5.tmp.4242.0123456789abcdef",
        "..tmp.4242.0123456789abcdef", ".epoch-000005.h5.tmp.12345678901.0123456789abcdef",
        ".tmp.4242.0123456789abcdef", ""}) {
    EXPECT_FALSE(temporary_target(other).has_value()) << other;
  }
}

TEST(CheckpointDirectory, AMissingDirectoryHasNoEpochs) {
  CheckpointDirectory directory("/nonexistent/epochrun/dir");
  EXPECT_TRUE(directory.committed_epochs().empty());
  EXPECT_FALSE(directory.latest_epoch().has_value());
  EXPECT_NE(directory.describe_missing(3).find("holds none"), std::string::npos);
}

}  // namespace
}  // namespace epochrun
