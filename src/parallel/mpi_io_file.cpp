#include "mpi_io_file.hpp"

#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <string_view>
#include <vector>

#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "mpi_check.hpp"
#include "page_cache.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"

namespace epochrun {

namespace {

// An MPI_Info holding `hints`, freed on scope exit.
struct Info {
  MPI_Info info = MPI_INFO_NULL;
  explicit Info(const MpiIoHints& hints) {
    check_mpi(MPI_Info_create(&info), "MPI_Info_create");
    for (const auto& [key, value] : hints) {
      check_mpi(MPI_Info_set(info, key.c_str(), value.c_str()), "MPI_Info_set");
    }
  }
  ~Info() { MPI_Info_free(&info); }
  Info(const Info&) = delete;
  Info& operator=(const Info&) = delete;
};

// A committed MPI datatype, freed on scope exit.
struct Datatype {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  ~Datatype() {
    if (type != MPI_DATATYPE_NULL) {
      MPI_Type_free(&type);
    }
  }
  void commit() { check_mpi(MPI_Type_commit(&type), "MPI_Type_commit"); }
};

// The subarray of `block` in `array` as a file type of `element` datatypes.
void make_subarray(const StoredArray& array, const Block& block, MPI_Datatype element,
                   Datatype& subarray) {
  std::vector<int> sizes;
  std::vector<int> subsizes;
  std::vector<int> starts;
  for (std::size_t d = 0; d < array.global_shape.size(); ++d) {
    sizes.push_back(to_count(array.global_shape[d], "a global array's dimension"));
    subsizes.push_back(to_count(block.count[d], "a block's dimension"));
    starts.push_back(to_count(block.start[d], "a block's start"));
  }
  check_mpi(MPI_Type_create_subarray(static_cast<int>(sizes.size()), sizes.data(), subsizes.data(),
                                     starts.data(), MPI_ORDER_C, element, &subarray.type),
            "MPI_Type_create_subarray");
  subarray.commit();
}

void check_block(const StoredArray& array, const Block& block, std::size_t data_bytes,
                 const std::string& context) {
  if (block.start.size() != array.global_shape.size() ||
      block.count.size() != array.global_shape.size() ||
      block.element_count() * array.element_bytes != data_bytes) {
    throw UsageError(context + ": a block " + block_to_string(block) + " of " +
                     std::to_string(data_bytes) + " bytes for an array of shape " +
                     shape_to_string(array.global_shape));
  }
}

}  // namespace

MpiIoFile::MpiIoFile(const Communicator& comm, const std::filesystem::path& file, Access access,
                     const MpiIoHints& hints)
    : context_("MPI-IO on " + file.string()),
      // One descriptor for every hint of this file's writes, not an open per hint.
      hints_fd_(access == Access::kWrite ? ::open(file.c_str(), O_WRONLY | O_CLOEXEC) : -1) {
  const Info info(hints);
  const int mode = access == Access::kRead ? MPI_MODE_RDONLY : MPI_MODE_WRONLY;
  step_times::count_call("MPI_File_open");
  check_mpi(MPI_File_open(comm.raw(), file.c_str(), mode, info.info, &file_),
            ("MPI_File_open " + file.string()).c_str());
}

bool MpiIoFile::failed_open_fails_everywhere() {
  // Components stay loaded until MPI_Finalize: once seen, the answer holds.
  static std::atomic<bool> romio_alone{false};
  if (romio_alone) {
    return true;
  }
  struct Loaded {
    bool romio = false;
    bool other = false;
  } loaded;
  ::dl_iterate_phdr(
      [](dl_phdr_info* object, std::size_t, void* data) {
        auto& seen = *static_cast<Loaded*>(data);
        const std::string_view name = object->dlpi_name;
        const auto at = name.rfind("/mca_io_");
        if (at != std::string_view::npos) {
          (name.substr(at).starts_with("/mca_io_romio") ? seen.romio : seen.other) = true;
        }
        return 0;
      },
      &loaded);
  romio_alone = loaded.romio && !loaded.other;
  return romio_alone;
}

MpiIoFile::~MpiIoFile() {
  if (file_ != MPI_FILE_NULL) {
    MPI_File_close(&file_);
  }
}

MPI_Datatype MpiIoFile::set_block_view(const StoredArray& array, const Block& block) {
  Datatype element;
  check_mpi(MPI_Type_contiguous(to_count(array.element_bytes, "an element's size"), MPI_BYTE,
                                &element.type),
            "MPI_Type_contiguous");
  element.commit();
  // An empty block sees the file through its element type alone and moves no bytes; a
  // subarray of a zero count is not allowed.
  Datatype view;
  if (block.element_count() > 0) {
    make_subarray(array, block, element.type, view);
  }
  check_mpi(MPI_File_set_view(file_, static_cast<MPI_Offset>(array.offset), element.type,
                              view.type == MPI_DATATYPE_NULL ? element.type : view.type, "native",
                              MPI_INFO_NULL),
            (context_ + ": MPI_File_set_view").c_str());
  return std::exchange(element.type, MPI_DATATYPE_NULL);
}

void MpiIoFile::write_block_all(const StoredArray& array, const Block& block,
                                std::span<const std::byte> data) {
  check_block(array, block, data.size(), context_);
  Datatype element{set_block_view(array, block)};
  MPI_Status status;
  check_mpi(
      MPI_File_write_all(file_, data.data(), to_count(block.element_count(), "a block's elements"),
                         element.type, &status),
      (context_ + ": MPI_File_write_all").c_str());
  hint_for_block(array, block, [&](int, std::uint64_t offset, std::uint64_t bytes) {
    written_.emplace_back(offset, bytes);
  });
}

template <typename Hint>
void MpiIoFile::hint_for_block(const StoredArray& array, const Block& block, Hint&& hint) const {
  if (block.element_count() == 0) {
    return;
  }
  // The block's bytes lie between its first and its last element, row-major in the array.
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  for (std::size_t d = 0; d < array.global_shape.size(); ++d) {
    first = first * array.global_shape[d] + block.start[d];
    last = last * array.global_shape[d] + block.start[d] + block.count[d] - 1;
  }
  if (hints_fd_.valid()) {  // otherwise no hint: the write and the sync do it all
    hint(hints_fd_.get(), array.offset + first * array.element_bytes,
         (last - first + 1) * array.element_bytes);
  }
}

void MpiIoFile::start_writeback(const StoredArray& array, const Block& block) const {
  hint_for_block(array, block, [](int fd, std::uint64_t offset, std::uint64_t bytes) {
    (void)::sync_file_range(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes),
                            SYNC_FILE_RANGE_WRITE);
  });
}

