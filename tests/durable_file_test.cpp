// create_private_directories says why a path cannot be used: a name that exists but leads
// nowhere reachable (a dead network mount: ENOTCONN; a symlink loop: ELOOP) is reported with
// that errno, and only a real non-directory as "a non-directory is in the way".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// The message create_private_directories throws for `directory` (fails the test if none).
std::string refusal_of(const std::filesystem::path& directory) {
  try {
    create_private_directories(directory);
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << directory << " was created";
  return "";
}

TEST(CreatePrivateDirectories, ANonDirectoryInTheWayIsNamedAsSuch) {
  ScratchDir scratch;
  std::ofstream(scratch / "file") << "not a directory";
  const auto message = refusal_of(scratch / "file" / "checkpoints");
  EXPECT_NE(message.find("file: a non-directory is in the way"), std::string::npos) << message;
}

TEST(CreatePrivateDirectories, AnUnreachableNameGivesItsErrnoNotANonDirectory) {
  ScratchDir scratch;
  std::filesystem::create_symlink("loop", scratch / "loop");  // mkdir: EEXIST; stat: ELOOP
  const auto message = refusal_of(scratch / "loop" / "checkpoints");
  EXPECT_NE(message.find(std::strerror(ELOOP)), std::string::npos) << message;
  EXPECT_EQ(message.find("non-directory"), std::string::npos) << message;
}

// A real FUSE mount whose file system process is gone, as on a host whose network file
// system client died: every access to it fails with ENOTCONN. The "file system" here is this
// test: it mounts /dev/fuse and closes the device without ever answering, which aborts the
// connection.
TEST(CreatePrivateDirectories, ADeadFuseMountSaysTransportEndpointIsNotConnected) {
  ScratchDir scratch;
  const auto mount_point = scratch / "shared";
  std::filesystem::create_directory(mount_point);
  const int device = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (device < 0) {
    GTEST_SKIP() << "no /dev/fuse here: " << std::strerror(errno);
  }
  const std::string options = "fd=" + std::to_string(device) +
                              ",rootmode=40000,user_id=" + std::to_string(::getuid()) +
                              ",group_id=" + std::to_string(::getgid());
  if (::mount("dead", mount_point.c_str(), "fuse", MS_NOSUID | MS_NODEV, options.c_str()) != 0) {
    const int why = errno;
    ::close(device);
    GTEST_SKIP() << "cannot mount FUSE here: " << std::strerror(why);
  }
  ::close(device);
  const auto message = refusal_of(mount_point / "checkpoints");
  ::umount2(mount_point.c_str(), MNT_DETACH);
  EXPECT_NE(message.find(std::strerror(ENOTCONN)), std::string::npos) << message;
  EXPECT_EQ(message.find("non-directory"), std::string::npos) << message;
}

}  // namespace
}  // namespace epochrun::testing
