// --local-redundancy across real hosts: five hosts of ../shared/multihost (each its own /local
// tmpfs), MPI over TCP between them. Four ranks, one a host, write their node-local parts and
// protect them (local_redundancy_driver); a host's /local is wiped; the recovery on the three
// others and the fresh host5 rebuilds the lost part bit-identical (the whole copy file's xxh64
// as before), with the partner copies and with XOR parity over the four hosts; two hosts of the
// set lost are reported lost on every rank; a damaged byte in a partner copy or a parity block
// is found and never used. About 40 s, most of it the harness's start and mpirun's.
#define EPOCHRUN_MULTIHOST_HOSTS 5

#include <gtest/gtest.h>

#include <regex>

#include "multihost_harness.hpp"

namespace epochrun::testing {
namespace {

const std::string kDriver = LOCAL_REDUNDANCY_DRIVER;
const std::string kSaveHosts = "host1,host2,host3,host4";
// The restart: host2 is gone, host5 takes its rank.
const std::string kRestartHosts = "host1,host5,host3,host4";

class MultihostRedundancy : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::is_directory(kHarness)) {
      GTEST_SKIP() << "no multihost harness: " << kHarness;
    }
    ASSERT_TRUE(Harness::up_) << "start-hosts.sh failed";
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = "/local/epochrun-redundancy-test/" + std::string(test->name());
  }
  void TearDown() override {
    for (const auto& host : kHosts) {
      on_host(host, "rm -rf /local/epochrun-redundancy-test");
    }
  }

  // The driver on 4 ranks of `hosts`; its output.
  std::string driver(const std::string& hosts, const std::vector<std::string>& args) {
    const auto result = run_within(program_on_hosts(kDriver, hosts, 4, "/tmp", args), "/",
                                   kJobEndsWithinSeconds, launcher_environment());
    EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    return result.out;
  }
  std::string save(const std::string& scheme) {
    return driver(kSaveHosts, {"save", dir_, "17", scheme, "900", "5"});
  }
  std::string recover(const std::string& hosts = kRestartHosts) {
    return driver(hosts, {"recover", dir_, "17", "900", "5"});
  }
  void wipe(const std::string& host) {
    EXPECT_EQ(on_host(host, "rm -rf /local/epochrun-redundancy-test").exit_code, 0);
  }
  // One byte of `file` on `host` flipped.
  void flip_byte(const std::string& host, const std::string& file) {
    const auto flipped =
        on_host(host,
                "python3 -c \"import sys; f = open(sys.argv[1], 'r+b'); f.seek(-100, 2); b = "
                "f.read(1); f.seek(-100, 2); f.write(bytes([b[0] ^ 16]))\" " +
                    dir_ + "/" + file);
    EXPECT_EQ(flipped.exit_code, 0) << flipped.err;
  }
  // "rank R on HOST: copy xxh64 H" of every rank's line in `out`.
  static std::map<int, std::string> copies(const std::string& out) {
    std::map<int, std::string> found;
    const std::regex line(R"(rank (\d+) on (\w+): copy xxh64 (\d+)(, (.*))?)");
    std::istringstream lines(out);
    for (std::string text; std::getline(lines, text);) {
      std::smatch match;
      if (std::regex_match(text, match, line)) {
        found[std::stoi(match[1])] =
            match[3].str() + (match[5].matched ? " " + match[5].str() : "");
      }
    }
    return found;
  }
  // The part of rank 1 rebuilt on host5, every copy as it was saved.
  void expect_rebuilt(const std::string& saved, const std::string& recovered,
                      const std::string& host_line) {
    EXPECT_NE(recovered.find("lost:\n"), std::string::npos) << recovered;
    EXPECT_NE(recovered.find("host: " + host_line), std::string::npos) << recovered;
    EXPECT_NE(recovered.find("rank 1 on host5: copy xxh64"), std::string::npos) << recovered;
    const auto before = copies(saved), after = copies(recovered);
    ASSERT_EQ(before.size(), 4u) << saved;
    for (const auto& [rank, sum] : before) {
      EXPECT_EQ(after.count(rank) == 1 ? after.at(rank) : "", sum + " ok") << "rank " << rank;
    }
  }

  std::string dir_;
};

TEST_F(MultihostRedundancy, PartnerCopiesRebuildALostHostOnAFreshOne) {
  const auto saved = save("partner");
  wipe("host2");
  expect_rebuilt(saved, recover(), "host2: 1 part from the partner copy on host3");
}

TEST_F(MultihostRedundancy, XorParityRebuildsALostHostOnAFreshOneButNotTwoOfTheSet) {
  const auto saved = save("xor:4");
  wipe("host2");
  expect_rebuilt(saved, recover(), "host2: 1 part rebuilt from XOR parity on host1, host3, host4");
  save("xor:4");
  wipe("host2");
  wipe("host3");
  wipe("host5");
  const auto lost = recover(kSaveHosts);
  EXPECT_NE(lost.find("lost: 1 2\n"), std::string::npos) << lost;
  EXPECT_NE(lost.find("host: host3: 1 part lost"), std::string::npos) << lost;
}

TEST_F(MultihostRedundancy, ADamagedByteInAPartnerCopyOrParityBlockIsNeverUsed) {
  for (const auto& [scheme, host, file] :
       {std::tuple("partner", "host3", "epoch-000017.rank-1.partner"),
        std::tuple("xor:4", "host4", "epoch-000017.rank-3.xor")}) {
    save(scheme);
    flip_byte(host, file);
    wipe("host2");
    wipe("host5");
    const auto recovered = recover();
    EXPECT_NE(recovered.find("lost: 1\n"), std::string::npos) << recovered;
    EXPECT_NE(recovered.find(std::string("damaged: ") + host + ": " + file), std::string::npos)
        << recovered;
    EXPECT_EQ(recovered.find("rank 1 on host5"), std::string::npos) << recovered;
  }
}

}  // namespace
}  // namespace epochrun::testing