void MpiIoFile::read_block_all(const StoredArray& array, const Block& block,
                               std::span<std::byte> data) {
  check_block(array, block, data.size(), context_);
  Datatype element{set_block_view(array, block)};
  MPI_Status status;
  check_mpi(
      MPI_File_read_all(file_, data.data(), to_count(block.element_count(), "a block's elements"),
                        element.type, &status),
      (context_ + ": MPI_File_read_all").c_str());
}

void MpiIoFile::write_beside(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (!hints_fd_.valid()) {
    throw Error(context_ + ": cannot open the file for writing beside the collective writes");
  }
  write_at(hints_fd_.get(), offset, bytes, context_);
  wrote_beside_ = true;
}

void MpiIoFile::sync_and_close() {
  const int synced = MPI_File_sync(file_);
  std::exception_ptr failed;
  if (wrote_beside_) {
    try {
      sync_file(hints_fd_.get(), context_);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  if (synced == MPI_SUCCESS && !failed) {  // only clean pages go
    for (const auto& [offset, bytes] : written_) {
      drop_from_page_cache(hints_fd_.get(), offset, bytes);
    }
  }
  written_.clear();
  close();
  check_mpi(synced, (context_ + ": MPI_File_sync").c_str());
  if (failed) {
    std::rethrow_exception(failed);
  }
}

void MpiIoFile::close() {
  check_mpi(MPI_File_close(&file_), (context_ + ": MPI_File_close").c_str());
}

MpiIoHints MpiIoFile::hints_in_use() const {
  MPI_Info info = MPI_INFO_NULL;
  check_mpi(MPI_File_get_info(file_, &info), "MPI_File_get_info");
  const std::unique_ptr<MPI_Info, int (*)(MPI_Info*)> owned(&info, MPI_Info_free);
  int keys = 0;
  check_mpi(MPI_Info_get_nkeys(info, &keys), "MPI_Info_get_nkeys");
  MpiIoHints hints;
  for (int i = 0; i < keys; ++i) {
    char key[MPI_MAX_INFO_KEY + 1] = {};
    check_mpi(MPI_Info_get_nthkey(info, i, key), "MPI_Info_get_nthkey");
    int length = 0;
    int found = 0;
    check_mpi(MPI_Info_get_valuelen(info, key, &length, &found), "MPI_Info_get_valuelen");
    std::string value(static_cast<std::size_t>(length) + 1, '\0');
    check_mpi(MPI_Info_get(info, key, length + 1, value.data(), &found), "MPI_Info_get");
    value.resize(static_cast<std::size_t>(length));
    hints.emplace(key, value);
  }
  return hints;
}

}  // namespace epochrun
