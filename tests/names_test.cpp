#include <gtest/gtest.h>

#include "epochrun/errors.hpp"
#include "epochrun/job.hpp"
#include "epochrun/names.hpp"
#include "epochrun/workspace.hpp"

namespace epochrun {
namespace {

TEST(Names, OrdinaryNamesPass) {
  EXPECT_NO_THROW(validate_name("weights", "blob name"));
  EXPECT_NO_THROW(validate_name("layer.0:bias-v2", "blob name"));
  EXPECT_NO_THROW(validate_name(std::string(kMaxNameLength, 'x'), "blob name"));
}

TEST(Names, PathLikeAndHostileNamesAreRejected) {
  for (std::string bad : {std::string(""), std::string("."), std::string(".."), std::string("a/b"),
                          std::string("../etc"), std::string("a\\b"), std::string("tab\there"),
                          std::string("nl\n"), std::string("nul\0x", 5), std::string("caf\xc3\xa9"),
                          std::string(kMaxNameLength + 1, 'x')}) {
    EXPECT_THROW(validate_name(bad, "blob name"), UsageError) << "accepted: " << bad;
  }
}

TEST(Names, TheErrorIsOneLineAndNamesTheKind) {
  try {
    validate_name("bad\nname", "node name");
    FAIL();
  } catch (const UsageError& error) {
    std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos);
    EXPECT_NE(message.find("node name"), std::string::npos);
  }
}

TEST(Names, WorkspaceAndJobRefuseBadNames) {
  Workspace workspace;
  EXPECT_THROW(workspace.put("../x", Blob::scalar<float>(0)), UsageError);
  EXPECT_THROW(Job("a/b"), UsageError);
  Job job("fine");
  EXPECT_THROW(job.blob<float>("..", {1}, {.output = true}), UsageError);
}

}  // namespace
}  // namespace epochrun
