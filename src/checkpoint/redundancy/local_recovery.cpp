#include "local_recovery.hpp"

#include <dirent.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "bounded_exchange.hpp"
#include "collective_errors.hpp"
#include "durable_file.hpp"
#include "host_name.hpp"
#include "local_copy.hpp"
#include "local_redundancy_file.hpp"
#include "piece_transfer.hpp"
#include "regular_file.hpp"
#include "seconds_since.hpp"
#include "xor_parity.hpp"

namespace epochrun {
namespace {

// The names of `epoch`'s copies and redundancy files in `dir`, sorted (no temporaries).
std::vector<std::string> epoch_files(const std::filesystem::path& dir, std::int64_t epoch) {
  std::vector<std::string> names;
  const auto close = [](DIR* open) { ::closedir(open); };
  const std::unique_ptr<DIR, decltype(close)> listing(::opendir(dir.c_str()), close);
  while (listing) {
    const auto* entry = ::readdir(listing.get());
    if (entry == nullptr) {
      break;
    }
    const std::string name = entry->d_name;
    const auto copy = parse_epoch_rank_name(name, ".local");
    const auto redundancy = parse_redundancy_file_name(name);
    if ((copy && copy->first == epoch) || (redundancy && redundancy->epoch == epoch)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A copy's record, once every blob's bytes match the record's xxh64 and it is `epoch`'s copy of
// `rank`. CorruptCheckpoint otherwise.
LocalCopyRecord verified_copy(int fd, const std::string& what, std::int64_t epoch, int rank) {
  auto record = read_local_copy_record(fd, what);
  if (record.epoch != epoch || record.rank != rank) {
    throw CorruptCheckpoint(what + ": the record is of epoch " + std::to_string(record.epoch) +
                            ", rank " + std::to_string(record.rank));
  }
  for (const auto& blob : record.blobs) {
    if (file_xxh64(fd, blob.offset, blob.bytes, what) != blob.xxh64) {
      throw CorruptCheckpoint(what + ": blob '" + blob.name + "' does not match its xxh64");
    }
  }
  return record;
}

// `name` in `dir` as this rank finds it, every byte of it read; `problem` says why it is not
// intact.
HeldFile examine(const std::filesystem::path& dir, const std::string& name, std::int64_t epoch,
                 int lister, const std::string& host, std::string& problem) {
  HeldFile held;
  held.lister = lister;
  held.host = host;
  held.name = name;
  const auto path = dir / name;
  try {
    const auto fd = open_regular_file_for_reading(path);
    if (const auto copy = parse_epoch_rank_name(name, ".local")) {
      held.kind = HeldKind::kCopy;
      held.rank = copy->second;
      held.size = file_size(fd.get());
      const auto record = verified_copy(fd.get(), path.string(), epoch, held.rank);
      held.xxh64 = local_copy_record_xxh64(record);
      held.saved_on = record.host;
      held.intact = true;
      return held;
    }
    const auto parsed = *parse_redundancy_file_name(name);
    held.kind = parsed.kind == RedundancyKind::kPartner ? HeldKind::kPartner : HeldKind::kParity;
    held.rank = parsed.rank;
    std::tie(held.header, held.data_offset) = read_redundancy_header(fd.get(), path.string());
    if (held.header.epoch != epoch || held.header.rank != parsed.rank ||
        held.header.kind != parsed.kind) {
      throw CorruptCheckpoint(path.string() + ": its header is of another file");
    }
    if (file_xxh64(fd.get(), held.data_offset, held.header.data_bytes, path.string()) !=
        held.header.data_xxh64) {
      throw CorruptCheckpoint(path.string() + ": its data's xxh64 is not its header's");
    }
    held.intact = true;
  } catch (const std::exception& error) {
    problem = error.what();
  }
  return held;
}

nlohmann::json to_json(const HeldFile& held) {
  auto members = nlohmann::json::array();
  for (const auto& member : held.header.members) {
    members.push_back({member.rank, member.host, member.size, member.xxh64});
  }
  return {
      {"lister", held.lister},
      {"host", held.host},
      {"name", held.name},
      {"kind", static_cast<int>(held.kind)},
      {"rank", held.rank},
      {"intact", held.intact},
      {"size", held.size},
      {"xxh64", held.xxh64},
      {"saved_on", held.saved_on},
      {"data_offset", held.data_offset},
      {"header",
       {static_cast<int>(held.header.kind), held.header.epoch, held.header.rank,
        held.header.position, held.header.segment, held.header.data_bytes, held.header.data_xxh64}},
      {"members", members}};
}

HeldFile held_of(const nlohmann::json& json) {
  HeldFile held;
  held.lister = json.at("lister").get<int>();
  held.host = json.at("host").get<std::string>();
  held.name = json.at("name").get<std::string>();
  held.kind = static_cast<HeldKind>(json.at("kind").get<int>());
  held.rank = json.at("rank").get<int>();
  held.intact = json.at("intact").get<bool>();
  held.size = json.at("size").get<std::uint64_t>();
  held.xxh64 = json.at("xxh64").get<std::uint64_t>();
  held.saved_on = json.at("saved_on").get<std::string>();
  held.data_offset = json.at("data_offset").get<std::uint64_t>();
  const auto& header = json.at("header");
  held.header = {static_cast<RedundancyKind>(header.at(0).get<std::uint32_t>()),
                 header.at(1).get<std::int64_t>(),
                 header.at(2).get<int>(),
                 header.at(3).get<int>(),
                 header.at(4).get<std::uint64_t>(),
                 header.at(5).get<std::uint64_t>(),
                 header.at(6).get<std::uint64_t>(),
                 {}};
  for (const auto& member : json.at("members")) {
    held.header.members.push_back({member.at(0).get<int>(), member.at(1).get<std::string>(),
                                   member.at(2).get<std::uint64_t>(),
                                   member.at(3).get<std::uint64_t>()});
  }
  return held;
}

// This rank's part, written from its pieces into a temporary file, verified and renamed into
// place. Throws (the part is then lost; the temporary file is gone).
class RebuiltCopy {
 public:
  RebuiltCopy(const std::filesystem::path& dir, std::int64_t epoch, int rank, const PartPlan& part)
      : target_(local_copy_file(dir, epoch, rank)),
        temporary_(temporary_sibling(target_)),
        fd_(create_new_file(temporary_)),
        epoch_(epoch),
        rank_(rank),
        part_(part) {
    resize(part.padded);
  }
  ~RebuiltCopy() {
    if (!renamed_) {
      ::unlink(temporary_.c_str());
    }
  }
  RebuiltCopy(const RebuiltCopy&) = delete;
  RebuiltCopy& operator=(const RebuiltCopy&) = delete;

  void receive(const Piece& piece, std::uint64_t offset, std::span<const std::byte> bytes) {
    const auto at = piece.at + offset;
    if (!piece.xor_in) {
      write_at(fd_.get(), at, bytes, temporary_.string());
      return;
    }
    buffer_.resize(bytes.size());
    read_at(fd_.get(), at, buffer_, temporary_.string());
    xor_into(buffer_, bytes);
    write_at(fd_.get(), at, buffer_, temporary_.string());
  }

  void finish() {
    resize(part_.size);
    const auto what = temporary_.string();
    // Every value against its record, the record against the one its sources name.
    if (local_copy_record_xxh64(verified_copy(fd_.get(), what, epoch_, rank_)) != part_.xxh64) {
      throw CorruptCheckpoint(what + ": the rebuilt copy's record is not the one its sources name");
    }
    fd_.close(what);
    if (::rename(temporary_.c_str(), target_.c_str()) != 0) {
      throw Error(errno_message("rename " + what + " to " + target_.string()));
    }
    renamed_ = true;
  }

 private:
  void resize(std::uint64_t size) {
    if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) {
      throw Error(errno_message("resize " + temporary_.string()));
    }
  }
  std::filesystem::path target_, temporary_;
  FileDescriptor fd_;
  std::int64_t epoch_;
  int rank_;
  PartPlan part_;
  std::vector<std::byte> buffer_;
  bool renamed_ = false;
};

}  // namespace

std::string RecoveryReport::summary() const {
  return fmt::format("epoch {}: {}", epoch, fmt::join(host_lines, "; "));
}

RecoveryReport recover_local_copies(const std::filesystem::path& dir, std::int64_t epoch,
                                    const Communicator& comm, const RedundancyCall& call) {
  const auto started = std::chrono::steady_clock::now();
  const auto context = fmt::format("recover epoch {}'s node-local copies", epoch);
  const auto host = call.host.empty() ? host_name() : call.host;
  const auto placement =
      HostPlacement::of(allgather_within(comm, host, nullptr, call.timeout, context + ": hosts"));
  const int me = comm.rank();

  // Inventory: the ranks of a host share its files' verification.
  const auto& neighbours = placement.ranks_of_host[placement.host_of_rank[me]];
  const auto names = epoch_files(dir, epoch);
  auto mine = nlohmann::json::array();
  auto damaged = nlohmann::json::array();
  for (std::size_t i = placement.local_index[me]; i < names.size(); i += neighbours.size()) {
    std::string problem;
    const auto held = examine(dir, names[i], epoch, me, host, problem);
    mine.push_back(to_json(held));
    if (!problem.empty()) {
      damaged.push_back(fmt::format("{}: {}: {}", host, names[i], problem));
    }
  }
  const nlohmann::json inventory = {{"held", mine}, {"damaged", damaged}};
  std::vector<HeldFile> held;
  RecoveryReport report;
  report.epoch = epoch;
  for (const auto& text :
       allgather_within(comm, inventory.dump(), nullptr, call.timeout, context + ": inventory")) {
    const auto json = nlohmann::json::parse(text);
    for (const auto& entry : json.at("held")) {
      held.push_back(held_of(entry));
    }
    for (const auto& line : json.at("damaged")) {
      report.damaged.push_back(line.get<std::string>());
    }
  }
  auto plan = plan_recovery(placement, held);

  // Transfer: the pieces of every part, into this rank's rebuilt copy.
  std::vector<Piece> pieces;
  for (const auto& part : plan.parts) {
    pieces.insert(pieces.end(), part.pieces.begin(), part.pieces.end());
  }
  const auto& own = plan.parts[me];
  std::unique_ptr<RebuiltCopy> rebuilt;
  std::exception_ptr failure;
  if (!own.pieces.empty()) {
    failure = failure_of([&] { rebuilt = std::make_unique<RebuiltCopy>(dir, epoch, me, own); });
  }
  const auto transfer = transfer_pieces(
      comm, dir, pieces, call.timeout, context,
      [&](const Piece& piece, std::uint64_t offset, std::span<const std::byte> bytes) {
        if (!rebuilt) {
          throw Error("no copy to rebuild");
        }
        rebuilt->receive(piece, offset, bytes);
      });
  report.bytes_sent = transfer.bytes_sent;
  report.bytes_received = transfer.bytes_received;
  if (rebuilt) {
    if (!failure) {
      failure = transfer.failure;
    }
    if (!failure) {
      failure = failure_of([&] { rebuilt->finish(); });
    }
    rebuilt.reset();
  } else if (transfer.failure) {
    // A source this rank could not read: the part it went to fails its verification.
    try {
      std::rethrow_exception(transfer.failure);
    } catch (const std::exception& error) {
      spdlog::warn("{}: {}", context, error.what());
    }
  }
  std::string outcome;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& error) {
      outcome = error.what();
    }
  }
  const auto outcomes =
      allgather_within(comm, outcome, nullptr, call.timeout, context + ": verification");
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    if (!outcomes[rank].empty()) {
      if (me == 0) {
        spdlog::warn("{}: rank {}'s part could not be recovered: {}", context, rank,
                     outcomes[rank]);
      }
      plan.parts[rank].source = PartSource::kLost;
    }
  }
  for (const auto& part : plan.parts) {
    report.sources.push_back(part.source);
  }
  report.unrecoverable = plan.lost();
  report.host_lines = plan.host_lines();
  report.seconds = seconds_since(started);
  return report;
}

}  // namespace epochrun
