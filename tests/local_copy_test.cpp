// A rank's node-local copies and its spare: retention keeps the oldest copy it retires as the
// spare, the next copy is written over it (the same file, cut to the new copy's length, whole
// and verifiable), a spare that is a symlink or has a second name is never written through, and
// a level that ends deletes the spare with the copies; the files of ranks a run no longer has are
// deleted by the ranks it has; on tmpfs, a copy stored over its spare through a mapping holds
// what it records.
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
#include "mapped_store.hpp"
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

// On tmpfs a copy over its spare stores its large values through a mapping (mapped_store.hpp):
// every value of a copy made over a spare, large and small, page-aligned in memory or not, and
// one longer than the spare (partly over pages the spare did not have), holds the bytes it was
// made from, and its record their xxh64. Skipped where /dev/shm is not a tmpfs.
TEST(LocalCopyOnTmpfs, ACopyOverItsSpareHoldsTheBytesItRecords) {
  std::string pattern = "/dev/shm/epochrun-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr || !MappedStore::suits(fs::path(pattern))) {
    fs::remove(pattern);
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  }
  const fs::path dir = pattern;
  struct Remove {
    fs::path at;
    ~Remove() { fs::remove_all(at); }
  } remove{dir};
  // Values of `sizes` bytes, each from its own pattern of `epoch`, the second one starting one
  // byte into its buffer.
  std::vector<std::vector<std::byte>> buffers;
  const auto blobs = [&](std::int64_t epoch, const std::vector<std::size_t>& sizes) {
    std::vector<SavedBlob> saved;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const std::size_t skew = i == 1 ? 1 : 0;
      auto& buffer = buffers.emplace_back(sizes[i] + skew);
      for (std::size_t at = 0; at < buffer.size(); ++at) {
        buffer[at] =
            static_cast<std::byte>((at * 131 + i * 7 + static_cast<std::size_t>(epoch)) % 251);
      }
      const std::span<const std::byte> bytes = std::span(buffer).subspan(skew);
      saved.push_back(
          SavedBlob{BlobView{"v" + std::to_string(i), DType::kU8, {sizes[i]}, bytes, {}, false, {}},
                    {},
                    {},
                    nullptr});
    }
    return saved;
  };
  const auto expect_holds = [&](std::int64_t epoch, const std::vector<SavedBlob>& saved) {
    const auto mapped = MappedLocalCopy::open(local_copy_file(dir, epoch, 0));
    const auto stored = mapped.flushed(saved);
    ASSERT_EQ(stored.size(), saved.size());
    for (std::size_t i = 0; i < saved.size(); ++i) {
      const auto& want = saved[i].view.bytes;
      EXPECT_TRUE(std::equal(want.begin(), want.end(), stored[i].view.bytes.begin(),
                             stored[i].view.bytes.end()))
          << "value " << i << " of epoch " << epoch;
      EXPECT_EQ(mapped.record().blobs[i].xxh64, XXH64(want.data(), want.size(), 0)) << i;
    }
  };
  const std::vector<std::size_t> sizes = {(3 << 20) + 5, (2 << 20) + 77, 100, 1 << 20};
  const auto first = blobs(1, sizes);
  write_local_copy(dir, "job", 1, 0, 1, first);
  const auto second = blobs(2, sizes);
  write_local_copy(dir, "job", 2, 0, 1, second);
  ASSERT_EQ(remove_local_copies(dir, 0, 1, {2}, SpareCopy::kKeep), 0);
  ASSERT_TRUE(fs::exists(local_spare_file(dir, 0)));
  // Over the spare of epoch 1, the last value 3 MiB longer than the spare's.
  const auto third = blobs(3, {(3 << 20) + 5, (2 << 20) + 77, 100, 4 << 20});
  write_local_copy(dir, "job", 3, 0, 1, third);
  EXPECT_FALSE(fs::exists(local_spare_file(dir, 0)));
  expect_holds(2, second);
  expect_holds(3, third);
  // And over epoch 2's, shorter.
  ASSERT_EQ(remove_local_copies(dir, 0, 1, {3}, SpareCopy::kKeep), 0);
  const auto fourth = blobs(4, {2 << 20});
  write_local_copy(dir, "job", 4, 0, 1, fourth);
  expect_holds(4, fourth);
  expect_holds(3, third);
}

}  // namespace
}  // namespace epochrun::testing
