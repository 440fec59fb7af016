#include "local_redundancy_file.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "local_copy.hpp"
#include "regular_file.hpp"

namespace epochrun {
namespace {

constexpr char kRedundancyMagic[8] = {'E', 'P', 'R', 'R', 'E', 'D', 'N', '1'};
// 2: a member's xxh64 is its copy's record's (1: of the whole copy file, which cost the XOR
// exchange a pass over every copy).
constexpr std::uint32_t kRedundancyVersion = 2;
constexpr std::string_view kPartnerSuffix = ".partner", kParitySuffix = ".xor";
// What a hash reads at a time.
constexpr std::size_t kHashedPiece = std::size_t{1} << 20;
// No header is larger: a set of kMaxSetSize members with long host names fits many times.
constexpr std::uint64_t kMaxRedundancyHeader = std::uint64_t{1} << 20;

void put_le(std::vector<std::byte>& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
  }
}

// Reads little-endian fields in order, throwing when the bytes run out.
class HeaderFields {
 public:
  explicit HeaderFields(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::uint64_t get(int bytes) {
    need(static_cast<std::size_t>(bytes));
    std::uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value |= static_cast<std::uint64_t>(bytes_[at_ + static_cast<std::size_t>(i)]) << (8 * i);
    }
    at_ += static_cast<std::size_t>(bytes);
    return value;
  }
  // Passes over `size` bytes (more than get() reads into one value).
  void skip(std::size_t size) {
    need(size);
    at_ += size;
  }
  std::string text(std::size_t size) {
    need(size);
    std::string value(reinterpret_cast<const char*>(bytes_.data() + at_), size);
    at_ += size;
    return value;
  }
  std::size_t at() const { return at_; }

