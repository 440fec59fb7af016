// One judge of a committed checkpoint on every path (docs/FORMAT.md, "What every reader
// checks"): damaged HDF5 metadata, a flipped blob index, forged objects under a resealed integrity
// header, a newer format version and an unknown index column are refused by the resume (at the
// rank count that wrote the file and at another) exactly as by `inspect --verify`, `latest` falls
// back past each with its warning, and the upload copies nothing that does not verify. A run
// repairs what a crash left: index.json and retention brought up to the directory, and the
// start-up check's stale probe files removed. And the property: a byte of a small file's metadata
// flipped, the resume's reader and CheckpointReader either both refuse the file or both load the
// same values.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "checkpoint_load_v3.hpp"
#include "checkpoint_reader_v3.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/errors.hpp"
#include "global_array_read.hpp"
#include "integrity_header.hpp"
#include "launch.hpp"
#include "regular_file.hpp"
#include "test_support.hpp"
#include "verified_read.hpp"

namespace epochrun::testing {
namespace {

namespace fs = std::filesystem;

constexpr double kRunTimeout = 120;

// `epochrun args...` on `ranks` ranks in `cwd`, bounded by kRunTimeout.
ProcessResult run_epochrun(const std::vector<std::string>& args, const fs::path& cwd,
                           int ranks = 3) {
  return run_within(epochrun_on_ranks(ranks, args), cwd, kRunTimeout);
}

// `epochrun run` of `job` into D, warnings only, then `extra`.
std::vector<std::string> job_run(const std::string& job, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--job", job, "--log-level", "warn", "--checkpoint-dir",
                                   "D"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<std::string> sum_pipeline_run(const std::vector<std::string>& extra) {
  return job_run("sum_pipeline", extra);
}

std::vector<std::string> resume_from(const std::string& epoch,
                                     const std::vector<std::string>& extra = {}) {
  auto args = sum_pipeline_run({"--resume-from-epoch", epoch, "--summary-json", "S"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::uint8_t byte_at(const fs::path& file, std::uint64_t offset) {
  const FileDescriptor fd(::open(file.c_str(), O_RDONLY));
  std::uint8_t value = 0;
  EXPECT_EQ(::pread(fd.get(), &value, 1, static_cast<off_t>(offset)), 1);
  return value;
}

void put_byte(const fs::path& file, std::uint64_t offset, std::uint8_t value) {
  const FileDescriptor fd(::open(file.c_str(), O_RDWR));
  ASSERT_EQ(::pwrite(fd.get(), &value, 1, static_cast<off_t>(offset)), 1);
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  put_byte(file, offset, static_cast<std::uint8_t>(byte_at(file, offset) ^ 0xff));
}

IntegrityHeader header_of(const fs::path& file) {
  const FileDescriptor fd(::open(file.c_str(), O_RDONLY));
  return read_integrity_header(fd.get(), file.string());
}

// The offsets of the file's HDF5 metadata: every byte after the user block outside the data
// extents.
std::vector<std::uint64_t> metadata_offsets(const fs::path& file) {
  const auto header = header_of(file);
  std::vector<std::uint64_t> offsets;
  std::uint64_t at = header.user_block_size;
  for (const auto& extent : header.extents) {
    for (; at < extent.offset; ++at) {
      offsets.push_back(at);
    }
    at = extent.offset + extent.length;
  }
  for (; at < header.file_size; ++at) {
    offsets.push_back(at);
  }
  return offsets;
}

// The used part of the user block: the integrity header, the layout record's head and record.
std::uint64_t user_block_in_use(const fs::path& file) {
  const auto header = header_of(file);
  const auto bytes = read_file(file).substr(0, header.user_block_size);
  return bytes.find_last_not_of('\0') + 1;
}

// `craft` changes the file with the HDF5 C API; then the integrity header is sealed again to
// match (a new metadata hash) while the layout record stays as the writer wrote it, byte for
// byte: what a forger, or a tool that rewrote the metadata and resealed it, leaves.
void reseal_keeping_record(const fs::path& file, const std::function<void(hid_t)>& craft) {
  const auto original = header_of(file);
  const auto user_block = read_file(file).substr(0, original.user_block_size);
  hid_t h5file = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(h5file, 0);
  craft(h5file);
  ASSERT_GE(H5Fclose(h5file), 0);
  const FileDescriptor fd(::open(file.c_str(), O_RDWR));
  seal_checkpoint_file(fd.get(), file.string(), original.user_block_size, original.extents);
  // The header's fields and checksum end 72 + 16 N bytes in; the record's head follows.
  const auto header_end = 72 + 16 * original.extents.size();
  ASSERT_EQ(::pwrite(fd.get(), user_block.data() + header_end, user_block.size() - header_end,
                     static_cast<off_t>(header_end)),
            static_cast<ssize_t>(user_block.size() - header_end));
}

void write_int64_attribute(hid_t object, const char* name, std::int64_t value) {
  hid_t attribute = H5Aopen(object, name, H5P_DEFAULT);
  ASSERT_GE(attribute, 0);
  ASSERT_GE(H5Awrite(attribute, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(attribute);
}

// Replaces /index/blobs by a table of its rows changed by `change` (the row bytes, in the file's
// row type) under `type` (the file's row type unless `widen` gives another and the copy).
void rewrite_index(hid_t file, const std::function<void(hid_t type, std::vector<char>&)>& change,
                   const std::function<hid_t(hid_t type)>& widen = nullptr) {
  hid_t dataset = H5Dopen2(file, "index/blobs", H5P_DEFAULT);
  ASSERT_GE(dataset, 0);
  hid_t type = H5Dget_type(dataset);
  hid_t space = H5Dget_space(dataset);
  const auto rows = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space));
  std::vector<char> bytes(rows * H5Tget_size(type));
  ASSERT_GE(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0);
  H5Dclose(dataset);
  hid_t written = widen ? widen(type) : H5Tcopy(type);
  std::vector<char> out(rows * H5Tget_size(written), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * H5Tget_size(written), bytes.data() + r * H5Tget_size(type),
                H5Tget_size(type));
  }
  change(written, out);
  ASSERT_GE(H5Ldelete(file, "index/blobs", H5P_DEFAULT), 0);
  hid_t replaced =
      H5Dcreate2(file, "index/blobs", written, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(replaced, 0);
  ASSERT_GE(H5Dwrite(replaced, written, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  H5Dclose(replaced);
  H5Tclose(written);
  H5Tclose(type);
  H5Sclose(space);
}

// What a reader made of a file: refused (the error's words), or every value it holds.
struct Outcome {
  std::optional<std::string> refusal;
  std::map<std::string, Blob> values;
};

// Runs `read`; a CheckpointError is a refusal, anything else thrown fails the test.
Outcome outcome_of(const std::function<std::map<std::string, Blob>()>& read, const char* who) {
  try {
    return Outcome{std::nullopt, read()};
  } catch (const CheckpointError& error) {
    return Outcome{error.what(), {}};
  } catch (const std::exception& error) {
    ADD_FAILURE() << who << " failed with neither a refusal nor a load: " << error.what();
    return Outcome{std::string("unexpected: ") + error.what(), {}};
  }
}

// What a resume's rank 0 reads of `file` (its layout, judged as the load judges it, for a run of
// `job` at the file's rank count and epoch), then every value it holds, read as the ranks read
// theirs: through that layout, each verified.
Outcome as_the_resume_reads(const fs::path& file, const LoadRequest& request) {
  return outcome_of(
      [&] {
        RootLayout root;
        std::int64_t version = 0;
        read_layout_for_load(file, request, static_cast<int>(request.node_names.size()), version,
                             root);
        if (!root.stored) {
          throw CheckpointError("format version " + std::to_string(version));
        }
        const auto& stored = *root.stored;
        const auto fd = open_regular_file_for_reading(file);
        const StoredValues where(stored);
        std::map<std::string, Blob> values;
        for (std::size_t i = 0; i < stored.description.blobs.size(); ++i) {
          const auto& blob = stored.description.blobs[i];
          std::vector<BlobRecord> records;
          std::vector<std::uint64_t> offsets;
          std::vector<std::string> names;
          if (blob.kind == StorageKind::kGlobalArray) {
            values["arrays/" + blob.name] = read_array_v3(fd.get(), stored, i, std::nullopt);
            continue;
          }
          const auto nodes = blob.kind == StorageKind::kReplicated ? 1 : stored.description.ranks();
          for (std::uint64_t rank = 0; rank < nodes; ++rank) {
            auto value = where.at(i, rank);
            records.push_back(value.record);
            offsets.push_back(value.offset);
            names.push_back(blob.kind == StorageKind::kReplicated
                                ? "replicated/" + blob.name
                                : stored.description.node_names[rank] + "/" + blob.name);
          }
          auto read = read_verified_blobs(fd.get(), records, offsets,
                                          [&](std::size_t k) { return names[k]; });
          for (std::size_t k = 0; k < read.size(); ++k) {
            values[names[k]] = std::move(read[k]);
          }
        }
        return values;
      },
      "the resume's reader");
}

// Every value of `file` as CheckpointReader (inspect --verify, load_blobs) reads it.
Outcome as_checkpoint_reader_reads(const fs::path& file) {
  return outcome_of(
      [&] {
        std::map<std::string, Blob> values;
        for (auto& [node, blobs] : everything_in(file)) {
          const auto prefix = node == "(replicated)" ? std::string("replicated")
                              : node == "(arrays)"   ? std::string("arrays")
                                                     : node;
          for (auto& [name, blob] : blobs) {
            values[prefix + "/" + name] = std::move(blob);
          }
        }
        return values;
      },
      "CheckpointReader");
}

// What a resume of the run that wrote `file` asks for, at `epoch` (the file's own by default).
LoadRequest request_for(const fs::path& file, std::optional<std::int64_t> epoch = std::nullopt) {
  const CheckpointReader reader(file);
  const auto& header = reader.header();
  return LoadRequest{epoch.value_or(header.epoch), header.job, header.node_names, {}, {}, {}, {}};
}

// Both in-process readers refuse `file`, each naming `expected`.
void expect_every_reader_refuses(const fs::path& file, const LoadRequest& request,
                                 const std::string& expected) {
  for (const auto& outcome :
       {as_the_resume_reads(file, request), as_checkpoint_reader_reads(file)}) {
    ASSERT_TRUE(outcome.refusal) << "a reader loaded " << file << ", which must be refused for "
                                 << expected;
    EXPECT_NE(outcome.refusal->find(expected), std::string::npos) << *outcome.refusal;
  }
}

std::vector<std::string> committed_in(const fs::path& directory) {
  std::vector<std::string> files;
  for (const auto& name : list_directory(directory)) {
    if (name.starts_with("epoch-")) {
      files.push_back(name);
    }
  }
  return files;
}

class Judge : public ::testing::Test {
 protected:
  // One finished sum_pipeline on 3 ranks (epochs 0 to 4), copied for each test.
  static void SetUpTestSuite() {
    finished_ = std::make_unique<ScratchDir>();
    const auto run = run_epochrun(sum_pipeline_run({}), finished_->path());
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  static void TearDownTestSuite() { finished_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(finished_);
    fs::copy(finished_->path() / "D", cwd_ / "D", fs::copy_options::recursive);
  }

  fs::path epoch_file(int epoch) const {
    return cwd_ / "D" / ("epoch-00000" + std::to_string(epoch) + ".h5");
  }
  nlohmann::json summary() const { return nlohmann::json::parse(read_file(cwd_ / "S")); }

  // With epoch 4 refused for `expected`: both in-process readers refuse it; a resume from it
  // ends with exit 3 and that line, at 3 ranks and at 2; `inspect --verify` calls it CORRUPT for
  // the same; `latest` skips it with its warning, resumes from epoch 3 and commits a new epoch 4.
  void expect_epoch_4_refused_everywhere(const std::string& expected) {
    expect_every_reader_refuses(epoch_file(4), request_for(epoch_file(3), 4), expected);
    const auto inspected = run_within({EPOCHRUN_BINARY, "inspect", "D", "--verify"}, cwd_.path(),
                                      kRunTimeout, kMpiEnvironment);
    EXPECT_EQ(inspected.exit_code, 3) << inspected.out << inspected.err;
    EXPECT_NE((inspected.out + inspected.err).find(expected), std::string::npos)
        << inspected.out << inspected.err;
    for (const int ranks : {3, 2}) {
      const auto resumed = run_epochrun(resume_from("4"), cwd_.path(), ranks);
      EXPECT_EQ(resumed.exit_code, 3) << ranks << " ranks: " << resumed.err;
      EXPECT_NE(resumed.err.find(expected), std::string::npos)
          << ranks << " ranks: " << resumed.err;
    }
    const auto latest = run_epochrun(resume_from("latest"), cwd_.path());
    ASSERT_EQ(latest.exit_code, 0) << latest.err;
    EXPECT_NE(latest.err.find("skipping corrupt checkpoint of epoch 4"), std::string::npos)
        << latest.err;
    EXPECT_NE(latest.err.find(expected), std::string::npos) << latest.err;
    EXPECT_EQ(summary()["resumed_from"], 3);
    const auto verified = run_within({EPOCHRUN_BINARY, "inspect", "D", "--verify"}, cwd_.path(),
                                     kRunTimeout, kMpiEnvironment);
    EXPECT_EQ(verified.exit_code, 0)
        << "the directory still fails verification after `latest`: " << verified.out
        << verified.err;
  }

  static std::unique_ptr<ScratchDir> finished_;
  ScratchDir cwd_;
};

std::unique_ptr<ScratchDir> Judge::finished_;

// Case 1: one byte of the HDF5 metadata changed -- the superblock's signature, its body, its
// end-of-file address, the root group's object header, the metadata's last byte. Before: a
// resume from the damaged epoch exited 0 (it read the layout record and never hashed the
// metadata) and `--upload-dir` uploaded the damaged file.
TEST_F(Judge, DamagedHdf5MetadataIsRefusedByTheResumeAndNotUploaded) {
  const auto file = epoch_file(4);
  const auto user_block = header_of(file).user_block_size;
  const auto pristine = read_file(file);
  // Superblock version 2 (HDF5 1.8 format): the root group's object header address at byte 36.
  std::uint64_t root_header = 0;
  std::memcpy(&root_header, pristine.data() + user_block + 36, 8);
  const std::vector<std::pair<std::string, std::uint64_t>> damaged = {
      {"the superblock's signature", user_block},
      {"the superblock's body", user_block + 12},
      {"the end-of-file address", user_block + 28},
      {"the root group's object header", user_block + root_header + 4},
      {"the metadata's last byte", metadata_offsets(file).back()}};
  const std::string expected = "its HDF5 metadata does not match the checksum recorded at commit";
  for (const auto& [what, offset] : damaged) {
    write_file(file, pristine);
    flip_byte(file, offset);
    expect_every_reader_refuses(file, request_for(epoch_file(3), 4), expected);
    const auto resumed = run_epochrun(resume_from("4", {"--upload-dir", "U"}), cwd_.path());
    EXPECT_EQ(resumed.exit_code, 3) << what << ": " << resumed.err;
    EXPECT_NE(resumed.err.find(expected), std::string::npos) << what << ": " << resumed.err;
    EXPECT_TRUE(committed_in(cwd_ / "U").empty()) << what << ": the damaged file was uploaded";
    fs::remove_all(cwd_ / "U");
  }
  expect_epoch_4_refused_everywhere(expected);
}

// Case 2: eight bytes of the newest epoch's /index/blobs (metadata, not blob data) flipped.
TEST_F(Judge, AFlippedBlobIndexIsRefusedAndLatestRepairsTheDirectory) {
  const auto file = epoch_file(4);
  hid_t h5file = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(h5file, 0);
  hid_t index = H5Dopen2(h5file, "index/blobs", H5P_DEFAULT);
  const auto offset = H5Dget_offset(index);
  H5Dclose(index);
  H5Fclose(h5file);
  ASSERT_NE(offset, HADDR_UNDEF);
  for (std::uint64_t i = 0; i < 8; ++i) {
    flip_byte(file, offset + i);
  }
  expect_epoch_4_refused_everywhere(
      "its HDF5 metadata does not match the checksum recorded at commit");
}

// Case 3: metadata the layout record does not describe, forged and the header resealed to match,
// the record left as written. Before: refused without a record, resumed with it (exit 0).
TEST_F(Judge, ANumRanksOf2To62IsRefused) {
  reseal_keeping_record(epoch_file(4), [](hid_t file) {
    write_int64_attribute(file, "num_ranks", std::int64_t{1} << 62);
  });
  expect_epoch_4_refused_everywhere(
      "num_ranks 4611686018427387904 does not match its 3 node names");
}

TEST_F(Judge, AnIntegerAttributeStoredAsAStringIsRefused) {
  reseal_keeping_record(epoch_file(4), [](hid_t file) {
    ASSERT_GE(H5Adelete(file, "epoch"), 0);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 2);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = H5Acreate2(file, "epoch", type, space, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(H5Awrite(attribute, type, "4"), 0);
    H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
  });
  expect_epoch_4_refused_everywhere("attribute 'epoch' has the wrong type");
}

TEST_F(Judge, AnIndexEntryLargerThanItsBlobIsRefused) {
  reseal_keeping_record(epoch_file(4), [](hid_t file) {
    rewrite_index(file, [](hid_t type, std::vector<char>& rows) {
      const auto at =
          H5Tget_member_offset(type, static_cast<unsigned>(H5Tget_member_index(type, "size")));
      std::uint64_t size = 0;
      std::memcpy(&size, rows.data() + at, 8);
      size += 8;
      std::memcpy(rows.data() + at, &size, 8);
    });
  });
  expect_epoch_4_refused_everywhere("bytes, its dtype and shape");
}

TEST_F(Judge, ASoftLinkInPlaceOfTheIndexIsRefused) {
  reseal_keeping_record(epoch_file(4), [](hid_t file) {
    ASSERT_GE(H5Lmove(file, "index/blobs", file, "index/moved", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_soft("/index/moved", file, "index/blobs", H5P_DEFAULT, H5P_DEFAULT), 0);
  });
  expect_epoch_4_refused_everywhere("blob index /index/blobs is a soft or external link");
}

// A soft or external link where the group of the per-node blobs belongs, in process only (each
// reader follows it through the path of a blob's dataset): the group itself must be a hard link.
// Before: both readers took the soft link, and the external one led them into another file.
TEST_F(Judge, ALinkInPlaceOfAGroupIsRefused) {
  const auto pristine = read_file(epoch_file(4));
  const auto other = epoch_file(3).filename().string();
  const std::vector<std::function<void(hid_t)>> links = {
      [](hid_t file) {
        ASSERT_GE(H5Lcreate_soft("/moved", file, "nodes", H5P_DEFAULT, H5P_DEFAULT), 0);
      },
      [&](hid_t file) {
        ASSERT_GE(
            H5Lcreate_external(other.c_str(), "/nodes", file, "nodes", H5P_DEFAULT, H5P_DEFAULT),
            0);
      }};
  for (const auto& link : links) {
    write_file(epoch_file(4), pristine);
    reseal_keeping_record(epoch_file(4), [&](hid_t file) {
      ASSERT_GE(H5Lmove(file, "nodes", file, "moved", H5P_DEFAULT, H5P_DEFAULT), 0);
      link(file);
    });
    expect_every_reader_refuses(epoch_file(4), request_for(epoch_file(3), 4),
                                "group /nodes is a soft or external link");
  }
}

// Case 4: a file resealed as format version 4. Before: inspect refused it; a resume with the
// record exited 0.
TEST_F(Judge, AFileResealedAsFormatVersion4IsRefused) {
  reseal_keeping_record(epoch_file(4),
                        [](hid_t file) { write_int64_attribute(file, "format_version", 4); });
  expect_epoch_4_refused_everywhere("format version 4 is not one this epochrun reads (1 to 3)");
}

// Case 5: an unknown ninth column in /index/blobs.
TEST_F(Judge, AnUnknownNinthColumnOfTheBlobIndexIsRefused) {
  reseal_keeping_record(epoch_file(4), [](hid_t file) {
    rewrite_index(
        file, [](hid_t, std::vector<char>&) {},
        [](hid_t type) {
          hid_t wider = H5Tcopy(type);
          const auto size = H5Tget_size(type);
          H5Tset_size(wider, size + 1);
          H5Tinsert(wider, "note", size, H5T_STD_U8LE);
          return wider;
        });
  });
  expect_epoch_4_refused_everywhere("not a table of exactly these columns");
}

// The upload copies only a file that passes the judge, and says so when it skips one: epoch 4 is
// damaged right after its commit (rank 0 held there), before the upload. Before: the damaged
// file was uploaded and the run exited 0.
TEST_F(Judge, TheUploadSkipsAFileThatDoesNotVerify) {
  fs::remove_all(cwd_ / "D");
  auto environment = with_fault("save-after-rename@4:0:WAIT");
  environment["EPOCHRUN_FAULT_RELEASE"] = (cwd_ / "release").string();
  ChildProcess run(epochrun_on_ranks(3, sum_pipeline_run({"--upload-dir", "U"})), cwd_.path(),
                   environment);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!fs::exists(epoch_file(4)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(epoch_file(4))) << "epoch 4 was not committed within 60 s";
  flip_byte(epoch_file(4), header_of(epoch_file(4)).user_block_size);
  write_file(cwd_ / "release", "");
  const auto ended = run.wait(kRunTimeout);
  ASSERT_TRUE(ended) << "the run did not end within " << kRunTimeout << " s";
  EXPECT_EQ(ended->exit_code, 4) << ended->err;
  EXPECT_NE(ended->err.find("not uploading epoch-000004.h5"), std::string::npos) << ended->err;
  EXPECT_NE(ended->err.find("its HDF5 metadata does not match"), std::string::npos) << ended->err;
  EXPECT_TRUE(committed_in(cwd_ / "U").empty());
}

// Case 6: a crash after the final epoch's rename, before index.json was rewritten and retention
// applied: the index lists epochs 0 to 3 and epochs 0 to 2 are still there. The next run finds
// the job finished and commits nothing; it must still leave an index of exactly the committed
// epochs, with --keep-last 2 applied. Before: both stayed as they were.
TEST_F(Judge, ARunThatFindsItsJobFinishedRepairsTheIndexAndAppliesRetention) {
  auto index = nlohmann::json::parse(read_file(cwd_ / "D" / "index.json"));
  auto& listed = index["checkpoints"];
  listed.erase(listed.begin() + 4);
  index["latest"] = 3;
  write_file(cwd_ / "D" / "index.json", index.dump(2));
  const auto run = run_epochrun(resume_from("latest", {"--keep-last", "2"}), cwd_.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(committed_in(cwd_ / "D"),
            (std::vector<std::string>{"epoch-000003.h5", "epoch-000004.h5"}));
  const auto repaired = nlohmann::json::parse(read_file(cwd_ / "D" / "index.json"));
  std::vector<std::int64_t> epochs;
  for (const auto& entry : repaired["checkpoints"]) {
    epochs.push_back(entry["epoch"]);
  }
  EXPECT_EQ(epochs, (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(repaired["latest"], 4);
}

// Case 7: a crash during the start-up check of a shared directory left its probe file and the
// probe's temporary; the next run removes both, and nothing that only looks alike.
TEST_F(Judge, AProbeFileOfACrashedStartUpCheckIsRemoved) {
  const auto probe = ".epochrun.shared-check.0123456789abcdef";
  const auto temporary = "." + std::string(probe) + ".tmp.4242.fedcba9876543210";
  const auto alike = ".epochrun.shared-check.someone-elses";
  for (const auto& name : {std::string(probe), temporary, std::string(alike)}) {
    write_file(cwd_ / "D" / name, "written by rank 0\n");
  }
  const auto run = run_epochrun(resume_from("latest"), cwd_.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(cwd_ / "D" / probe));
  EXPECT_FALSE(fs::exists(cwd_ / "D" / temporary));
  EXPECT_TRUE(fs::exists(cwd_ / "D" / alike));
}

// The property: for every byte of a small committed file's metadata (its used user block: the
// integrity header and the layout record; a sample of the zeros after them; and all of its HDF5
// metadata), flipped alone, the resume's reader and CheckpointReader (inspect --verify's) either
// both refuse the file or both load the same values. Before: a flipped HDF5 metadata byte was
// refused by CheckpointReader and loaded by the resume, from the layout record.
class JudgeProperty : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> small_job(const std::string& job) {
  if (job == "sgd_regression") {
    auto args = small_sgd_regression_options(2);
    args.insert(args.begin(), {"run", "--checkpoint-dir", "D"});
    return args;
  }
  if (job == "heat_diffusion") {
    return job_run(
        job, {"--heat_diffusion.rows", "7", "--heat_diffusion.columns", "5",
              "--heat_diffusion.sweeps_per_epoch", "2", "--heat_diffusion.max_epochs", "2",
              "--heat_diffusion.tolerance", "0", "--heat_diffusion.output_file", "heat.json"});
  }
  return sum_pipeline_run({});
}

TEST_P(JudgeProperty, EveryReaderRefusesAFlippedMetadataByteOrEveryReaderLoadsTheSameValues) {
  ScratchDir cwd;
  const auto run = run_epochrun(small_job(GetParam()), cwd.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto file = cwd / "D" / "epoch-000002.h5";
  const auto request = request_for(file);
  const auto pristine = as_checkpoint_reader_reads(file);
  ASSERT_FALSE(pristine.refusal) << *pristine.refusal;
  std::vector<std::uint64_t> offsets;
  const auto in_use = user_block_in_use(file);
  const auto user_block = header_of(file).user_block_size;
  for (std::uint64_t at = 0; at < user_block; at += at < in_use + 16 ? 1 : 61) {
    offsets.push_back(at);
  }
  const auto metadata = metadata_offsets(file);
  offsets.insert(offsets.end(), metadata.begin(), metadata.end());
  int refused = 0;
  int loaded = 0;
  int split = 0;
  for (const auto offset : offsets) {
    const auto original = byte_at(file, offset);
    put_byte(file, offset, static_cast<std::uint8_t>(original ^ 0xff));
    const auto resume = as_the_resume_reads(file, request);
    const auto reader = as_checkpoint_reader_reads(file);
    put_byte(file, offset, original);
    if (resume.refusal && reader.refusal) {
      ++refused;
    } else if (!resume.refusal && !reader.refusal && resume.values == reader.values) {
      ++loaded;
    } else if (++split <= 5) {
      ADD_FAILURE() << GetParam() << ": byte " << offset << " flipped: the resume "
                    << (resume.refusal ? "refused (" + *resume.refusal + ")" : "loaded")
                    << ", CheckpointReader "
                    << (reader.refusal ? "refused (" + *reader.refusal + ")" : "loaded")
                    << (!resume.refusal && !reader.refusal ? ", other values" : "");
    }
  }
  EXPECT_EQ(split, 0) << GetParam() << ": " << split << " of " << offsets.size()
                      << " flipped bytes were refused by one reader and loaded by the other";
  std::printf("%s: %zu bytes flipped one at a time: %d refused by both, %d loaded alike by both\n",
              GetParam().c_str(), offsets.size(), refused, loaded);
}

INSTANTIATE_TEST_SUITE_P(SmallFiles, JudgeProperty,
                         ::testing::Values("sum_pipeline", "sgd_regression", "heat_diffusion"));

}  // namespace
}  // namespace epochrun::testing
