#include "epochrun/checkpoint_file.hpp"

#include <xxhash.h>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <set>

#include "collective_errors.hpp"
#include "disk_space.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/names.hpp"
#include "fault_injection.hpp"
#include "h5_attributes.hpp"
#include "h5_handle.hpp"
#include "h5_types.hpp"
#include "integrity_header.hpp"
#include "json_text.hpp"

namespace epochrun {
namespace {

using h5::dataspace_for;
using h5::dtype_of;
using h5::file_type_for;
using h5::Handle;
using h5::memory_type_for;

constexpr int kMaxDimensions = 32;
// Attribute names; docs/FORMAT.md lists them for readers of the files.
constexpr char kFormatAttr[] = "format";
constexpr char kFormatVersionAttr[] = "format_version";
constexpr char kEpochAttr[] = "epoch";
constexpr char kJobAttr[] = "job";
constexpr char kNumRanksAttr[] = "num_ranks";
constexpr char kNodeNamesAttr[] = "node_names";
constexpr char kConfigAttr[] = "config";
constexpr char kBlobNamesAttr[] = "blob_names";
constexpr char kChecksumAttr[] = "xxh64";

std::uint64_t checksum(std::span<const std::byte> data) {
  return XXH64(data.data(), data.size(), 0);
}

Handle file_access(const Communicator* comm) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), "create file access list");
  if (comm != nullptr) {
    h5::check(H5Pset_fapl_mpio(fapl.get(), comm->raw(), MPI_INFO_NULL), "select MPI-IO driver");
    // Metadata reads and writes as collective operations: one rank reads and broadcasts
    // instead of every rank hitting the file system, and no rank can run ahead alone.
    h5::check(H5Pset_all_coll_metadata_ops(fapl.get(), true), "collective metadata reads");
    h5::check(H5Pset_coll_metadata_write(fapl.get(), true), "collective metadata writes");
  }
  // The 1.8 format: dense attribute storage (node lists of large jobs exceed the 64 KiB of
  // compact attributes), still readable by every HDF5 and h5py of the last decade.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "set format bounds");
  // Commits are made atomic by rename, not by locks; HDF5's flock also fails on some
  // parallel file systems (HDF5_USE_FILE_LOCKING=FALSE is the usual workaround).
  h5::check(H5Pset_file_locking(fapl.get(), false, true), "disable file locking");
  return fapl;
}

// A name read from a file: a bad one means a damaged or crafted checkpoint, not bad user input.
void validate_stored_name(const std::string& name, std::string_view what) {
  try {
    validate_name(name, what);
  } catch (const UsageError& error) {
    throw CorruptCheckpoint(error.what());
  }
}

// Opens a child that must be a hard link: a soft or external link could point anywhere.
Handle open_child(hid_t parent, const std::string& name, bool dataset, const std::string& what) {
  htri_t exists = H5Lexists(parent, name.c_str(), H5P_DEFAULT);
  if (exists <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw CorruptCheckpoint(what + " is missing");
  }
  H5L_info_t link{};
  h5::check(H5Lget_info(parent, name.c_str(), &link, H5P_DEFAULT), "inspect " + what);
  if (link.type != H5L_TYPE_HARD) {
    throw CorruptCheckpoint(what + " is a soft or external link");
  }
  H5O_info_t object{};
  h5::check(H5Oget_info_by_name(parent, name.c_str(), &object, H5P_DEFAULT), "inspect " + what);
  if (object.type != (dataset ? H5O_TYPE_DATASET : H5O_TYPE_GROUP)) {
    throw CorruptCheckpoint(what + " is not a " + (dataset ? "dataset" : "group"));
  }
  return dataset ? Handle(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what)
                 : Handle(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), "open " + what);
}

BlobRecord read_record(hid_t node_group, const std::string& node, const std::string& name,
                       std::uint64_t file_bytes) {
  validate_stored_name(name, "blob name");
  const std::string what = "dataset /" + std::string(kNodesGroup) + "/" + node + "/" + name;
  auto dataset = open_child(node_group, name, true, what);
  BlobRecord record;
  record.name = name;
  Handle type(H5Dget_type(dataset.get()), "get type of " + what);
  record.dtype = dtype_of(type.get(), what);
  Handle space(H5Dget_space(dataset.get()), "get space of " + what);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || rank > kMaxDimensions || H5Sget_simple_extent_type(space.get()) == H5S_NULL) {
    throw CorruptCheckpoint(what + " has an unsupported shape");
  }
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  record.shape.assign(dims.begin(), dims.end());
  try {
    // Contiguous data must fit in the file: nothing a crafted header says makes us allocate more.
    if (record.byte_size() > file_bytes) {
      throw CorruptCheckpoint(what + " claims " + std::to_string(record.byte_size()) +
                              " bytes, more than the whole file");
    }
  } catch (const UsageError&) {
    throw CorruptCheckpoint(what + " has a shape that overflows 64 bits");
  }
  record.xxh64 = h5::read_uint_attribute(dataset.get(), kChecksumAttr);
  return record;
}

