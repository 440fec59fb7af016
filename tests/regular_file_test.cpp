// Reads at offsets into many buffers at once (preadv), as a load reads runs of small blobs:
// every byte lands in its buffer, empty buffers and more buffers than one system call takes
// (IOV_MAX) included, and the end of the file is a CorruptCheckpoint, not a short buffer.
#include <gtest/gtest.h>

#include <climits>
#include <fstream>

#include "epochrun/errors.hpp"
#include "regular_file.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

class ScatteredRead : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream out(file_, std::ios::binary);
    for (std::size_t i = 0; i < kBytes; ++i) {
      out.put(static_cast<char>(i * 7 + 3));
    }
    out.close();
    fd_ = open_regular_file_for_reading(file_);
  }
  static std::byte expected(std::uint64_t at) { return static_cast<std::byte>(at * 7 + 3); }

  static constexpr std::size_t kBytes = 3 * IOV_MAX + 100;
  ScratchDir directory_;
  const std::filesystem::path file_ = directory_.path() / "data";
  FileDescriptor fd_{-1};
};

TEST_F(ScatteredRead, FillsEveryBufferInOrderPastIovMax) {
  // Buffers of 0 to 2 bytes, more than IOV_MAX of them, from byte 5 on.
  std::vector<std::vector<std::byte>> memory;
  for (std::size_t i = 0, total = 0; total + 2 < kBytes - 5; ++i) {
    memory.emplace_back(i % 3);
    total += i % 3;
  }
  std::vector<std::span<std::byte>> buffers(memory.begin(), memory.end());
  ASSERT_GT(buffers.size(), static_cast<std::size_t>(IOV_MAX));
  read_at(fd_.get(), 5, buffers, "data");
  std::uint64_t at = 5;
  for (const auto& buffer : memory) {
    for (auto byte : buffer) {
      ASSERT_EQ(byte, expected(at)) << "byte " << at;
      ++at;
    }
  }
}

TEST_F(ScatteredRead, ReadingPastTheEndIsACorruptCheckpoint) {
  std::vector<std::byte> first(kBytes - 10);
  std::vector<std::byte> second(20);
  const std::vector<std::span<std::byte>> buffers = {first, second};
  try {
    read_at(fd_.get(), 0, buffers, "data");
    FAIL() << "read past the end";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("data: short read at byte " + std::to_string(kBytes)),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace epochrun::testing
