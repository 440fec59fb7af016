// Crafted checkpoints that pass the integrity header -- a forger can recompute its hashes -- must
// still be refused by epochrun's reader with a clear error: no crash, and no allocation larger
// than the file justifies. Built with the HDF5 C API, then sealed as a real commit would be.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <sys/stat.h>
#include <xxhash.h>

#include <atomic>
#include <functional>
#include <thread>

#include "checkpoint_directory_admin.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "integrity_header.hpp"
#include "refusal.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

// These crafted files have the version 1 layout (a dataset per blob with an xxh64 attribute,
// the blob list in the node group's blob_names): version 1 files keep loading, so their reader
// is as strict as ever. The version 2 layout's crafted files are in crafted_v2_file_test.cpp.
constexpr std::int64_t kVersion1 = 1;

void write_string(hid_t object, const char* name, const std::string& value) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  const char* pointer = value.c_str();
  H5Awrite(attribute, type, &pointer);
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

void write_int(hid_t object, const char* name, std::int64_t value, hid_t type = H5T_STD_I64LE) {
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attribute, H5T_NATIVE_INT64, &value);
  H5Aclose(attribute);
  H5Sclose(space);
}

void write_names(hid_t object, const char* name, const std::vector<std::string>& values) {
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  hsize_t count = values.size();
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  std::vector<const char*> pointers;
  for (const auto& value : values) {
    pointers.push_back(value.c_str());
  }
  H5Awrite(attribute, type, pointers.data());
  H5Aclose(attribute);
  H5Sclose(space);
  H5Tclose(type);
}

// Seals `file` as a commit does, with `extents` as its raw-data extents.
void seal(const std::filesystem::path& file, std::vector<DataExtent> extents) {
  FileDescriptor fd(::open(file.c_str(), O_RDWR));
  ASSERT_TRUE(fd.valid()) << file;
  seal_checkpoint_file(fd.get(), file.string(), 512, std::move(extents));
}

struct Craft {
  std::function<void(hid_t file)> root = nullptr;  // replaces the valid root attributes
  std::function<void(hid_t node)> node = nullptr;  // fills /nodes/trainer_0
};

// A one-node checkpoint with whatever `craft` puts in it, sealed like a committed file.
std::filesystem::path crafted_checkpoint(const std::filesystem::path& directory,
                                         const Craft& craft) {
  const auto file = CheckpointDirectory(directory).file_for(1);
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_userblock(fcpl, 512);
  hid_t h5file = H5Fcreate(file.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  if (craft.root) {
    craft.root(h5file);
  } else {
    write_string(h5file, "format", "epochrun-checkpoint");
    write_int(h5file, "format_version", kVersion1);
    write_int(h5file, "epoch", 1);
    write_string(h5file, "job", "crafted");
    write_int(h5file, "num_ranks", 1);
    write_names(h5file, "node_names", {"trainer_0"});
    write_string(h5file, "config", "{}");
  }
  hid_t nodes = H5Gcreate2(h5file, "nodes", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t node = H5Gcreate2(nodes, "trainer_0", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (craft.node) {
    craft.node(node);
  }
  H5Gclose(node);
  H5Gclose(nodes);
  H5Fclose(h5file);
  H5Pclose(fcpl);
  seal(file, {});
  return file;
}

// A dataset with a declared shape and no data written (HDF5 allocates contiguous storage late).
void dataset(hid_t node, const char* name, hid_t type, std::vector<hsize_t> dims,
             bool with_checksum = true) {
  hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  hid_t created = H5Dcreate2(node, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (with_checksum) {
    write_int(created, "xxh64", 0, H5T_STD_U64LE);
  }
  H5Dclose(created);
  H5Sclose(space);
}

class CraftedFile : public ::testing::Test {
 protected:
  ScratchDir directory_;
};

TEST_F(CraftedFile, TheSameFileUncraftedIsAccepted) {
  auto file = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                   write_names(node, "blob_names", {"x"});
                                   dataset(node, "x", H5T_IEEE_F64LE, {0});
                                 }});
  CheckpointReader reader(file);
  EXPECT_EQ(reader.header().job, "crafted");
}

TEST_F(CraftedFile, HugeDimensionsAreRefusedBeforeAnyAllocation) {
  auto file = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                   write_names(node, "blob_names", {"huge"});
                                   dataset(node, "huge", H5T_IEEE_F64LE, {1ULL << 40, 1ULL << 20});
                                 }});
  EXPECT_NE(refusal(file).find("more than the whole file"), std::string::npos);
}

TEST_F(CraftedFile, AnOverflowingShapeIsRefused) {
  auto file =
      crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                           write_names(node, "blob_names", {"overflow"});
                           dataset(node, "overflow", H5T_IEEE_F64LE, {1ULL << 62, 1ULL << 62});
                         }});
  EXPECT_NE(refusal(file).find("overflows"), std::string::npos) << refusal(file);
}