CheckpointHeader read_header(hid_t file, std::uint64_t file_bytes) {
  CheckpointHeader header;
  header.format = h5::read_string_attribute(file, kFormatAttr, file_bytes);
  if (header.format != kCheckpointFormatName) {
    throw CorruptCheckpoint("not an epochrun checkpoint (format '" + header.format + "')");
  }
  header.format_version = h5::read_int_attribute(file, kFormatVersionAttr);
  if (header.format_version != kCheckpointFormatVersion) {
    throw CheckpointMismatch("format version " + std::to_string(header.format_version) +
                             " is not the version this epochrun reads (" +
                             std::to_string(kCheckpointFormatVersion) + ")");
  }
  header.epoch = h5::read_int_attribute(file, kEpochAttr);
  header.job = h5::read_string_attribute(file, kJobAttr, file_bytes);
  validate_stored_name(header.job, "job name");
  header.node_names = h5::read_string_list_attribute(file, kNodeNamesAttr, file_bytes);
  auto num_ranks = h5::read_int_attribute(file, kNumRanksAttr);
  if (num_ranks < 1 || num_ranks != header.num_ranks()) {
    throw CorruptCheckpoint("num_ranks " + std::to_string(num_ranks) + " does not match its " +
                            std::to_string(header.node_names.size()) + " node names");
  }
  header.config_json = h5::read_string_attribute(file, kConfigAttr, file_bytes);
  // The whole node list is checked before any group is opened.
  std::set<std::string> seen;
  for (const auto& node : header.node_names) {
    validate_stored_name(node, "node name");
    if (!seen.insert(node).second) {
      throw CorruptCheckpoint("node '" + node + "' is listed twice");
    }
  }
  auto nodes = open_child(file, kNodesGroup, false, std::string("group /") + kNodesGroup);
  for (const auto& node : header.node_names) {
    auto group = open_child(nodes.get(), node, false, "group of node " + node);
    auto& records = header.blobs[node];
    for (const auto& name :
         h5::read_string_list_attribute(group.get(), kBlobNamesAttr, file_bytes)) {
      records.push_back(read_record(group.get(), node, name, file_bytes));
    }
  }
  return header;
}

void write_header(hid_t file, const CheckpointHeader& header) {
  h5::write_string_attribute(file, kFormatAttr, header.format);
  h5::write_int_attribute(file, kFormatVersionAttr, header.format_version);
  h5::write_int_attribute(file, kEpochAttr, header.epoch);
  h5::write_string_attribute(file, kJobAttr, header.job);
  h5::write_int_attribute(file, kNumRanksAttr, header.num_ranks());
  h5::write_string_list_attribute(file, kNodeNamesAttr, header.node_names);
  h5::write_string_attribute(file, kConfigAttr, header.config_json);
}

std::string dataset_path(const std::string& node, const std::string& blob) {
  return "/" + std::string(kNodesGroup) + "/" + node + "/" + blob;
}

// Moves one blob between memory and its dataset, on its owner rank only. Each dataset has a
// single writer, so the transfer is independent: collective transfers would cost one
// synchronisation of all ranks per dataset and route the bytes through aggregators, and an I/O
// error striking one rank inside a collective transfer leaves the others waiting in it forever.
// Everything else -- creating the file and its objects, and writing metadata -- is collective.
void transfer(hid_t dataset, const BlobRecord& record, Blob& blob, bool write) {
  auto memory_type = memory_type_for(record.dtype);
  herr_t status =
      write ? H5Dwrite(dataset, memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, blob.raw().data())
            : H5Dread(dataset, memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, blob.raw().data());
  h5::check(status, (write ? "write " : "read ") + record.name);
}

nlohmann::json records_to_json(const std::vector<BlobRecord>& records) {
  auto list = nlohmann::json::array();
  for (const auto& record : records) {
    list.push_back({{"name", record.name},
                    {"dtype", dtype_name(record.dtype)},
                    {"shape", record.shape},
                    {"xxh64", record.xxh64}});
  }
  return list;
}

