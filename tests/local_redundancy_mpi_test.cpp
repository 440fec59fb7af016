// --local-redundancy's collective steps on 4 real MPI ranks of this machine, each "host" a
// directory of its own (RedundancyCall::host names it): protect, lose a host's files, recover
// on the others and a fresh host, bit-identical; two hosts of one set lost, reported on every
// rank; a damaged byte in a partner copy or a parity block found and never used, and an intact
// copy other than the one the parity names never XORed in.
// tests/multihost_test.cpp runs the same across the hosts of tests/clusters/multihost.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "epochrun/communicator.hpp"
#include "local_recovery.hpp"
#include "local_redundancy.hpp"
#include "local_redundancy_file.hpp"
#include "local_redundancy_parts.hpp"
#include "mpi_thread_level.hpp"
#include "piece_transfer.hpp"
#include "test_support.hpp"

namespace epochrun::testing {
namespace {

constexpr std::int64_t kEpoch = 7;
constexpr std::uint64_t kSeed = 99;
constexpr std::size_t kKib = 700;  // chunks of 4 MiB: several parts, one chunk each

class LocalRedundancyMpi : public ::testing::Test {
 protected:
  Communicator comm = Communicator::world();
  ScratchDir scratch{comm};

  // The "host" of `rank` and its node-local directory.
  std::filesystem::path dir_of(const std::string& host) const {
    const auto dir = scratch.path() / host;
    std::filesystem::create_directories(dir);
    return dir;
  }
  RedundancyCall as(const std::string& host) const {
    return RedundancyCall{std::chrono::seconds(60), host};
  }
  // Every rank on host "hostR+1", writing and protecting its part.
  RedundancyStats save(const LocalRedundancy& redundancy) {
    const auto host = "host" + std::to_string(comm.rank() + 1);
    write_part(dir_of(host), kEpoch, comm.rank(), comm.size(), kSeed, kKib);
    return protect_local_copies(dir_of(host), kEpoch, comm, redundancy, as(host));
  }
  void wipe(const std::string& host) {
    comm.barrier();
    if (comm.is_root()) {
      std::filesystem::remove_all(scratch.path() / host);
    }
    comm.barrier();
  }
  // The restart: rank 1 on the fresh "host5", the others where they were.
  RecoveryReport recover() {
    const auto host =
        comm.rank() == 1 ? std::string("host5") : "host" + std::to_string(comm.rank() + 1);
    auto report = recover_local_copies(dir_of(host), kEpoch, comm, as(host));
    if (report.complete()) {
      EXPECT_EQ(part_problem(dir_of(host), kEpoch, comm.rank(), kSeed, kKib), "");
    }
    return report;
  }
  void flip_byte(const std::filesystem::path& file, std::uint64_t at) {
    comm.barrier();
    if (comm.is_root()) {
      std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
      stream.seekg(static_cast<std::streamoff>(at));
      char byte = 0;
      stream.read(&byte, 1);
      byte ^= 0x10;
      stream.seekp(static_cast<std::streamoff>(at));
      stream.write(&byte, 1);
    }
    comm.barrier();
  }
};

TEST_F(LocalRedundancyMpi, PartnerCopiesRebuildALostHostOnAFreshOne) {
  const auto stats = save(parse_local_redundancy("partner"));
  EXPECT_TRUE(stats.unprotected.empty());
  EXPECT_GT(stats.bytes_sent, kKib * 1024);
  wipe("host2");
  const auto report = recover();
  EXPECT_TRUE(report.complete());
  EXPECT_EQ(report.sources[1], PartSource::kPartner);
  EXPECT_EQ(report.host_lines[1], "host2: 1 part from the partner copy on host3");
  EXPECT_EQ(report.sources[0], PartSource::kInPlace);
}

TEST_F(LocalRedundancyMpi, XorParityRebuildsOneLostHostOfTheSetNotTwo) {
  save(parse_local_redundancy("xor:4"));
  wipe("host2");
  const auto report = recover();
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(report.sources[1], PartSource::kParity);
  EXPECT_EQ(report.host_lines[1], "host2: 1 part rebuilt from XOR parity on host1, host3, host4");

  save(parse_local_redundancy("xor:4"));
  wipe("host2");
  wipe("host3");
  wipe("host5");
  const auto lost = recover();
  EXPECT_EQ(lost.unrecoverable, (std::vector<int>{1, 2}));
  EXPECT_EQ(lost.host_lines[2], "host3: 1 part lost");
}

// A member's copy that is whole and verifies but is not the one the parity was made of (rank 2's,
// saved again from other values after the exchange): its record is not the one the parity
// names, so rank 1's part is reported lost rather than rebuilt from it.
TEST_F(LocalRedundancyMpi, AnIntactCopyOtherThanTheOneTheParityNamesIsNeverXoredIn) {
  save(parse_local_redundancy("xor:4"));
  comm.barrier();
  if (comm.rank() == 2) {
    write_part(dir_of("host3"), kEpoch, 2, comm.size(), kSeed + 1, kKib);
  }
  wipe("host2");
  const auto report = recover();
  EXPECT_EQ(report.unrecoverable, std::vector<int>{1}) << report.summary();
  if (comm.rank() == 1) {
    EXPECT_FALSE(std::filesystem::exists(local_copy_file(dir_of("host5"), kEpoch, 1)));
  }
}

// Two ranks a host (ranks 0 and 1 on hostA, 2 and 3 on hostB): each rank of hostA is protected
// by a rank of hostB (partner), or forms an XOR set of two with one (xor:2, a mirror); hostA
// lost, both its parts come back on the fresh hostC.
class TwoRanksAHost : public LocalRedundancyMpi,
                      public ::testing::WithParamInterface<const char*> {};

TEST_P(TwoRanksAHost, LoseOneHostAndRebuildBothItsParts) {
  const auto host_of = [&](bool restarted) {
    return comm.rank() < 2 ? (restarted ? "hostC" : "hostA") : "hostB";
  };
  write_part(dir_of(host_of(false)), kEpoch, comm.rank(), comm.size(), kSeed, kKib);
  const auto stats = protect_local_copies(dir_of(host_of(false)), kEpoch, comm,
                                          parse_local_redundancy(GetParam()), as(host_of(false)));
  EXPECT_TRUE(stats.unprotected.empty());
  wipe("hostA");
  const auto report = recover_local_copies(dir_of(host_of(true)), kEpoch, comm, as(host_of(true)));
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(report.host_lines.size(), 2u) << report.summary();
  EXPECT_EQ(part_problem(dir_of(host_of(true)), kEpoch, comm.rank(), kSeed, kKib), "");
}

INSTANTIATE_TEST_SUITE_P(PartnerAndMirror, TwoRanksAHost, ::testing::Values("partner", "xor:2"),
                         [](const auto& instance) {
                           return std::string(instance.param) == "partner" ? "partner" : "xor2";
                         });

// Parts longer than two of the protection's chunks (kProtectionChunk): moved, hashed as they
// are sent and written in several rounds; a lost host's part rebuilt bit-identical on a fresh
// one, with a partner copy and with a mirror's parity (xor:2, a block as long as a part).
class SeveralChunks : public LocalRedundancyMpi,
                      public ::testing::WithParamInterface<const char*> {};

TEST_P(SeveralChunks, PartsLongerThanAChunkAreRebuiltBitIdentical) {
  const std::size_t kib = 2 * (kProtectionChunk >> 10) + 333;
  const auto host = "host" + std::to_string(comm.rank() + 1);
  write_part(dir_of(host), kEpoch, comm.rank(), comm.size(), kSeed, kib);
  const auto stats = protect_local_copies(dir_of(host), kEpoch, comm,
                                          parse_local_redundancy(GetParam()), as(host));
  EXPECT_GT(stats.bytes_sent, 2 * kProtectionChunk);
  wipe("host2");
  const auto restarted = comm.rank() == 1 ? std::string("host5") : host;
  const auto report = recover_local_copies(dir_of(restarted), kEpoch, comm, as(restarted));
  EXPECT_TRUE(report.complete()) << report.summary();
  EXPECT_EQ(part_problem(dir_of(restarted), kEpoch, comm.rank(), kSeed, kib), "");
}

INSTANTIATE_TEST_SUITE_P(PartnerAndMirror, SeveralChunks, ::testing::Values("partner", "xor:2"),
                         [](const auto& instance) {
                           return std::string(instance.param) == "partner" ? "partner" : "xor2";
                         });

// A damaged byte in a partner copy or a parity block (`file`, on `host`): rank 1's host lost, its
// part is not rebuilt from it, and the report names the damaged file.
class DamagedRedundancy
    : public LocalRedundancyMpi,
      public ::testing::WithParamInterface<std::tuple<const char*, const char*, const char*>> {};

TEST_P(DamagedRedundancy, IsFoundAndNeverUsed) {
  const auto [scheme, host, name] = GetParam();
  save(parse_local_redundancy(scheme));
  const auto file = scratch.path() / host / name;
  flip_byte(file, std::filesystem::file_size(file) - 100);
  wipe("host2");
  const auto report = recover();
  EXPECT_EQ(report.unrecoverable, std::vector<int>{1});
  ASSERT_EQ(report.damaged.size(), 1u);
  EXPECT_NE(report.damaged[0].find(std::string(host) + ": " + name), std::string::npos);
  // Nothing was made of it: rank 1 has no copy.
  if (comm.rank() == 1) {
    EXPECT_FALSE(std::filesystem::exists(local_copy_file(dir_of("host5"), kEpoch, 1)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    PartnerCopyAndParityBlock, DamagedRedundancy,
    ::testing::Values(std::tuple("partner", "host3", "epoch-000007.rank-1.partner"),
                      std::tuple("xor:4", "host4", "epoch-000007.rank-3.xor")));

// An asynchronous save's flush runs on a background thread: the protection runs there on a
// communicator of its own while the job's thread makes collective calls on the job's.
TEST_F(LocalRedundancyMpi, ProtectsFromABackgroundThreadOnItsOwnCommunicator) {
  if (!mpi_calls_from_any_thread()) {
    GTEST_SKIP() << "MPI does not run at MPI_THREAD_MULTIPLE here";
  }
  const auto own = comm.duplicate();
  const auto host = "host" + std::to_string(comm.rank() + 1);
  write_part(dir_of(host), kEpoch, comm.rank(), comm.size(), kSeed, kKib);
  std::exception_ptr failure;
  std::thread background([&] {
    try {
      protect_local_copies(dir_of(host), kEpoch, own, parse_local_redundancy("xor:4"), as(host));
    } catch (...) {
      failure = std::current_exception();
    }
  });
  std::int64_t sum = 0;
  for (int i = 0; i < 50; ++i) {
    sum += comm.allreduce(std::int64_t{1}, Reduction::kSum);
  }
  background.join();
  EXPECT_EQ(sum, 50 * comm.size());
  ASSERT_FALSE(failure);
  wipe("host2");
  EXPECT_TRUE(recover().complete());
}

TEST_F(LocalRedundancyMpi, OneHostProtectsNothingAndSaysSo) {
  const auto warning = redundancy_warning(comm, parse_local_redundancy("partner"), as("alone"));
  EXPECT_NE(warning.find("one host (alone)"), std::string::npos);
  EXPECT_EQ(redundancy_warning(comm, parse_local_redundancy("xor:4"),
                               as("host" + std::to_string(comm.rank()))),
            "");
}

}  // namespace
}  // namespace epochrun::testing
