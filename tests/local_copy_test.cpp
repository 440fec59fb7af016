// A rank's node-local copies and its spare: retention keeps the oldest copy it retires as the
// spare, the next copy is written over it (the same file, cut to the new copy's length, whole
// and verifiable), a spare that is a symlink or has a second name is never written through, and
// a level that ends deletes the spare with the copies; the files of ranks a run no longer has are
// deleted by the ranks it has.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "local_copy.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

namespace fs = std::filesystem;

ino_t inode_of(const fs::path& file) {
  struct stat status {};
  EXPECT_EQ(::lstat(file.c_str(), &status), 0) << file;
  return status.st_ino;
}

class LocalCopySpare : public ::testing::Test {
 protected:
  // Rank 0's copy of `epoch`: one u8 blob of `size` bytes, each `epoch`.
  LocalCopyRecord write(std::int64_t epoch, std::size_t size) {
    bytes_.emplace_back(size, static_cast<std::byte>(epoch));
    BlobView view{"weights", DType::kU8, {size}, bytes_.back(), {}, false, {}};
    return write_local_copy(dir_.path(), "job", epoch, 0, 1, {SavedBlob{view, {}, {}, nullptr}});
  }

  fs::path copy(std::int64_t epoch) const { return local_copy_file(dir_.path(), epoch, 0); }
  fs::path spare() const { return local_spare_file(dir_.path(), 0); }

  // The copy of `epoch` opened as a load opens it: its one blob holds `size` bytes equal to
  // `epoch`, whose xxh64 is the record's.
  void expect_whole(std::int64_t epoch, std::size_t size) const {
    const auto mapped = MappedLocalCopy::open(copy(epoch));
    ASSERT_EQ(mapped.record().blobs.size(), 1u);
    const auto& blob = mapped.record().blobs[0];
    EXPECT_EQ(blob.bytes, size);
    const std::vector<std::byte> expected(size, static_cast<std::byte>(epoch));
    EXPECT_EQ(blob.xxh64, XXH64(expected.data(), expected.size(), 0));
  }

  ScratchDir dir_;
  std::vector<std::vector<std::byte>> bytes_;
};

TEST_F(LocalCopySpare, TheNextCopyIsWrittenOverTheCopyRetentionRetired) {
  write(1, 3 << 20);
  const auto first = inode_of(copy(1));
  write(2, 3 << 20);
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 1, {2}, SpareCopy::kKeep), 0);
  EXPECT_FALSE(fs::exists(copy(1)));
  ASSERT_TRUE(fs::exists(spare()));
  EXPECT_EQ(inode_of(spare()), first);

  // Shorter than the spare: the same file, cut to its own length.
  write(3, 1 << 20);
  EXPECT_FALSE(fs::exists(spare()));
  EXPECT_EQ(inode_of(copy(3)), first);
  expect_whole(3, 1 << 20);
  expect_whole(2, 3 << 20);

  const auto second = inode_of(copy(2));
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 1, {3}, SpareCopy::kKeep), 0);
  EXPECT_EQ(inode_of(spare()), second);
  // A level that ends (or whose file system failed) leaves no spare.
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 1, {}, SpareCopy::kDelete), 0);
  EXPECT_TRUE(list_directory(dir_.path()).empty());
}

TEST_F(LocalCopySpare, ASpareThatIsASymlinkOrHasAnotherNameIsNeverWrittenThrough) {
  const auto outside = dir_.path() / "outside";
  std::ofstream(outside) << "not a copy";
  fs::create_symlink(outside, spare());
  write(1, 2 << 20);
  expect_whole(1, 2 << 20);
  EXPECT_NE(inode_of(copy(1)), inode_of(outside));

  fs::create_hard_link(outside, spare());
  write(2, 2 << 20);
  expect_whole(2, 2 << 20);
  EXPECT_NE(inode_of(copy(2)), inode_of(outside));
  EXPECT_TRUE(read_file(outside) == "not a copy") << "the other name's file was written";
  EXPECT_FALSE(fs::exists(spare()));
}