 private:
  void need(std::size_t size) const {
    if (size > bytes_.size() - at_) {
      throw Error("the header ends early");
    }
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

std::filesystem::path redundancy_file(const std::filesystem::path& dir, std::int64_t epoch,
                                      int rank, std::string_view suffix) {
  return dir / fmt::format("epoch-{:06d}.rank-{}{}", epoch, rank, suffix);
}

}  // namespace

std::filesystem::path partner_copy_file(const std::filesystem::path& dir, std::int64_t epoch,
                                        int rank) {
  return redundancy_file(dir, epoch, rank, kPartnerSuffix);
}

std::filesystem::path parity_block_file(const std::filesystem::path& dir, std::int64_t epoch,
                                        int rank) {
  return redundancy_file(dir, epoch, rank, kParitySuffix);
}

std::optional<RedundancyFileName> parse_redundancy_file_name(std::string_view name) {
  for (const auto& [suffix, kind] : {std::pair(kPartnerSuffix, RedundancyKind::kPartner),
                                     std::pair(kParitySuffix, RedundancyKind::kParity)}) {
    if (const auto parsed = parse_epoch_rank_name(name, suffix)) {
      return RedundancyFileName{parsed->first, parsed->second, kind};
    }
  }
  return std::nullopt;
}

std::vector<std::byte> encode_redundancy_header(const RedundancyHeader& header) {
  const auto* magic = reinterpret_cast<const std::byte*>(kRedundancyMagic);
  std::vector<std::byte> out(magic, magic + sizeof kRedundancyMagic);
  const auto length_at = out.size();
  put_le(out, 0, 8);  // the header's size, filled in below
  put_le(out, kRedundancyVersion, 4);
  put_le(out, static_cast<std::uint32_t>(header.kind), 4);
  put_le(out, static_cast<std::uint64_t>(header.epoch), 8);
  put_le(out, static_cast<std::uint32_t>(header.rank), 4);
  put_le(out, static_cast<std::uint32_t>(header.position), 4);
  put_le(out, header.segment, 8);
  put_le(out, header.data_bytes, 8);
  put_le(out, header.data_xxh64, 8);
  put_le(out, header.members.size(), 4);
  for (const auto& member : header.members) {
    put_le(out, static_cast<std::uint32_t>(member.rank), 4);
    put_le(out, member.size, 8);
    put_le(out, member.xxh64, 8);
    put_le(out, member.host.size(), 4);
    const auto* host = reinterpret_cast<const std::byte*>(member.host.data());
    out.insert(out.end(), host, host + member.host.size());
  }
  const std::uint64_t size = out.size() + 8;
  for (int i = 0; i < 8; ++i) {
    out[length_at + static_cast<std::size_t>(i)] = static_cast<std::byte>((size >> (8 * i)) & 0xff);
  }
  put_le(out, XXH64(out.data(), out.size(), 0), 8);
  return out;
}

std::pair<RedundancyHeader, std::uint64_t> read_redundancy_header(int fd, const std::string& what) {
  try {
    const auto file_bytes = file_size(fd);
    std::vector<std::byte> head(16);
    read_at(fd, 0, head, what);
    if (std::memcmp(head.data(), kRedundancyMagic, sizeof kRedundancyMagic) != 0) {
      throw Error("no redundancy file header");
    }
    const auto size = HeaderFields(std::span(head).subspan(8)).get(8);
    if (size < head.size() + 8 || size > kMaxRedundancyHeader || size > file_bytes) {
      throw Error("a header of " + std::to_string(size) + " bytes");
    }
    std::vector<std::byte> bytes(size);
    read_at(fd, 0, bytes, what);
    if (HeaderFields(std::span(bytes).subspan(size - 8)).get(8) !=
        XXH64(bytes.data(), size - 8, 0)) {
      throw Error("its header's checksum does not match");
    }
    HeaderFields fields{std::span<const std::byte>(bytes).first(size - 8)};
    fields.skip(16);  // the magic and the size, read above
    RedundancyHeader header;
    if (const auto version = fields.get(4); version != kRedundancyVersion) {
      throw Error("redundancy file version " + std::to_string(version));
    }
    const auto kind = fields.get(4);
    if (kind != static_cast<std::uint32_t>(RedundancyKind::kPartner) &&
        kind != static_cast<std::uint32_t>(RedundancyKind::kParity)) {
      throw Error("unknown redundancy kind " + std::to_string(kind));
    }
    header.kind = static_cast<RedundancyKind>(kind);
    header.epoch = static_cast<std::int64_t>(fields.get(8));
    header.rank = static_cast<int>(fields.get(4));
    header.position = static_cast<int>(fields.get(4));
    header.segment = fields.get(8);
    header.data_bytes = fields.get(8);
    header.data_xxh64 = fields.get(8);
    const auto members = fields.get(4);
    for (std::uint64_t i = 0; i < members; ++i) {
      RedundancyMember member;
      member.rank = static_cast<int>(fields.get(4));
      member.size = fields.get(8);
      member.xxh64 = fields.get(8);
      member.host = fields.text(fields.get(4));
      header.members.push_back(std::move(member));
    }
    if (fields.at() != size - 8 || header.members.empty() || header.position < 0 ||
        static_cast<std::size_t>(header.position) >= header.members.size()) {
      throw Error("a header that does not add up");
    }
    if (header.data_bytes != file_bytes - size) {
      throw Error("holds " + std::to_string(file_bytes - size) +
                  " bytes of data, its header says " + std::to_string(header.data_bytes));
    }
    return {std::move(header), size};
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    throw CorruptCheckpoint(what + ": " + error.what());
  }
}

std::uint64_t file_xxh64(int fd, std::uint64_t offset, std::uint64_t bytes,
                         const std::string& what) {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(),
                                                                   XXH64_freeState);
  XXH64_reset(state.get(), 0);
  // One buffer a thread, kept: fresh memory costs a page fault a page (on a virtual machine
  // whose host takes freed memory back, one in the host too), more than hashing it.
  thread_local std::vector<std::byte> piece(kHashedPiece);
  for (std::uint64_t done = 0; done < bytes;) {
    const auto span = std::span(piece).first(std::min<std::uint64_t>(piece.size(), bytes - done));
    read_at(fd, offset + done, span, what);
    XXH64_update(state.get(), span.data(), span.size());
    done += span.size();
  }
  return XXH64_digest(state.get());
}

std::pair<RedundancyHeader, std::uint64_t> verified_redundancy_file(
    const std::filesystem::path& file) {
  const auto fd = open_regular_file_for_reading(file);
  auto header = read_redundancy_header(fd.get(), file.string());
  if (file_xxh64(fd.get(), header.second, header.first.data_bytes, file.string()) !=
      header.first.data_xxh64) {
    throw CorruptCheckpoint(file.string() + ": its data's xxh64 is not its header's");
  }
  return header;
}

struct RedundancyFileWriter::Hasher {
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state{XXH64_createState(),
                                                                   XXH64_freeState};
};

RedundancyFileWriter::RedundancyFileWriter(std::filesystem::path target, RedundancyHeader header,
                                           DataHash hash)
    : target_(std::move(target)),
      temporary_(temporary_sibling(target_)),
      header_(std::move(header)),
      header_size_(encode_redundancy_header(header_).size()),
      fd_(create_new_file(temporary_)),
      hasher_(hash == DataHash::kComputed ? std::make_unique<Hasher>() : nullptr) {
  if (hasher_) {
    XXH64_reset(hasher_->state.get(), 0);
  }
}

RedundancyFileWriter::~RedundancyFileWriter() {
  if (fd_.valid()) {
    ::unlink(temporary_.c_str());
  }
}

void RedundancyFileWriter::append(std::span<const std::byte> bytes) {
  if (bytes.size() > header_.data_bytes - written_) {
    throw Error(temporary_.string() + ": more data than its header says");
  }
  write_at(fd_.get(), header_size_ + written_, bytes, temporary_.string());
  if (hasher_) {
    XXH64_update(hasher_->state.get(), bytes.data(), bytes.size());
  }
  written_ += bytes.size();
}

std::uint64_t RedundancyFileWriter::finish() {
  if (!hasher_) {
    throw Error(temporary_.string() + ": its data's xxh64 was to be given");
  }
  finish(XXH64_digest(hasher_->state.get()));
  return header_.data_xxh64;
}

void RedundancyFileWriter::finish(std::uint64_t data_xxh64) {
  if (written_ != header_.data_bytes) {
    throw Error(temporary_.string() + ": " + std::to_string(written_) + " bytes written of " +
                std::to_string(header_.data_bytes));
  }
  header_.data_xxh64 = data_xxh64;
  write_at(fd_.get(), 0, encode_redundancy_header(header_), temporary_.string());
  fd_.close(temporary_.string());
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
    const auto message = errno_message("rename " + temporary_.string() + " to " + target_.string());
    ::unlink(temporary_.c_str());
    throw Error(message);
  }
}

int remove_redundancy_files(const std::filesystem::path& dir,
                            const std::function<bool(std::int64_t)>& keep) {
  return remove_own_files(dir, [&](const std::string& name) {
    const auto target = temporary_target(name);
    const auto parsed = parse_redundancy_file_name(target ? *target : name);
    return parsed && !keep(parsed->epoch);
  });
}

}  // namespace epochrun
