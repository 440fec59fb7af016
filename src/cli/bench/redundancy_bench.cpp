#include "bench/redundancy_bench.hpp"

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "collective_errors.hpp"
#include "local_copy.hpp"
#include "local_redundancy.hpp"
#include "regular_file.hpp"
#include "xor_parity.hpp"

namespace epochrun::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kEpoch = 1;

struct RedundancySeries {
  Series partner{"partner_exchange",
                 "--local-redundancy partner: each rank's node-local copy read, hashed, sent to "
                 "the next rank and written as its partner copy",
                 {}};
  Series partner_mpi{
      "partner_mpi_limit", "MPI_Sendrecv of the same bytes between the same ranks", {}};
  Series partner_write{"partner_mpi_write_limit",
                       "MPI_Sendrecv of the same bytes, the received bytes written into a new "
                       "file of the node-local directory (no fsync, as a partner copy)",
                       {}};
  Series xor_exchange{"xor_exchange",
                      "--local-redundancy xor:RANKS: each rank's parity block reduced around the "
                      "ring from the copy files and written",
                      {}};
  Series xor_mpi{"xor_mpi_limit", "the same ring's MPI_Sendrecv steps of the same bytes", {}};
  Series encode{"xor_encode", "a copy's n - 1 segments XORed into one parity block, in memory", {}};
  Series memory{"memory_pass_limit", "memcpy of the same bytes: one read and write pass", {}};
};

// The ring's sendrecv steps of `segment` bytes each, `steps` of them (as the protection's).
void ring_steps(const Communicator& comm, std::vector<std::byte>& out, std::vector<std::byte>& in,
                int steps) {
  const int right = (comm.rank() + 1) % comm.size();
  const int left = (comm.rank() + comm.size() - 1) % comm.size();
  for (int step = 0; step < steps; ++step) {
    comm.sendrecv(std::span<const std::byte>(out), right, std::span(in), left, step);
  }
}

}  // namespace

nlohmann::json measure_redundancy(const Communicator& comm, const fs::path& directory,
                                  std::uint64_t bytes_per_rank, MeasureSettings& settings) {
  auto rows = nlohmann::json::array();
  if (comm.size() < 2) {
    return rows;
  }
  // Each rank a "host" of its own, with its own node-local directory.
  const RedundancyCall call{kDefaultSaveTimeout, "bench-host-" + std::to_string(comm.rank())};
  const auto dir = directory / ("local-" + std::to_string(comm.rank()));
  fs::create_directories(dir);
  std::vector<std::byte> state(bytes_per_rank);
  std::mt19937_64 random(static_cast<std::uint64_t>(comm.rank()) + 1);
  for (std::size_t i = 0; i + 8 <= state.size(); i += 8) {
    const auto word = random();
    std::memcpy(state.data() + i, &word, 8);
  }
  run_then_agree(comm, "bench: node-local copies", [&] {
    SavedBlob blob;
    blob.view.name = "state";
    blob.view.shape = {state.size()};
    blob.view.bytes = state;
    write_local_copy(dir, "bench", kEpoch, comm.rank(), comm.size(), {blob});
  });
  // The copies differ by a few bytes (their records): the limits move the largest.
  const auto copy_bytes = static_cast<std::uint64_t>(comm.allreduce(
      static_cast<std::int64_t>(fs::file_size(local_copy_file(dir, kEpoch, comm.rank()))),
      Reduction::kMax));
  const auto layout = ParityLayout::of(comm.size(), copy_bytes);
  const auto partner = parse_local_redundancy("partner");
  const auto xor_set = parse_local_redundancy("xor:" + std::to_string(comm.size()));
  std::vector<std::byte> out(copy_bytes), in(copy_bytes), block(layout.segment);
  std::vector<std::byte> segment_out(layout.segment), segment_in(layout.segment);
  RedundancySeries series;
  // `measure` and `limit` timed in this round, in alternating order.
  const auto pair = [&](std::int64_t round, Series& measure, const std::function<void()>& step,
                        Series& limit, const std::function<void()>& limit_step) {
    alternate(
        round, [&] { measure.seconds.push_back(timed(comm, measure.name, step)); },
        [&] { limit.seconds.push_back(timed(comm, limit.name, limit_step)); });
  };
  for (std::int64_t round = 0; round < settings.rounds; ++round) {
    pair(
        round, series.partner, [&] { protect_local_copies(dir, kEpoch, comm, partner, call); },
        series.partner_mpi, [&] { ring_steps(comm, out, in, 1); });
    series.partner_write.seconds.push_back(timed(comm, series.partner_write.name, [&] {
      ring_steps(comm, out, in, 1);
      const auto file = dir / "received";
      fs::remove(file);
      auto fd = create_new_file(file);
      write_at(fd.get(), 0, in, file.string());
      fd.close(file.string());
    }));
    pair(
        round, series.xor_exchange, [&] { protect_local_copies(dir, kEpoch, comm, xor_set, call); },
        series.xor_mpi, [&] { ring_steps(comm, segment_out, segment_in, comm.size() - 1); });
    pair(
        round, series.encode,
        [&] {
          std::fill(block.begin(), block.end(), std::byte{0});
          for (int k = 0; k + 1 < layout.members; ++k) {
            const auto offset = static_cast<std::uint64_t>(k) * layout.segment;
            if (offset < state.size()) {
              xor_into(block, std::span(state).subspan(offset));
            }
          }
        },
        series.memory, [&] { std::memcpy(out.data(), state.data(), state.size()); });
  }
  const double bytes = double(copy_bytes) * comm.size();
  rows.push_back(
      with_target(compare(series.partner, series.partner_mpi, bytes), kRedundancyTarget));
  // The same rounds of the partner exchange against the transfer and a write of its bytes.
  auto with_write = compare(series.partner, series.partner_write, bytes);
  with_write["name"] = "partner_exchange_with_write";
  rows.push_back(std::move(with_write));
  rows.push_back(
      with_target(compare(series.xor_exchange, series.xor_mpi, bytes), kRedundancyTarget));
  rows.push_back(
      with_target(compare(series.encode, series.memory, double(state.size()) * comm.size()),
                  kRedundancyTarget));
  for (const auto* limit :
       {&series.partner_mpi, &series.partner_write, &series.xor_mpi, &series.memory}) {
    rows.push_back(compare(*limit, *limit, bytes));
  }
  return rows;
}

}  // namespace epochrun::cli