// A directory under the spare's name is not the rank's: left where it is with what it holds,
// the copy made in a new file, nothing left under a temporary name; retention and the end of the
// level leave it alone too.
TEST_F(LocalCopySpare, ADirectoryUnderTheSparesNameIsLeftAlone) {
  fs::create_directory(spare());
  std::ofstream(spare() / "inside") << "mine";
  write(1, 2 << 20);
  expect_whole(1, 2 << 20);
  write(2, 2 << 20);
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 1, {2}, SpareCopy::kKeep), 0);
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 1, {2}, SpareCopy::kDelete), 0);
  EXPECT_EQ(read_file(spare() / "inside"), "mine");
  EXPECT_EQ(list_directory(dir_.path()),
            (std::vector<std::string>{copy(2).filename().string(), spare().filename().string()}));
}

// A spare of another user's is not written over (the copy would keep its owner), and one of this
// user's with another mode becomes a copy of a new copy's mode, 0644.
TEST_F(LocalCopySpare, ACopyHasACopysOwnerAndModeWhateverTheSpare) {
  std::ofstream(spare()) << "a spare";
  ASSERT_EQ(::chmod(spare().c_str(), 04777), 0);
  const auto ours = inode_of(spare());
  write(1, 1 << 20);
  EXPECT_EQ(inode_of(copy(1)), ours);
  struct stat status {};
  ASSERT_EQ(::stat(copy(1).c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0644u);

  if (::geteuid() != 0) {
    GTEST_SKIP() << "giving a file to another user needs root";
  }
  std::ofstream(spare()) << "another user's";
  ASSERT_EQ(::chown(spare().c_str(), 65534, 65534), 0);
  write(2, 1 << 20);
  ASSERT_EQ(::stat(copy(2).c_str(), &status), 0);
  EXPECT_EQ(status.st_uid, ::geteuid());
  expect_whole(2, 1 << 20);
}

// A run on 2 ranks where one on 3 left its files: rank 2's copies of the epochs not kept, its
// leftover temporary and its spare are deleted by whichever rank retains (rank 0 here); its copy
// of a kept epoch stays, as do rank 1's files, which rank 1 retains itself.
TEST_F(LocalCopySpare, TheFilesOfARankTheRunDoesNotHaveAreDeletedByItsRanks) {
  const auto file = [&](const std::string& name) {
    std::ofstream(dir_.path() / name) << "a file";
    return name;
  };
  const auto kept = file(local_copy_file(dir_.path(), 2, 2).filename());
  const auto others = {file(local_copy_file(dir_.path(), 1, 1).filename()),
                       file(local_spare_file(dir_.path(), 1).filename())};
  file(local_copy_file(dir_.path(), 1, 2).filename());
  file(temporary_sibling(local_copy_file(dir_.path(), 3, 2)).filename());
  file(local_spare_file(dir_.path(), 2).filename());
  file(local_spare_file(dir_.path(), 3).filename());
  EXPECT_EQ(remove_local_copies(dir_.path(), 0, 2, {2}, SpareCopy::kKeep), 0);
  std::vector<std::string> left{kept};
  left.insert(left.end(), others.begin(), others.end());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(list_directory(dir_.path()), left);
}

// A copy whose tail says its record is a tebibyte long, in a copy made 8 TiB long (sparse): the
// record is refused as damaged by its length, never read. Before: the read allocated the
// tebibyte first, and the copy was refused as "std::bad_alloc".
TEST_F(LocalCopySpare, ARecordThatSaysItIsHugeIsRefusedUnread) {
  write(1, 4096);
  constexpr off_t kSize = off_t{8} << 40;
  ASSERT_EQ(::truncate(copy(1).c_str(), kSize), 0);
  {
    std::fstream tail(copy(1), std::ios::in | std::ios::out | std::ios::binary);
    tail.seekp(kSize - 16);
    const std::uint64_t length = std::uint64_t{1} << 40;
    tail.write(reinterpret_cast<const char*>(&length), 8);
    tail.write("EPRLOCL1", 8);
    ASSERT_TRUE(tail.good());
  }
  try {
    MappedLocalCopy::open(copy(1));
    ADD_FAILURE() << "the copy was accepted";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find("its record says it is 1099511627776 bytes long"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace epochrun::testing
