#include "local_redundancy.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xxhash.h>
#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "bounded_exchange.hpp"
#include "collective_errors.hpp"
#include "host_name.hpp"
#include "local_copy.hpp"
#include "local_redundancy_file.hpp"
#include "piece_transfer.hpp"
#include "redundancy_sets.hpp"
#include "regular_file.hpp"
#include "seconds_since.hpp"
#include "step_times.hpp"
#include "xor_parity.hpp"

namespace epochrun {
namespace {

// Every rank's copy as the protection records it (rank, host, size, its record's xxh64), and
// where the ranks run.
struct Copies {
  std::vector<RedundancyMember> members;
  HostPlacement placement;
};

Copies gather_copies(const Communicator& comm, const std::string& host, std::uint64_t size,
                     std::uint64_t xxh64, std::exception_ptr failure, const RedundancyCall& call,
                     const std::string& context) {
  const nlohmann::json mine = {{"host", host}, {"size", size}, {"xxh64", xxh64}};
  Copies copies;
  std::vector<std::string> hosts;
  int rank = 0;
  for (const auto& text : allgather_within(comm, mine.dump(), failure, call.timeout, context)) {
    const auto json = nlohmann::json::parse(text);
    copies.members.push_back(RedundancyMember{rank++, json.at("host").get<std::string>(),
                                              json.at("size").get<std::uint64_t>(),
                                              json.at("xxh64").get<std::uint64_t>()});
    hosts.push_back(copies.members.back().host);
  }
  copies.placement = HostPlacement::of(hosts);
  return copies;
}

// Partner: each rank's copy file, byte for byte, into a partner copy on its partner's host. Each
// copy is hashed as it is read for its partner, not in a pass of its own before (which cost a
// read of every copy more, bench --redundancy's steps): the xxh64s of the data are gathered
// after the transfer, before any partner copy is finished with them in its header. The receiver
// writes what arrives without hashing it again: the header's data xxh64 is the sender's, and a
// partner copy is verified against it before any rebuild uses it.
void exchange_partner_copies(const std::filesystem::path& dir, std::int64_t epoch,
                             const Communicator& comm, const Copies& copies,
                             const RedundancyCall& call, const std::string& context,
                             RedundancyStats& stats, std::exception_ptr& failure) {
  std::vector<Piece> pieces;
  for (const auto& member : copies.members) {
    if (const auto partner = partner_rank(copies.placement, member.rank)) {
      pieces.push_back(Piece{member.rank,
                             local_copy_file(dir, epoch, member.rank).filename().string(), 0,
                             member.size, *partner, 0, false});
    }
  }
  std::map<int, std::unique_ptr<RedundancyFileWriter>> writers;
  const auto creating = step_times::Clock::now();
  for (const auto& piece : pieces) {
    if (piece.to == comm.rank()) {
      const auto& member = copies.members[piece.from];
      keep_first_failure(failure, [&] {
        writers[piece.from] = std::make_unique<RedundancyFileWriter>(
            partner_copy_file(dir, epoch, piece.from),
            RedundancyHeader{
                RedundancyKind::kPartner, epoch, piece.from, 0, 0, member.size, 0, {member}},
            RedundancyFileWriter::DataHash::kGiven);
      });
    }
  }
  step_times::add_since("create", creating);
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> sent_hash(XXH64_createState(),
                                                                             XXH64_freeState);
  XXH64_reset(sent_hash.get(), 0);
  auto transfer = transfer_pieces(
      comm, dir, pieces, call.timeout, context,
      [&](const Piece& piece, std::uint64_t, std::span<const std::byte> bytes) {
        writers.at(piece.from)->append(bytes);
      },
      [&](const Piece&, std::uint64_t, std::span<const std::byte> bytes) {
        XXH64_update(sent_hash.get(), bytes.data(), bytes.size());
      },
      kProtectionChunk);
  if (!failure) {
    failure = transfer.failure;
  }
  stats.bytes_sent += transfer.bytes_sent;
  stats.bytes_received += transfer.bytes_received;
  // What each rank sent (nothing, and an unused hash, for a rank without a partner).
  const auto agreeing = step_times::Clock::now();
  const auto sent = allgather_within(comm, std::to_string(XXH64_digest(sent_hash.get())), failure,
                                     call.timeout, context + ": xxh64");
  step_times::add_since("agree", agreeing);
  const auto finishing = step_times::Clock::now();
  for (auto& [rank, writer] : writers) {
    keep_first_failure(failure, [&, rank = rank, writer = writer.get()] {
      writer->finish(std::stoull(sent.at(static_cast<std::size_t>(rank))));
    });
  }
  step_times::add_since("finish", finishing);
}

// `bytes` of the copy open as `fd` (`size` bytes long) at `offset`, zeros past its end.
void read_padded(int fd, std::uint64_t size, std::uint64_t offset, std::span<std::byte> out,
                 const std::string& what) {
  const auto available =
      offset < size ? std::min<std::uint64_t>(size - offset, out.size()) : std::uint64_t{0};
  read_at(fd, offset, out.first(available), what);
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(available), out.end(), std::byte{0});
}

// XOR: the parity blocks of this rank's set, reduced around the set's ring in chunks (as a
// reduce-scatter): the partial XOR for member p starts at p + 1 with its segment for p, and
// each member on the way XORs in its own, until it reaches p after n - 1 steps.
void encode_parity(const std::filesystem::path& dir, std::int64_t epoch, const Communicator& comm,
                   const Copies& copies, int set_size, const RedundancyCall& call,
                   const std::string& context, RedundancyStats& stats,
                   std::exception_ptr& failure) {
  const auto sets = xor_sets(copies.placement, set_size);
  const auto mine = std::find_if(sets.begin(), sets.end(), [&](const XorSet& set) {
    return std::find(set.begin(), set.end(), comm.rank()) != set.end();
  });
  if (mine == sets.end()) {
    return;
  }
  const auto& set = *mine;
  const int n = static_cast<int>(set.size());
  const int me = static_cast<int>(std::find(set.begin(), set.end(), comm.rank()) - set.begin());
  std::vector<RedundancyMember> members;
  std::uint64_t largest = 0;
  for (const int rank : set) {
    members.push_back(copies.members[rank]);
    largest = std::max(largest, copies.members[rank].size);
  }
  const auto layout = ParityLayout::of(n, largest);
  const auto own = local_copy_file(dir, epoch, comm.rank());
  const auto own_size = copies.members[comm.rank()].size;
  std::unique_ptr<RedundancyFileWriter> writer;
  FileDescriptor fd(-1);
  keep_first_failure(failure, [&] {
    fd = open_regular_file_for_reading(own);
    writer = std::make_unique<RedundancyFileWriter>(
        parity_block_file(dir, epoch, comm.rank()),
        RedundancyHeader{RedundancyKind::kParity, epoch, comm.rank(), me, layout.segment,
                         layout.segment, 0, members});
  });
  const int right = set[(me + 1) % n], left = set[(me + n - 1) % n];
  const auto chunk =
      static_cast<std::size_t>(std::min<std::uint64_t>(kProtectionChunk, layout.segment));
  const auto out = chunk_buffer(0, chunk), in = chunk_buffer(1, chunk);
  for (std::uint64_t offset = 0; offset < layout.segment; offset += chunk) {
    const auto size =
        static_cast<std::size_t>(std::min<std::uint64_t>(chunk, layout.segment - offset));
    // read_padded writes every byte of `into` (zeros past the copy's end). Where it fails, the
    // ring still runs to its end with whatever `into` held: the failure fails the whole
    // protection at its agreement, and nothing sent is kept.
    const auto my_segment_for = [&](int holder, std::span<std::byte> into) {
      keep_first_failure(failure, [&] {
        read_padded(fd.get(), own_size, layout.segment_for(me, holder) * layout.segment + offset,
                    into, own.string());
      });
    };
    const auto sent = out.first(size), got = in.first(size);
    auto reading = step_times::Clock::now();
    my_segment_for((me + n - 1) % n, sent);
    step_times::add_since("read", reading);
    for (int step = 1; step < n; ++step) {
      const BufferSend send{right, kRedundancyTag + step, sent};
      const BufferReceive receive{left, kRedundancyTag + step, got};
      const auto transferring = step_times::Clock::now();
      exchange_within(comm, std::span(&send, 1), std::span(&receive, 1), call.timeout, context);
      step_times::add_since("transfer", transferring);
      stats.bytes_sent += size;
      stats.bytes_received += size;
      if (step < n - 1) {
        reading = step_times::Clock::now();
        my_segment_for(((me - 1 - step) % n + n) % n, sent);
        xor_into(sent, got);
        step_times::add_since("read", reading);
      } else {
        const auto writing = step_times::Clock::now();
        keep_first_failure(failure, [&] { writer->append(got); });
        step_times::add_since("write", writing);
      }
    }
  }
  const auto finishing = step_times::Clock::now();
  keep_first_failure(failure, [&] { writer->finish(); });
  step_times::add_since("finish", finishing);
}

}  // namespace

