#include "bench/redundancy_bench.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "bench/bench_rounds.hpp"
#include "bench/step_series.hpp"
#include "collective_errors.hpp"
#include "local_copy.hpp"
#include "local_redundancy.hpp"
#include "local_redundancy_file.hpp"
#include "regular_file.hpp"
#include "step_times.hpp"
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
  // The exchange's target is against the same work done the plainest way: the transfer alone
  // leaves out reading the copy file and writing the partner copy, which the exchange cannot.
  Series partner_work{"partner_same_work_limit",
                      "the same work the plainest way: the copy file read whole (pread), "
                      "MPI_Sendrecv of its bytes, the received bytes written into a new file of "
                      "the node-local directory (no fsync, as a partner copy); no hashing",
                      {}};
  Series xor_exchange{"xor_exchange",
                      "--local-redundancy xor:RANKS: each rank's parity block reduced around the "
                      "ring from the copy files and written",
                      {}};
  Series xor_mpi{"xor_mpi_limit", "the same ring's MPI_Sendrecv steps of the same bytes", {}};
  Series xor_work{"xor_same_work_limit",
                  "the same work the plainest way: the copy file read whole (pread), the ring's "
                  "MPI_Sendrecv steps of the same bytes each XORed into the next, the block "
                  "written into a new file (no fsync, as a parity block); no hashing",
                  {}};
  Series encode{"xor_encode",
                "a segment XORed into a block of its size in memory, as each step of the ring does",
                {}};
  Series memory{"memory_pass_limit",
                "the XOR's memory traffic (two blocks read, one written) at the bandwidth of the "
                "faster copy of the segment into the block in the same round, memcpy or rep movsb: "
                "1.5 times that copy",
                {}};
};

// An XOR of two blocks into one moves 3 blocks through memory (two read, one written), a copy 2.
constexpr double kXorTrafficOverCopy = 1.5;

// `in` copied to `out` by the x86 string instruction, which the processor runs as whole-line
// moves: on this machine's AMD EPYC 20 to 30% faster than glibc's memcpy for 64 MiB. memcpy
// elsewhere.
void string_copy(std::span<std::byte> out, std::span<const std::byte> in) {
  auto* to = out.data();
  const auto* from = in.data();
  auto count = std::min(out.size(), in.size());
#if defined(__x86_64__)
  asm volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(count) : : "memory");
#else
  std::memcpy(to, from, count);
#endif
}

// The ring's sendrecv steps of `segment` bytes each, `steps` of them (as the protection's).
void ring_steps(const Communicator& comm, std::vector<std::byte>& out, std::vector<std::byte>& in,
                int steps) {
  const int right = (comm.rank() + 1) % comm.size();
  const int left = (comm.rank() + comm.size() - 1) % comm.size();
  for (int step = 0; step < steps; ++step) {
    comm.sendrecv(std::span<const std::byte>(out), right, std::span(in), left, step);
  }
}

// The copy file `file` read whole into `into` (its first bytes; the rest as it was).
void read_copy(const fs::path& file, std::vector<std::byte>& into) {
  const auto fd = open_regular_file_for_reading(file);
  const auto size = std::min<std::uint64_t>(file_size(fd.get()), into.size());
  read_at(fd.get(), 0, std::span(into).first(static_cast<std::size_t>(size)), file.string());
}

