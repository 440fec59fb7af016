// The files that protect node-local copies across hosts (--local-redundancy,
// local_redundancy.hpp; docs/FORMAT.md, "Node-local redundancy files"), beside the copies in
// the node-local directory:
//   DIR/epoch-NNNNNN.rank-R.partner  the partner copy of rank R's part (its copy file, byte for
//                                    byte), stored on another host;
//   DIR/epoch-NNNNNN.rank-R.xor      rank R's parity block of its XOR set (xor_parity.hpp).
// Each is a header (magic, version, epoch, kind, the members whose parts it covers: rank, the
// host that saved it, size of its copy file and xxh64 of the copy's record; the xxh64 of its data;
// the header's own xxh64), then the data. Like the copies, written under a temporary name,
// renamed, never fsynced, and verified before any byte of it is used. Internal to the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "file_descriptor.hpp"

namespace epochrun {

enum class RedundancyKind : std::uint32_t { kPartner = 1, kParity = 2 };

// A node-local part that a redundancy file covers.
struct RedundancyMember {
  int rank = 0;
  std::string host;  // where the part was saved
  std::uint64_t size = 0;
  // Of the copy's record (local_copy_record_xxh64): the record holds every value's xxh64, so
  // that a copy whose record hashes to it and whose values match their xxh64s is the copy.
  std::uint64_t xxh64 = 0;
  friend bool operator==(const RedundancyMember&, const RedundancyMember&) = default;
};

struct RedundancyHeader {
  RedundancyKind kind = RedundancyKind::kPartner;
  std::int64_t epoch = 0;
  int rank = 0;               // partner: the part's rank; parity: the member holding the block
  int position = 0;           // parity: that member's place in `members`; partner: 0
  std::uint64_t segment = 0;  // parity: a segment's bytes (ParityLayout); partner: 0
  std::uint64_t data_bytes = 0;
  std::uint64_t data_xxh64 = 0;
  std::vector<RedundancyMember> members;  // partner: the one part; parity: the set, in order
  friend bool operator==(const RedundancyHeader&, const RedundancyHeader&) = default;
};

std::filesystem::path partner_copy_file(const std::filesystem::path& dir, std::int64_t epoch,
                                        int rank);
std::filesystem::path parity_block_file(const std::filesystem::path& dir, std::int64_t epoch,
                                        int rank);

// The header's bytes: where the data starts in the file is their size.
std::vector<std::byte> encode_redundancy_header(const RedundancyHeader& header);
// The header of the file open as `fd` and its size (where the data starts). CorruptCheckpoint
// when it is not a whole header of a whole file (`what` names it).
std::pair<RedundancyHeader, std::uint64_t> read_redundancy_header(int fd, const std::string& what);

// xxh64 of `bytes` bytes of `fd` at `offset`, read in bounded pieces. CorruptCheckpoint when
// the file is shorter.
std::uint64_t file_xxh64(int fd, std::uint64_t offset, std::uint64_t bytes,
                         const std::string& what);

// The header of `file` once its data's xxh64 is found to be the header's; CorruptCheckpoint
// (a damaged or torn file) or CheckpointNotFound otherwise.
std::pair<RedundancyHeader, std::uint64_t> verified_redundancy_file(
    const std::filesystem::path& file);

// Writes a redundancy file in order: the header is written last, with the data's xxh64, and the
// file renamed into place by finish(). A writer destroyed before finish() leaves nothing behind.
class RedundancyFileWriter {
 public:
  // Where the data's xxh64 comes from: hashed here as it is appended (a parity block, computed
  // on this rank), or given to finish() (a partner copy: its sender hashed it as it sent it;
  // hashing it again on its arrival would cost a pass over every byte, and the copy is verified
  // against it whenever it is read).
  enum class DataHash { kComputed, kGiven };

  RedundancyFileWriter(std::filesystem::path target, RedundancyHeader header,
                       DataHash hash = DataHash::kComputed);
  ~RedundancyFileWriter();
  RedundancyFileWriter(const RedundancyFileWriter&) = delete;
  RedundancyFileWriter& operator=(const RedundancyFileWriter&) = delete;

  // The next bytes of the data (their total must come to header.data_bytes).
  void append(std::span<const std::byte> bytes);
  // DataHash::kComputed: returns the data's xxh64.
  std::uint64_t finish();
  // DataHash::kGiven: `data_xxh64` is the data's.
  void finish(std::uint64_t data_xxh64);

 private:
  struct Hasher;
  std::filesystem::path target_, temporary_;
  RedundancyHeader header_;
  std::uint64_t header_size_ = 0, written_ = 0;
  FileDescriptor fd_;
  std::unique_ptr<Hasher> hasher_;
};

// Deletes every redundancy file of DIR (and what an interrupted write of one left) whose epoch
// `keep` does not keep, whoever wrote it: a host's redundancy files belong to the epochs, not to
// the ranks now on it. Regular files only, never through a symlink. Returns how many went.
int remove_redundancy_files(const std::filesystem::path& dir,
                            const std::function<bool(std::int64_t)>& keep);

// The epoch and rank of a redundancy file's name, and which kind it is; nullopt for others.
struct RedundancyFileName {
  std::int64_t epoch = 0;
  int rank = 0;
  RedundancyKind kind = RedundancyKind::kPartner;
};
std::optional<RedundancyFileName> parse_redundancy_file_name(std::string_view name);

}  // namespace epochrun
