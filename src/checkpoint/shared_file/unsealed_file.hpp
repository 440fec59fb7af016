// Rank 0's checkpoint file from its creation until it is sealed. A save that fails, or is
// dropped before it seals (its owner failed), removes the file: no half-written file stays, and
// the space of the failed attempt is given back. Internal to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "epochrun/communicator.hpp"
#include "file_descriptor.hpp"
#include "integrity_header.hpp"

namespace epochrun {

class UnsealedFile {
 public:
  UnsealedFile() = default;
  UnsealedFile(UnsealedFile&& other) noexcept;
  UnsealedFile& operator=(UnsealedFile&& other) noexcept;
  UnsealedFile(const UnsealedFile&) = delete;
  UnsealedFile& operator=(const UnsealedFile&) = delete;
  ~UnsealedFile() { remove(); }

  // Lay-out step (rank 0): refuses a checkpoint of about `needed` bytes that cannot fit before
  // anything is written (a write past the file-size limit would kill the process; a full disk
  // half-way wastes the whole write), creates the directory when it is missing and `file`
  // (O_EXCL, mode 0644, held from now on) and
  // calls lay_out(fd, created), which lays it out with serial HDF5 and calls created() once
  // HDF5 has created it: its space is reserved then, so that another process filling the disk
  // meanwhile cannot fail the save (HDF5 creates by truncating, which gives back space reserved
  // before). Returns what lay_out returns.
  template <typename LayOut>
  auto create_and_lay_out(const std::filesystem::path& file, std::uint64_t needed,
                          std::int64_t epoch, LayOut&& lay_out) {
    create_private_directories(file.parent_path());
    check_room_for(file, needed);
    create(file);
    return lay_out(fd_.get(), [this, needed, epoch] { reserve(needed, epoch); });
  }
  // The descriptor, open read-write (-1 when none is held).
  int fd() const { return fd_.get(); }

  // A step of the save on every rank of `comm` (on rank 0 alone with `root_only`), then the
  // ranks agree, each waiting at most `timeout` for the others (run_then_agree_within, or
  // run_on_root_then_agree_within). When any rank failed, every rank throws and rank 0 removes
  // the file. `carried` travels in the agreement: rank 0's values to every rank with
  // `root_only`, otherwise the maximum of each over the ranks.
  template <typename Step>
  void agreed_step(const Communicator& comm, const std::string& context,
                   std::chrono::duration<double> timeout, bool root_only, Step&& body,
                   std::span<std::int64_t> carried = {}) {
    try {
      if (root_only) {
        run_on_root_then_agree_within(comm, context, timeout, body, carried);
      } else {
        run_then_agree_within(comm, context, timeout, body, carried);
      }
    } catch (...) {
      remove();  // gives the space of a failed attempt back
      throw;
    }
  }

  // Seals it (the integrity header over `extents`, the reservation beyond its end given back,
  // fsync) and lets it go: it stays. Returns its size.
  std::uint64_t seal(std::uint64_t user_block_size, const std::vector<DataExtent>& extents);
  // Seals it before its data is written: the integrity header over `extents` (which must hold
  // every byte a rank writes later), and the reservation beyond its end given back when it is
  // large (kKeptSlack). The file stays this object's, removed if the save fails, until keep();
  // the data step's fsync makes the header durable with the data.
  // `layout_record` (empty for none) goes into the user block after the header.
  void seal_before_data(std::uint64_t user_block_size, const std::vector<DataExtent>& extents,
                        std::span<const std::byte> layout_record = {});
  // After seal_before_data and a data step that succeeded everywhere: lets the file go (it
  // stays), closing it. Nothing on a rank that holds none.
  void keep() noexcept;
  // Removes the file now, when one is held.
  void remove() noexcept;

 private:
  void create(const std::filesystem::path& file);
  static void check_room_for(const std::filesystem::path& file, std::uint64_t needed);
  // Reserves `needed` bytes for the file where the file system can, then the save-lay-out
  // fault point.
  void reserve(std::uint64_t needed, std::int64_t epoch);

  // What the lay-out's reservation may leave past the file's end, allocated to it until it is
  // deleted: the estimate's allowance for HDF5's metadata, 18 KiB for 3 ranks x 64 KiB. Giving
  // it back is a truncation, which on ext4 took 0.5 to 1.2 ms of rank 0's lay-out here, a
  // third of a small save's fixed cost (docs/benchmarks.md, "The fixed cost at any rank
  // count"); more than this is given back.
  static constexpr std::uint64_t kKeptSlack = std::uint64_t{1} << 20;

  std::optional<std::filesystem::path> file_;
  FileDescriptor fd_{-1};
  std::uint64_t reserved_ = 0;  // bytes the lay-out reserved from the file's start
};

}  // namespace epochrun