TEST_F(CraftedFile, AWrongDatatypeIsRefused) {
  auto file = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                   write_names(node, "blob_names", {"shorts"});
                                   dataset(node, "shorts", H5T_STD_I16LE, {4});
                                 }});
  EXPECT_NE(refusal(file).find("datatype epochrun does not store"), std::string::npos);
}

TEST_F(CraftedFile, MissingAttributesAreNamed) {
  auto no_epoch = crafted_checkpoint(directory_.path(), {.root = [](hid_t file) {
                                       write_string(file, "format", "epochrun-checkpoint");
                                       write_int(file, "format_version", kVersion1);
                                     }});
  EXPECT_NE(refusal(no_epoch).find("attribute 'epoch' is missing"), std::string::npos);
  auto no_checksum = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                          write_names(node, "blob_names", {"x"});
                                          dataset(node, "x", H5T_IEEE_F64LE, {2}, false);
                                        }});
  EXPECT_NE(refusal(no_checksum).find("attribute 'xxh64' is missing"), std::string::npos);
}

TEST_F(CraftedFile, AttributesOfTheWrongTypeOrShapeAreRefused) {
  auto file = crafted_checkpoint(directory_.path(), {.root = [](hid_t h5file) {
                                   write_string(h5file, "format", "epochrun-checkpoint");
                                   write_string(h5file, "format_version", "one");
                                 }});
  EXPECT_NE(refusal(file).find("attribute 'format_version' has the wrong type"), std::string::npos);
  // An integer of another size, which HDF5 would convert: the format says int64 (before, a
  // 32-bit format_version was read as 1 and the file accepted).
  auto narrow = crafted_checkpoint(directory_.path(), {.root = [](hid_t h5file) {
                                     write_string(h5file, "format", "epochrun-checkpoint");
                                     write_int(h5file, "format_version", kVersion1, H5T_STD_I32LE);
                                   }});
  EXPECT_NE(refusal(narrow).find("attribute 'format_version' is not an int64"), std::string::npos)
      << refusal(narrow);
}

TEST_F(CraftedFile, LinksThatPointElsewhereAreRefused) {
  auto soft =
      crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                           write_names(node, "blob_names", {"x"});
                           H5Lcreate_soft("/etc/passwd", node, "x", H5P_DEFAULT, H5P_DEFAULT);
                         }});
  EXPECT_NE(refusal(soft).find("is a soft or external link"), std::string::npos);
  auto external = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                       write_names(node, "blob_names", {"x"});
                                       H5Lcreate_external("/tmp/other.h5", "/data", node, "x",
                                                          H5P_DEFAULT, H5P_DEFAULT);
                                     }});
  EXPECT_NE(refusal(external).find("is a soft or external link"), std::string::npos);
}

TEST_F(CraftedFile, HostileNamesInTheFileAreRefused) {
  auto file = crafted_checkpoint(directory_.path(), {.node = [](hid_t node) {
                                   write_names(node, "blob_names", {"../../etc/passwd"});
                                 }});
  EXPECT_NE(refusal(file).find("invalid blob name"), std::string::npos);
  auto nodes = crafted_checkpoint(directory_.path(), {.root = [](hid_t h5file) {
                                    write_string(h5file, "format", "epochrun-checkpoint");
                                    write_int(h5file, "format_version", kVersion1);
                                    write_int(h5file, "epoch", 1);
                                    write_string(h5file, "job", "crafted");
                                    write_names(h5file, "node_names", {"trainer_0", "trainer_0"});
                                    write_int(h5file, "num_ranks", 2);
                                    write_string(h5file, "config", "{}");
                                  }});
  EXPECT_NE(refusal(nodes).find("listed twice"), std::string::npos) << refusal(nodes);
}

// Refused as a file this epochrun cannot use, so that `latest` goes back past it.
TEST_F(CraftedFile, ANewerFormatVersionIsRefusedNamingBothVersions) {
  auto file = crafted_checkpoint(directory_.path(), {.root = [](hid_t h5file) {
                                   write_string(h5file, "format", "epochrun-checkpoint");
                                   write_int(h5file, "format_version", 4);
                                 }});
  try {
    CheckpointReader reader(file);
    FAIL();
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what())
                  .find("format version 4 is not one this epochrun reads (1 to 3): it was "
                        "written by a newer epochrun"),
              std::string::npos)
        << error.what();
  }
}

// Plays the writer of a FIFO after 10 s unless disarmed first, so that a reader blocked on
// the FIFO fails the test (blocked()) instead of hanging it.
class FifoWatchdog {
 public:
  explicit FifoWatchdog(std::filesystem::path fifo)
      : fifo_(std::move(fifo)), thread_([this] {
          for (int waited = 0; waited < 1000 && !done_; ++waited) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          if (!done_) {
            blocked_ = true;
            ::close(::open(fifo_.c_str(), O_RDWR | O_NONBLOCK));
          }
        }) {}
  ~FifoWatchdog() { disarm(); }