std::vector<BlobRecord> records_from_json(const std::string& text) {
  std::vector<BlobRecord> records;
  for (const auto& entry : nlohmann::json::parse(text)) {
    records.push_back(BlobRecord{
        entry.at("name").get<std::string>(), parse_dtype(entry.at("dtype").get<std::string>()),
        entry.at("shape").get<Shape>(), entry.at("xxh64").get<std::uint64_t>()});
  }
  return records;
}

void verify_checksum(const Blob& blob, const BlobRecord& record, const std::string& what) {
  auto actual = checksum(blob.raw());
  if (actual != record.xxh64) {
    throw CorruptCheckpoint(what + ": checksum mismatch (stored xxh64 " +
                            std::to_string(record.xxh64) + ", data hashes to " +
                            std::to_string(actual) + ")");
  }
}

std::uint64_t file_size_or_zero(const std::filesystem::path& file) {
  std::error_code ignored;
  auto size = std::filesystem::file_size(file, ignored);
  return ignored ? 0 : size;
}

void check_expectation(const CheckpointHeader& header, const CheckpointExpectation& expected) {
  if (header.epoch != expected.epoch) {
    throw CorruptCheckpoint("the file is named for epoch " + std::to_string(expected.epoch) +
                            " but records epoch " + std::to_string(header.epoch));
  }
  if (header.job != expected.job) {
    throw CheckpointMismatch("it belongs to job '" + header.job + "', this run is job '" +
                             expected.job + "'");
  }
  if (header.node_names.size() != expected.node_names.size()) {
    throw CheckpointMismatch("it was written by " + std::to_string(header.node_names.size()) +
                             " ranks, this run has " + std::to_string(expected.node_names.size()) +
                             " (restarting on a different rank count is not supported yet)");
  }
  if (header.node_names != expected.node_names) {
    throw CheckpointMismatch("its node names differ from this run's");
  }
}

// An upper bound of the file's size: the data plus a generous allowance for HDF5's metadata
// (measured: under 1 KiB per dataset and group; the allowance is about twice that).
std::uint64_t data_extent_count(const CheckpointHeader& header) {
  std::uint64_t count = 0;
  for (const auto& [node, records] : header.blobs) {
    count += static_cast<std::uint64_t>(std::count_if(
        records.begin(), records.end(), [](const BlobRecord& r) { return r.byte_size() > 0; }));
  }
  return count;
}

std::uint64_t estimated_file_bytes(const CheckpointHeader& header) {
  std::uint64_t bytes =
      8192 + 2 * header.config_json.size() + user_block_size_for(data_extent_count(header));
  for (const auto& [node, records] : header.blobs) {
    bytes += 1024 + 2 * node.size();
    for (const auto& record : records) {
      bytes += 1024 + 2 * record.name.size() + record.byte_size();
    }
  }
  return bytes;
}

// Collective. Refuses a write that cannot fit before HDF5 touches the disk (see disk_space.hpp):
// every rank's file-size limit, and the shared directory's free space, seen by rank 0.
void check_space_for(const std::filesystem::path& file, std::uint64_t needed,
                     const Communicator& comm) {
  run_then_agree(comm, "space check", [&] {
    check_file_size_limit(needed);
    if (comm.is_root()) {
      check_free_space(file.parent_path(), needed);
    }
  });
}

// Collective, right after the file is created: rank 0 reserves its blocks, so that space
// another process takes while the file is written cannot make a write fail half-way.
void reserve_space_for(const std::filesystem::path& file, std::uint64_t needed,
                       const Communicator& comm) {
  run_on_root_then_agree(comm, "reserve space", [&] {
    if (!reserve_space(file, needed)) {
      spdlog::debug("{}: this file system cannot reserve space; relying on the free-space check",
                    file.string());
    }
  });
}

}  // namespace

std::uint64_t CheckpointHeader::total_blob_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [node, records] : blobs) {
    for (const auto& record : records) {
      total += record.byte_size();
    }
  }
  return total;
}