RedundancyStats protect_local_copies(const std::filesystem::path& dir, std::int64_t epoch,
                                     const Communicator& comm, const LocalRedundancy& redundancy,
                                     const RedundancyCall& call) {
  RedundancyStats stats;
  if (redundancy.none()) {
    return stats;
  }
  const auto started = std::chrono::steady_clock::now();
  const auto context =
      fmt::format("protect epoch {} ({})", epoch, local_redundancy_name(redundancy));
  const auto own = local_copy_file(dir, epoch, comm.rank());
  const bool partner = redundancy.scheme == LocalRedundancy::Scheme::kPartner;
  std::uint64_t size = 0, xxh64 = 0;
  const auto hashing = step_times::Clock::now();
  // A member is named by its copy's record, which holds every value's xxh64 (the copy's own
  // bytes are hashed where they are sent whole, for a partner copy's data; the ring of the
  // parity blocks reads them out of order).
  auto failure = failure_of([&] {
    const auto fd = open_regular_file_for_reading(own);
    size = file_size(fd.get());
    xxh64 = local_copy_record_xxh64(read_local_copy_record(fd.get(), own.string()));
  });
  step_times::add_since("hash", hashing);
  const auto gathering = step_times::Clock::now();
  auto copies = gather_copies(comm, call.host.empty() ? host_name() : call.host, size, xxh64,
                              failure, call, context + ": the copies");
  step_times::add_since("agree", gathering);
  stats.unprotected = unprotected_ranks(copies.placement, partner, redundancy.set_size);
  if (partner) {
    exchange_partner_copies(dir, epoch, comm, copies, call, context, stats, failure);
  } else {
    encode_parity(dir, epoch, comm, copies, redundancy.set_size, call, context, stats, failure);
  }
  const auto agreeing = step_times::Clock::now();
  raise_if_any_failed_within(comm, failure, context, call.timeout);
  step_times::add_since("agree", agreeing);
  stats.seconds = seconds_since(started);
  return stats;
}

std::string redundancy_warning(const Communicator& comm, const LocalRedundancy& redundancy,
                               const RedundancyCall& call) {
  if (redundancy.none()) {
    return "";
  }
  const auto placement =
      HostPlacement::of(comm.allgather(call.host.empty() ? host_name() : call.host));
  const bool partner = redundancy.scheme == LocalRedundancy::Scheme::kPartner;
  const auto alone = unprotected_ranks(placement, partner, redundancy.set_size);
  if (alone.empty()) {
    return "";
  }
  if (placement.hosts.size() == 1) {
    return fmt::format(
        "--local-redundancy {}: the job runs on one host ({}), so no node-local part is "
        "protected against its loss; a lost host costs the epochs since the last flush",
        local_redundancy_name(redundancy), placement.hosts.front());
  }
  return fmt::format(
      "--local-redundancy {}: rank{} {} {} in no XOR set (their hosts run more ranks than the "
      "other hosts of their set): the loss of their host costs the epochs since the last flush",
      local_redundancy_name(redundancy), alone.size() == 1 ? "" : "s", fmt::join(alone, ", "),
      alone.size() == 1 ? "is" : "are");
}

}  // namespace epochrun