  // Stops the watchdog; true when it had to unblock a reader.
  bool disarm() {
    done_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
    return blocked_;
  }

 private:
  std::filesystem::path fifo_;
  std::atomic<bool> done_ = false;
  std::atomic<bool> blocked_ = false;
  std::thread thread_;
};

// A dataset of 8 bytes whose creation properties `configure` sets (external storage, a layout,
// filters), with the given xxh64 attribute.
void dataset_with(hid_t node, const char* name, const std::function<void(hid_t dcpl)>& configure,
                  std::uint64_t xxh64 = 0) {
  hsize_t count = 8;
  hid_t space = H5Screate_simple(1, &count, nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  configure(dcpl);
  hid_t created = H5Dcreate2(node, name, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(created, 0) << name;
  write_int(created, "xxh64", static_cast<std::int64_t>(xxh64), H5T_STD_U64LE);
  H5Dclose(created);
  H5Pclose(dcpl);
  H5Sclose(space);
}

// A crafted checkpoint whose one blob "x" is `configure`d, refused as corrupt (not read);
// `expected` is in the message.
void expect_refused_before_reading(const std::filesystem::path& directory,
                                   const std::function<void(hid_t dcpl)>& configure,
                                   const std::string& expected, std::uint64_t xxh64 = 0) {
  auto file = crafted_checkpoint(directory, {.node = [&](hid_t node) {
                                   write_names(node, "blob_names", {"x"});
                                   dataset_with(node, "x", configure, xxh64);
                                 }});
  try {
    CheckpointReader reader(file);
    ADD_FAILURE() << "accepted";
  } catch (const CorruptCheckpoint& error) {
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
  // A resume refuses it the same way (`latest` skips a CorruptCheckpoint).
  Workspace workspace;
  EXPECT_THROW(load_checkpoint(CheckpointDirectory(directory), Communicator::self(),
                               CheckpointExpectation{1, "crafted", {"trainer_0"}}, workspace),
               CorruptCheckpoint);
}

// External storage makes HDF5 read the data from another file: a FIFO would block the reader
// forever, and /etc/passwd would be read (with a forged checksum, even accepted).
TEST_F(CraftedFile, ExternalStorageIsRefusedBeforeAnyRead) {
  const auto fifo = directory_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  FifoWatchdog watchdog(fifo);
  expect_refused_before_reading(
      directory_.path(), [&](hid_t dcpl) { H5Pset_external(dcpl, fifo.c_str(), 0, 8); },
      "keeps its data in external files");
  EXPECT_FALSE(watchdog.disarm()) << "the external FIFO was opened for reading";
  const auto passwd = read_file("/etc/passwd").substr(0, 8);
  expect_refused_before_reading(
      directory_.path(), [](hid_t dcpl) { H5Pset_external(dcpl, "/etc/passwd", 0, 8); },
      "keeps its data in external files", XXH64(passwd.data(), passwd.size(), 0));
}

TEST_F(CraftedFile, VirtualChunkedFilteredAndCompactDatasetsAreRefused) {
  expect_refused_before_reading(
      directory_.path(),
      [](hid_t dcpl) {
        hsize_t count = 8;
        hid_t source = H5Screate_simple(1, &count, nullptr);
        H5Pset_virtual(dcpl, source, "/etc/passwd", "/data", source);
        H5Sclose(source);
      },
      "not stored contiguously");
  for (bool deflated : {false, true}) {
    expect_refused_before_reading(
        directory_.path(),
        [&](hid_t dcpl) {
          hsize_t chunk = 4;
          H5Pset_chunk(dcpl, 1, &chunk);
          if (deflated) {
            H5Pset_deflate(dcpl, 6);
          }
        },
        "not stored contiguously");
  }
  expect_refused_before_reading(
      directory_.path(), [](hid_t dcpl) { H5Pset_layout(dcpl, H5D_COMPACT); },
      "not stored contiguously");
}

// A FIFO renamed over a checkpoint's name after the directory was listed: opening it for
// reading would wait for a writer forever. It is refused at once.
TEST_F(CraftedFile, AFifoUnderACheckpointNameIsRefusedWithoutBlocking) {
  const auto file = CheckpointDirectory(directory_.path()).file_for(1);
  ASSERT_EQ(::mkfifo(file.c_str(), 0644), 0);
  FifoWatchdog watchdog(file);
  try {
    CheckpointReader reader(file);
    ADD_FAILURE() << "a FIFO was accepted as a checkpoint";
  } catch (const CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("not a regular file"), std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(watchdog.disarm()) << "opening the FIFO blocked until the watchdog wrote to it";
}

}  // namespace
}  // namespace epochrun::testing