void write_checkpoint_file(const std::filesystem::path& file, const Communicator& comm,
                           CheckpointHeader header, const Workspace& workspace,
                           const std::vector<std::string>& blob_names) {
  h5::silence_error_printing();
  const std::string context = "write checkpoint " + file.string();
  const auto rank = static_cast<std::size_t>(comm.rank());

  // 1. Describe this rank's blobs; everyone must agree they exist before anyone creates.
  std::vector<BlobRecord> mine;
  std::exception_ptr error;
  try {
    if (header.node_names.size() != static_cast<std::size_t>(comm.size())) {
      throw Error("header names " + std::to_string(header.node_names.size()) + " nodes for " +
                  std::to_string(comm.size()) + " ranks");
    }
    for (const auto& name : blob_names) {
      validate_name(name, "blob name");
      const auto& blob = workspace.get(name);
      mine.push_back(BlobRecord{name, blob.dtype(), blob.shape(), checksum(blob.raw())});
    }
  } catch (...) {
    error = std::current_exception();
  }
  raise_if_any_failed(comm, error, context);

  // 2. Every rank learns every node's blob list: creating objects is collective in parallel
  //    HDF5, so all ranks create all datasets with identical arguments.
  auto manifests = comm.allgather(json_text(records_to_json(mine)));
  header.blobs.clear();
  for (std::size_t i = 0; i < manifests.size(); ++i) {
    header.blobs[header.node_names[i]] = records_from_json(manifests[i]);
  }

  const auto needed = estimated_file_bytes(header);
  check_space_for(file, needed, comm);

  // 3. Create and describe collectively, then write. After a failure a rank keeps making the
  //    remaining collective calls so that no other rank waits on it; the failure is reported
  //    at the end.
  // The user block holds the integrity header, sealed by rank 0 after the file is closed.
  const auto user_block_size = user_block_size_for(data_extent_count(header));
  std::vector<DataExtent> extents;
  try {
    auto fapl = file_access(&comm);
    Handle fcpl(H5Pcreate(H5P_FILE_CREATE), "create file creation list");
    h5::check(H5Pset_userblock(fcpl.get(), user_block_size), "reserve the user block");
    Handle h5file(H5Fcreate(file.c_str(), H5F_ACC_EXCL, fcpl.get(), fapl.get()), "create file");
    reserve_space_for(file, needed, comm);
    fault_point("save-create", header.epoch);
    write_header(h5file.get(), header);
    Handle nodes(H5Gcreate2(h5file.get(), kNodesGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 "create group nodes");
    Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), "create dataset list");
    // Space is allocated at creation in parallel files; writing fill values there first
    // would write every byte twice.
    h5::check(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "disable fill values");
    std::vector<std::pair<Handle, const BlobRecord*>> my_datasets;
    for (std::size_t node_index = 0; node_index < header.node_names.size(); ++node_index) {
      const auto& node = header.node_names[node_index];
      const auto& records = header.blobs[node];
      Handle group(H5Gcreate2(nodes.get(), node.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                   "create group of node " + node);
      std::vector<std::string> names;
      for (const auto& record : records) {
        names.push_back(record.name);
      }
      h5::write_string_list_attribute(group.get(), kBlobNamesAttr, names);
      for (const auto& record : records) {
        auto type = file_type_for(record.dtype);
        auto space = dataspace_for(record.shape);
        Handle dataset(H5Dcreate2(group.get(), record.name.c_str(), type.get(), space.get(),
                                  H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                       "create dataset " + dataset_path(node, record.name));
        h5::write_uint_attribute(dataset.get(), kChecksumAttr, record.xxh64);
        if (comm.is_root() && record.byte_size() > 0) {
          // Contiguous and allocated at creation: the offset is final (and includes the user
          // block).
          const haddr_t offset = H5Dget_offset(dataset.get());
          if (offset == HADDR_UNDEF) {
            throw Hdf5Error("no file offset for " + dataset_path(node, record.name));
          }
          extents.push_back(DataExtent{offset, record.byte_size()});
        }
        if (node_index == rank && record.byte_size() > 0) {
          my_datasets.emplace_back(std::move(dataset), &record);
        }
      }
    }
    // Raw data: each rank its own datasets. A failure stays on this rank until the agreement
    // below; the collective flush and close still happen on every rank.
    try {
      for (auto& [dataset, record] : my_datasets) {
        transfer(dataset.get(), *record, const_cast<Blob&>(workspace.get(record->name)), true);
      }
    } catch (...) {
      error = std::current_exception();
    }
    my_datasets.clear();
    fault_point("save-write", header.epoch);
    h5::check(H5Fflush(h5file.get(), H5F_SCOPE_GLOBAL), "flush file");
    nodes.close("close group nodes");
    h5file.close("close file");
    if (comm.is_root() && !error) {
      seal_checkpoint_file(file, user_block_size, std::move(extents));
      release_space_beyond_end(file);
    }
  } catch (...) {
    if (!error) {
      error = std::current_exception();
    }
  }
  raise_if_any_failed(comm, error, context);
}

std::vector<std::string> read_checkpoint_file(const std::filesystem::path& file,
                                              const Communicator& comm,
                                              const CheckpointExpectation& expected,
                                              Workspace& workspace) {
  h5::silence_error_printing();
  const std::string context = "checkpoint " + file.string();
  const auto rank = static_cast<std::size_t>(comm.rank());
  // Rank 0 checks the integrity header before libhdf5 parses anything of the file.
  run_on_root_then_agree(comm, context, [&] { verify_checkpoint_file(file); });
  std::exception_ptr error;
  CheckpointHeader header;
  Handle h5file;
  try {
    auto fapl = file_access(&comm);
    h5file = Handle(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), "open");
    header = read_header(h5file.get(), file_size_or_zero(file));
    check_expectation(header, expected);
  } catch (const Hdf5Error& e) {
    error = std::make_exception_ptr(
        CorruptCheckpoint("not a readable HDF5 file (" + std::string(e.what()) + ")"));
  } catch (...) {
    error = std::current_exception();
  }
  raise_if_any_failed(comm, error, context);

  // Each rank reads its own node's datasets (independently, see transfer()).
  std::vector<std::pair<std::string, Blob>> loaded;
  try {
    const auto& node = header.node_names[rank];
    for (const auto& record : header.blobs.at(node)) {
      Blob blob(record.dtype, record.shape);
      if (record.byte_size() > 0) {
        Handle dataset(H5Dopen2(h5file.get(), dataset_path(node, record.name).c_str(), H5P_DEFAULT),
                       "open " + dataset_path(node, record.name));
        transfer(dataset.get(), record, blob, false);
      }
      verify_checksum(blob, record, "dataset " + dataset_path(node, record.name));
      loaded.emplace_back(record.name, std::move(blob));
    }
  } catch (const Hdf5Error& e) {
    error = std::make_exception_ptr(CorruptCheckpoint(e.what()));
  } catch (...) {
    error = std::current_exception();
  }
  try {
    h5file.close("close");
  } catch (...) {
    if (!error) {
      error = std::make_exception_ptr(
          CorruptCheckpoint(std::string("close: ") + h5::take_error_stack()));
    }
  }
  raise_if_any_failed(comm, error, context);

  std::vector<std::string> names;
  for (auto& [name, blob] : loaded) {
    workspace.put(name, std::move(blob));
    names.push_back(name);
  }
  return names;
}

