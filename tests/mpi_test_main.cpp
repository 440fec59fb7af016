// The gtest main of the MPI test binaries: owns MPI_Init/Finalize, lets only rank 0 print the
// usual report (other ranks print their failures, with their rank), and fails the whole run
// when any rank had a failure.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "epochrun/communicator.hpp"
#include "epochrun/mpi_session.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::cerr << "[rank " << rank_ << "] " << (result.file_name() ? result.file_name() : "?")
                << ":" << result.line_number() << ": failure\n"
                << result.summary() << std::endl;
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  epochrun::MpiSession mpi(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  const auto world = epochrun::Communicator::world();
  // Library progress lines would drown the test report; warnings still show.
  spdlog::set_level(spdlog::level::warn);
  if (!world.is_root()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world.rank()));
  }
  const bool local_failure = RUN_ALL_TESTS() != 0;
  const bool any_failure = world.any_true(local_failure);
  if (any_failure && world.is_root() && !local_failure) {
    std::cerr << "FAILED: a test failed on another rank (see its [rank N] lines)" << std::endl;
  }
  return any_failure ? 1 : 0;
}
