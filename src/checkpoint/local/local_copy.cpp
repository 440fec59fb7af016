#include "local_copy.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "direct_io.hpp"
#include "durable_file.hpp"
#include "epochrun/errors.hpp"
#include "file_descriptor.hpp"
#include "host_name.hpp"
#include "mapped_store.hpp"
#include "regular_file.hpp"
#include "streaming_writer.hpp"

namespace epochrun {
namespace {

constexpr char kLocalCopyMagic[8] = {'E', 'P', 'R', 'L', 'O', 'C', 'L', '1'};
constexpr std::size_t kLocalCopyTail = 16;  // the record's length (uint64 LE), then the magic
// A record holds a couple of hundred bytes a value: one that says it is longer than this is
// damaged, and is judged so without being read.
constexpr std::uint64_t kMaxLocalCopyRecord = std::uint64_t{256} << 20;

std::uint64_t aligned_up(std::uint64_t offset) {
  return (offset + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
}

// Whether `text` is a number written out in decimal digits alone (into `value`).
template <typename Number>
bool whole_number(std::string_view text, Number& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && text[0] != '-' && error == std::errc() &&
         end == text.data() + text.size();
}

}  // namespace

std::optional<std::pair<std::int64_t, int>> parse_epoch_rank_name(std::string_view name,
                                                                  std::string_view suffix) {
  constexpr std::string_view prefix = "epoch-", middle = ".rank-";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  name = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const auto at = name.find(middle);
  if (at == std::string_view::npos || at < 6) {
    return std::nullopt;
  }
  std::int64_t epoch = 0;
  int rank = 0;
  if (!whole_number(name.substr(0, at), epoch) ||
      !whole_number(name.substr(at + middle.size()), rank)) {
    return std::nullopt;
  }
  return std::pair(epoch, rank);
}

namespace {

nlohmann::json record_json(const LocalCopyRecord& record) {
  auto blobs = nlohmann::json::array();
  for (const auto& blob : record.blobs) {
    blobs.push_back({{"name", blob.name},
                     {"kind", static_cast<int>(blob.kind)},
                     {"dtype", std::string(dtype_name(blob.dtype))},
                     {"shape", blob.shape},
                     {"offset", blob.offset},
                     {"bytes", blob.bytes},
                     {"xxh64", blob.xxh64}});
  }
  return {{"job", record.job},     {"epoch", record.epoch}, {"rank", record.rank},
          {"ranks", record.ranks}, {"host", record.host},   {"blobs", blobs}};
}

LocalCopyRecord record_of(const nlohmann::json& json) {
  LocalCopyRecord record{json.at("job").get<std::string>(),  json.at("epoch").get<std::int64_t>(),
                         json.at("rank").get<int>(),         json.at("ranks").get<int>(),
                         json.at("host").get<std::string>(), {}};
  for (const auto& blob : json.at("blobs")) {
    const auto kind = blob.at("kind").get<int>();
    if (kind < 0 || kind > static_cast<int>(StorageKind::kRagged)) {
      throw Error("unknown storage kind " + std::to_string(kind));
    }
    LocalCopyBlob described{blob.at("name").get<std::string>(),
                            static_cast<StorageKind>(kind),
                            parse_dtype(blob.at("dtype").get<std::string>()),
                            blob.at("shape").get<Shape>(),
                            blob.at("offset").get<std::uint64_t>(),
                            blob.at("bytes").get<std::uint64_t>(),
                            blob.at("xxh64").get<std::uint64_t>()};
    if (described.bytes != element_count(described.shape) * element_size(described.dtype)) {
      throw Error("blob '" + described.name + "' holds " + std::to_string(described.bytes) +
                  " bytes, not those of its shape");
    }
    record.blobs.push_back(std::move(described));
  }
  return record;
}

}  // namespace

std::filesystem::path local_copy_file(const std::filesystem::path& dir, std::int64_t epoch,
                                      int rank) {
  return dir / fmt::format("epoch-{:06d}.rank-{}.local", epoch, rank);
}

std::filesystem::path local_spare_file(const std::filesystem::path& dir, int rank) {
  return dir / fmt::format("spare.rank-{}.local", rank);
}

namespace {

// Whether `file` is a directory (never followed): one under the spare's name is not the rank's
// spare, and is left alone.
bool is_a_directory(const std::filesystem::path& file) {
  struct stat status {};
  return ::lstat(file.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

// Whether `status` is that of a spare the rank may write over: a regular file with no other
// name (writing over a hard link would change another file), owned by this process's user.
bool reusable(const struct stat& status) {
  return S_ISREG(status.st_mode) && status.st_nlink == 1 && status.st_uid == ::geteuid();
}

// `temporary`, opened for the copy: the rank's spare renamed to it when the spare is reusable
// (its mode then set to a new copy's, 0644), else a new file. Anything else under the spare's
// name is deleted, but a directory, which is left where it is.
FileDescriptor open_copy_file(const std::filesystem::path& spare,
                              const std::filesystem::path& temporary) {
  struct stat status {};
  if (::lstat(spare.c_str(), &status) == 0) {
    if (reusable(status) && ::rename(spare.c_str(), temporary.c_str()) == 0) {
      try {
        // Read-write: a store through a mapping (mapped_store.hpp) maps it.
        auto fd = open_regular_file_for_writing(temporary, WriteAccess::kAlsoRead);
        if (::fstat(fd.get(), &status) == 0 && reusable(status) && ::fchmod(fd.get(), 0644) == 0) {
          return fd;
        }
      } catch (const Error&) {
        // swapped for something else since it was looked at: as below
      }
      if (::unlink(temporary.c_str()) != 0) {
        ::rename(temporary.c_str(), spare.c_str());  // a directory: back under its name
      }
    } else if (!S_ISDIR(status.st_mode)) {
      ::unlink(spare.c_str());
    }
  }
  return create_new_file(temporary);
}

}  // namespace

LocalCopyRecord write_local_copy(const std::filesystem::path& dir, const std::string& job,
                                 std::int64_t epoch, int rank, int ranks,
                                 const std::vector<SavedBlob>& blobs) {
  const auto target = local_copy_file(dir, epoch, rank);
  const auto temporary = temporary_sibling(target);
  LocalCopyRecord record{job, epoch, rank, ranks, host_name(), {}};
  try {
    auto fd = open_copy_file(local_spare_file(dir, rank), temporary);
    // Never fsynced (a copy lost with its node's power is what the flushed checkpoint and the
    // redundancy are for): written as the job would write it, its writeback left to the kernel.
    StreamingWriter writer(fd.get(), -1, temporary.string(), StreamingWriter::Then::kNothing);
    // On tmpfs the large values are stored through a mapping instead (mapped_store.hpp: the
    // same bytes and hash in about 0.8 of the time).
    std::optional<MappedStore> mapped;
    if (MappedStore::suits(fd.get())) {
      mapped.emplace(fd.get(), temporary.string());
    }
    std::uint64_t offset = 0;
    for (const auto& saved : blobs) {
      const auto& view = saved.view;
      const auto sum = mapped && mapped->takes(offset, view.bytes.size())
                           ? mapped->store(offset, view)
                           : writer.write(offset, view);
      record.blobs.push_back(LocalCopyBlob{view.name, saved.kind, view.dtype, view.shape, offset,
                                           view.bytes.size(), sum});
      offset = aligned_up(offset + view.bytes.size());
    }
    writer.flush();
    const auto text = record_json(record).dump();
    std::string tail(kLocalCopyTail, '\0');
    const std::uint64_t length = text.size();
    std::memcpy(tail.data(), &length, 8);
    std::memcpy(tail.data() + 8, kLocalCopyMagic, 8);
    const auto trailer = text + tail;
    write_at(fd.get(), offset, std::as_bytes(std::span(trailer.data(), trailer.size())),
             temporary.string());
    // A spare longer than this copy keeps its tail past the record: cut, for the record is
    // found from the end.
    if (::ftruncate(fd.get(), static_cast<off_t>(offset + trailer.size())) != 0) {
      throw Error(errno_message("truncate " + temporary.string()));
    }
    fd.close(temporary.string());
    if (::rename(temporary.c_str(), target.c_str()) != 0) {
      throw Error(errno_message("rename " + temporary.string() + " to " + target.string()));
    }
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  return record;
}

std::uint64_t local_copy_record_xxh64(const LocalCopyRecord& record) {
  const auto text = record_json(record).dump();
  return XXH64(text.data(), text.size(), 0);
}

LocalCopyRecord read_local_copy_record(int fd, const std::string& what) {
  try {
    const auto size = file_size(fd);
    if (size < kLocalCopyTail) {
      throw Error("shorter than its record");
    }
    std::array<std::byte, kLocalCopyTail> tail{};
    read_at(fd, size - kLocalCopyTail, tail, what);
    std::uint64_t length = 0;
    std::memcpy(&length, tail.data(), 8);
    if (std::memcmp(tail.data() + 8, kLocalCopyMagic, 8) != 0 || length > size - kLocalCopyTail) {
      throw Error("no node-local copy record at its end");
    }
    if (length > kMaxLocalCopyRecord) {
      throw Error("its record says it is " + std::to_string(length) + " bytes long");
    }
    std::string text(length, '\0');
    read_at(fd, size - kLocalCopyTail - length, std::as_writable_bytes(std::span(text)), what);
    auto record = record_of(nlohmann::json::parse(text));
    for (const auto& blob : record.blobs) {
      if (blob.offset > size - kLocalCopyTail - length ||
          blob.bytes > size - kLocalCopyTail - length - blob.offset) {
        throw Error("blob '" + blob.name + "' lies past the data");
      }
    }
    return record;
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& error) {
    throw CorruptCheckpoint(what + ": " + error.what());
  }
}

MappedLocalCopy MappedLocalCopy::open(const std::filesystem::path& file) {
  const auto fd = open_regular_file_for_reading(file);
  auto record = read_local_copy_record(fd.get(), file.string());
  const auto size = static_cast<std::size_t>(file_size(fd.get()));
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) {
    throw CheckpointError(errno_message("map " + file.string()));
  }
  return MappedLocalCopy(static_cast<const std::byte*>(data), size, std::move(record));
}

MappedLocalCopy::~MappedLocalCopy() {
  if (data_ != nullptr) {
    ::munmap(const_cast<std::byte*>(data_), size_);
  }
}

MappedLocalCopy::MappedLocalCopy(MappedLocalCopy&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(other.size_),
      record_(std::move(other.record_)) {}

std::vector<SavedBlob> MappedLocalCopy::flushed(std::vector<SavedBlob> saved) const {
  if (saved.size() != record_.blobs.size()) {
    throw Error("the node-local copy holds " + std::to_string(record_.blobs.size()) +
                " blobs, the save " + std::to_string(saved.size()));
  }
  for (std::size_t i = 0; i < saved.size(); ++i) {
    auto& view = saved[i].view;
    const auto& copied = record_.blobs[i];
    if (copied.name != view.name || copied.bytes != view.bytes.size()) {
      throw Error("the node-local copy's blob '" + copied.name + "' is not the save's");
    }
    view.bytes = std::span(data_ + copied.offset, copied.bytes);
    view.xxh64.reset();
    view.expected_xxh64 = copied.xxh64;
    view.direct = true;  // page-aligned, read-only: direct I/O costs the job's CPUs nothing
  }
  return saved;
}

namespace {

// The rank R of a spare's name, spare.rank-R.local.
std::optional<int> spare_rank(std::string_view name) {
  constexpr std::string_view prefix = "spare.rank-", suffix = ".local";
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  int rank = 0;
  if (!whole_number(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                    rank)) {
    return std::nullopt;
  }
  return rank;
}

}  // namespace

int remove_local_copies(const std::filesystem::path& dir, int rank, int ranks,
                        const std::vector<std::int64_t>& keep, SpareCopy spare) {
  const auto close = [](DIR* open) { ::closedir(open); };
  const std::unique_ptr<DIR, decltype(close)> listing(::opendir(dir.c_str()), close);
  if (!listing) {
    return 1;
  }
  // A rank this run does not have (a run before it had more) writes nothing here any more:
  // its files are every rank's to delete, or they would stay for good.
  const auto ours = [&](int owner) { return owner == rank || owner >= ranks; };
  std::vector<std::string> doomed;
  std::optional<std::pair<std::int64_t, std::string>> oldest;  // the copy to keep as the spare
  while (const auto* entry = ::readdir(listing.get())) {
    const std::string name = entry->d_name;
    // Leftovers of an interrupted write are their target name's rank's.
    const auto target = temporary_target(name);
    const auto parsed = parse_epoch_rank_name(target ? *target : name, ".local");
    if (parsed && ours(parsed->second) &&
        (target || std::find(keep.begin(), keep.end(), parsed->first) == keep.end())) {
      if (!target && parsed->second == rank && (!oldest || parsed->first < oldest->first)) {
        oldest.emplace(parsed->first, name);
      }
      doomed.push_back(name);
    } else if (const auto owner = spare_rank(name);
               owner && *owner >= ranks && !is_a_directory(dir / name)) {
      doomed.push_back(name);
    }
  }
  const auto spare_file = local_spare_file(dir, rank);
  int failed = 0;
  if (spare == SpareCopy::kKeep && oldest &&
      ::rename((dir / oldest->second).c_str(), spare_file.c_str()) == 0) {
    std::erase(doomed, oldest->second);
  } else if (spare == SpareCopy::kDelete && !is_a_directory(spare_file) &&
             ::unlink(spare_file.c_str()) != 0 && errno != ENOENT) {
    ++failed;
  }
  for (const auto& name : doomed) {
    if (::unlink((dir / name).c_str()) != 0 && errno != ENOENT) {
      ++failed;
    }
  }
  return failed;
}

namespace {

// The name check_local_directory's probe has before its random part: temporary_sibling's of
// DIR/probe.local.
constexpr char kProbeTarget[] = "probe.local";

// `path` made absolute, its symlinks resolved as far as it exists, its . and .. removed; `path`
// itself when that fails (a symlink loop: the checks after it say so).
std::filesystem::path resolved(const std::filesystem::path& path) {
  std::error_code error;
  auto normal = std::filesystem::weakly_canonical(std::filesystem::absolute(path, error), error)
                    .lexically_normal();
  if (error) {
    return path;
  }
  // "D/" and "D" are one directory.
  return normal.has_filename() || !normal.has_parent_path() ? normal : normal.parent_path();
}

}  // namespace

void check_local_directory(const std::filesystem::path& dir,
                           const std::filesystem::path& checkpoint_dir) {
  const auto refuse = [&](const std::string& why) {
    throw UsageError("--local-dir '" + dir.string() + "' cannot hold node-local copies: " + why);
  };
  // Before anything is created: the run checks --local-dir before it creates the checkpoint
  // directory, which may not exist yet (and would then be created here, as --local-dir).
  if (!checkpoint_dir.empty() && resolved(dir) == resolved(checkpoint_dir)) {
    refuse("it is the checkpoint directory itself");
  }
  std::error_code error;
  if (!std::filesystem::exists(dir, error) && !error) {
    try {
      create_private_directories(dir);
    } catch (const std::exception& failure) {
      refuse(failure.what());
    }
  }
  if (!std::filesystem::is_directory(dir, error)) {
    refuse(error ? error.message() : "it is not a directory");
  }
  if (std::filesystem::equivalent(dir, checkpoint_dir, error)) {
    refuse("it is the checkpoint directory itself");
  }
  const auto probe = temporary_sibling(dir / kProbeTarget);
  try {
    auto fd = create_new_file(probe);
    fd.close(probe.string());
  } catch (const std::exception& failure) {
    refuse(failure.what());
  }
  ::unlink(probe.c_str());
}

int remove_stale_local_probes(const std::filesystem::path& dir) {
  return remove_own_files(dir, [](const std::string& name) {
    const auto target = temporary_target(name);
    return target && *target == kProbeTarget;
  });
}

}  // namespace epochrun