struct CheckpointReader::Impl {
  std::filesystem::path file;
  Handle h5file;
  CheckpointHeader header;
};

CheckpointReader::CheckpointReader(const std::filesystem::path& file)
    : impl_(std::make_unique<Impl>()) {
  h5::silence_error_printing();
  impl_->file = file;
  try {
    verify_checkpoint_file(file);  // before libhdf5 parses anything of it
    auto fapl = file_access(nullptr);
    impl_->h5file = Handle(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), "open");
    impl_->header = read_header(impl_->h5file.get(), file_size_or_zero(file));
  } catch (const Hdf5Error& e) {
    throw CorruptCheckpoint("checkpoint " + file.string() + ": not a readable HDF5 file (" +
                            e.what() + ")");
  } catch (...) {
    rethrow_with_context(std::current_exception(), "checkpoint " + file.string());
  }
}

CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const CheckpointHeader& CheckpointReader::header() const {
  return impl_->header;
}

bool CheckpointReader::has_blob(const std::string& node, const std::string& blob) const {
  auto found = impl_->header.blobs.find(node);
  if (found == impl_->header.blobs.end()) {
    return false;
  }
  return std::any_of(found->second.begin(), found->second.end(),
                     [&](const BlobRecord& record) { return record.name == blob; });
}

Blob CheckpointReader::read_blob(const std::string& node, const std::string& blob) const {
  const std::string context = "checkpoint " + impl_->file.string();
  auto found = impl_->header.blobs.find(node);
  if (found == impl_->header.blobs.end()) {
    throw CheckpointError(context + ": it has no node '" + node + "'");
  }
  auto record = std::find_if(found->second.begin(), found->second.end(),
                             [&](const BlobRecord& entry) { return entry.name == blob; });
  if (record == found->second.end()) {
    throw CheckpointError(context + ": node '" + node + "' has no blob '" + blob + "'");
  }
  Blob value(record->dtype, record->shape);
  if (record->byte_size() > 0) {
    try {
      Handle dataset(H5Dopen2(impl_->h5file.get(), dataset_path(node, blob).c_str(), H5P_DEFAULT),
                     "open " + dataset_path(node, blob));
      auto memory_type = memory_type_for(record->dtype);
      h5::check(H5Dread(dataset.get(), memory_type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT,
                        value.raw().data()),
                "read " + dataset_path(node, blob));
    } catch (const Hdf5Error& e) {
      throw CorruptCheckpoint(context + ": " + e.what());
    }
  }
  verify_checksum(value, *record, context + ": dataset " + dataset_path(node, blob));
  return value;
}

}  // namespace epochrun