// `bytes` written into a new file `file` (which does not exist).
void write_new_file(const fs::path& file, std::span<const std::byte> bytes) {
  auto fd = create_new_file(file);
  write_at(fd.get(), 0, bytes, file.string());
  fd.close(file.string());
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
  // xor_encode's: a segment of the copy's values (all of them with a set of 2).
  const auto segment = std::span<const std::byte>(state).first(
      static_cast<std::size_t>(std::min<std::uint64_t>(layout.segment, state.size())));
  RedundancySeries series;
  StepSeries partner_steps, xor_steps;
  step_times::record_on_this_thread(comm.is_root());
  // An exchange, its steps recorded apart from everything else.
  const auto exchange = [&](const LocalRedundancy& redundancy, StepSeries& steps) {
    step_times::take();
    protect_local_copies(dir, kEpoch, comm, redundancy, call);
    steps.add(step_times::take());
  };
  const auto own = local_copy_file(dir, kEpoch, comm.rank());
  const auto received = dir / "received";
  // Untimed, before each measure: the files a former round wrote are deleted, as a run's
  // retention deletes an older epoch's apart from the save. A file renamed over a former one
  // (the same epoch's partner copy, round after round) also makes ext4 start writing it back at
  // once (auto_da_alloc), which a run's new epoch never does, and its pages are freed in the
  // timed rename.
  const auto fresh = [&] {
    remove_redundancy_files(dir, [](std::int64_t) { return false; });
    fs::remove(received);
  };
  // `measure` and `limit` timed in this round, in alternating order.
  const auto pair = [&](std::int64_t round, Series& measure, const std::function<void()>& step,
                        Series& limit, const std::function<void()>& limit_step) {
    alternate(
        round,
        [&] {
          fresh();
          measure.seconds.push_back(timed(comm, measure.name, step));
        },
        [&] {
          fresh();
          limit.seconds.push_back(timed(comm, limit.name, limit_step));
        });
  };
  for (std::int64_t round = 0; round < settings.rounds; ++round) {
    pair(
        round, series.partner, [&] { exchange(partner, partner_steps); }, series.partner_work,
        [&] {
          read_copy(own, out);
          ring_steps(comm, out, in, 1);
          write_new_file(received, in);
        });
    series.partner_mpi.seconds.push_back(
        timed(comm, series.partner_mpi.name, [&] { ring_steps(comm, out, in, 1); }));
    pair(
        round, series.xor_exchange, [&] { exchange(xor_set, xor_steps); }, series.xor_work,
        [&] {
          read_copy(own, out);
          const int right = (comm.rank() + 1) % comm.size();
          const int left = (comm.rank() + comm.size() - 1) % comm.size();
          // As the ring does: send a segment of the copy, XOR the next one into what arrives,
          // and keep what arrives at the last step.
          const auto segment_of = [&](int step) {
            const auto offset = std::min<std::size_t>(
                static_cast<std::size_t>(step) * segment_out.size(), out.size());
            const auto size = std::min(segment_out.size(), out.size() - offset);
            std::copy_n(out.begin() + static_cast<std::ptrdiff_t>(offset), size,
                        segment_out.begin());
          };
          segment_of(0);
          for (int step = 1; step < comm.size(); ++step) {
            comm.sendrecv(std::span<const std::byte>(segment_out), right, std::span(segment_in),
                          left, step);
            if (step + 1 < comm.size()) {
              segment_of(step);
              xor_into(segment_out, segment_in);
            }
          }
          write_new_file(received, segment_in);
        });
    series.xor_mpi.seconds.push_back(timed(comm, series.xor_mpi.name, [&] {
      ring_steps(comm, segment_out, segment_in, comm.size() - 1);
    }));
    alternate(
        round,
        [&] {
          series.encode.seconds.push_back(
              timed(comm, series.encode.name, [&] { xor_into(block, segment); }));
        },
        [&] {
          const double plain = timed(
              comm, "memcpy", [&] { std::memcpy(block.data(), segment.data(), segment.size()); });
          const double string = timed(comm, "rep movsb", [&] { string_copy(block, segment); });
          series.memory.seconds.push_back(kXorTrafficOverCopy * std::min(plain, string));
        });
  }
  step_times::record_on_this_thread(false);
  const double bytes = double(copy_bytes) * comm.size();
  // An exchange against the same work done the plainest way (the target's), with where its time
  // went, and against its bare transfer (no target: the transfer alone does not read or write a
  // file).
  const auto exchange_rows = [&](const Series& measure, const Series& same_work,
                                 const Series& transfer, const StepSeries& steps) {
    auto row = with_target(compare(measure, same_work, bytes), kRedundancyTarget);
    row["steps"] = steps.medians();
    rows.push_back(std::move(row));
    auto over_transfer = compare(measure, transfer, bytes);
    over_transfer["name"] = measure.name + "_over_transfer";
    rows.push_back(std::move(over_transfer));
  };
  exchange_rows(series.partner, series.partner_work, series.partner_mpi, partner_steps);
  exchange_rows(series.xor_exchange, series.xor_work, series.xor_mpi, xor_steps);
  rows.push_back(
      with_target(compare(series.encode, series.memory, double(segment.size()) * comm.size()),
                  kRedundancyTarget));
  for (const auto* limit : {&series.partner_work, &series.partner_mpi, &series.xor_work,
                            &series.xor_mpi, &series.memory}) {
    rows.push_back(compare(*limit, *limit, bytes));
  }
  return rows;
}

}  // namespace epochrun::cli
