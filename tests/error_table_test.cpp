// Every epochrun error class keeps its class and its message wherever a failure travels: from
// one rank to all of them through the three agreements, out of a task group, and to the
// program's exit code. A class collapsed on the way (an Hdf5Error that arrives as an Error)
// would change what the other ranks catch and, for a checkpoint error, the exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include "collective_errors.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job.hpp"
#include "error_table.hpp"
#include "step_times.hpp"

namespace epochrun::testing {
namespace {

// One error class: how to throw it and the exit code README's table gives it.
struct ErrorCase {
  std::string name;
  ExitCode exit_code;
  std::function<void(const std::string&)> raise;
  const std::type_info& type;
};

template <typename E>
ErrorCase error_case(std::string name, ExitCode exit_code) {
  return {std::move(name), exit_code, [](const std::string& message) { throw E(message); },
          typeid(E)};
}

// Every class of errors.hpp, as README's "Exit codes" table maps it.
std::vector<ErrorCase> every_error_class() {
  return {
      error_case<Error>("Error", ExitCode::kJobFailed),
      error_case<UsageError>("UsageError", ExitCode::kUsageError),
      error_case<CheckpointError>("CheckpointError", ExitCode::kCheckpointError),
      error_case<CheckpointNotFound>("CheckpointNotFound", ExitCode::kCheckpointError),
      error_case<CorruptCheckpoint>("CorruptCheckpoint", ExitCode::kCheckpointError),
      error_case<CheckpointMismatch>("CheckpointMismatch", ExitCode::kCheckpointError),
      error_case<SaveError>("SaveError", ExitCode::kJobFailed),
      error_case<Hdf5Error>("Hdf5Error", ExitCode::kJobFailed),
      error_case<MpiError>("MpiError", ExitCode::kJobFailed),
      error_case<AgreementTimeout>("AgreementTimeout", ExitCode::kJobFailed),
  };
}

// The three agreements, each with `step` failing on one rank.
using Agreement = std::function<void(const Communicator&, const std::function<void()>&)>;

std::vector<std::pair<std::string, Agreement>> agreements() {
  return {
      {"run_then_agree",
       [](const Communicator& comm, const std::function<void()>& step) {
         run_then_agree(comm, "probe", step);
       }},
      {"raise_if_any_failed with patience",
       [](const Communicator& comm, const std::function<void()>& step) {
         std::exception_ptr error;
         try {
           step();
         } catch (...) {
           error = std::current_exception();
         }
         raise_if_any_failed(comm, error, "probe", std::chrono::seconds(60));
       }},
      {"run_then_agree_within",
       [](const Communicator& comm, const std::function<void()>& step) {
         run_then_agree_within(comm, "probe", std::chrono::seconds(60), step);
       }},
  };
}

TEST(ErrorTable, EveryClassArrivesAsItselfOnEveryRank) {
  const auto world = Communicator::world();
  for (const auto& error : every_error_class()) {
    for (const auto& [agreement_name, agree] : agreements()) {
      for (int thrower = 0; thrower < world.size(); ++thrower) {
        const std::string message = error.name + " from rank " + std::to_string(thrower);
        const std::string expected =
            "probe: " + (thrower == 0 ? "" : "rank " + std::to_string(thrower) + ": ") + message;
        SCOPED_TRACE(error.name + " through " + agreement_name + ", thrown on rank " +
                     std::to_string(thrower));
        try {
          agree(world, [&] {
            if (world.rank() == thrower) {
              error.raise(message);
            }
          });
          ADD_FAILURE() << "the agreement raised nothing";
        } catch (const std::exception& caught) {
          EXPECT_EQ(typeid(caught), error.type) << "caught " << typeid(caught).name();
          EXPECT_EQ(std::string(caught.what()), expected);
        }
      }
    }
  }
}

// A wait for an agreement looks for a roll call's messages (MPI_Iprobe) only once it has
// lasted 10 ms: no rank gives up, and so none calls the roll, before its timeout, and probing
// after every test held up the waits of agreements that complete within microseconds. Here
// rank 0 waits about 2 ms for the other ranks: its only MPI calls in the wait are tests (a
// round whose wait took 8 ms or more, on a busy machine, is not judged).
TEST(ErrorTable, AnAgreementWaitedForLessThanTenMillisecondsMakesNoRollCallProbe) {
  const auto world = Communicator::world();
  int judged = 0;
  for (int round = 0; round < 5; ++round) {
    world.barrier();
    if (!world.is_root()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    step_times::record_on_this_thread(world.is_root());
    const auto started = std::chrono::steady_clock::now();
    raise_if_any_failed_within(world, nullptr, "agree", std::chrono::seconds(60));
    const auto waited = std::chrono::steady_clock::now() - started;
    const auto calls = step_times::take_calls();
    step_times::record_on_this_thread(false);
    if (!world.is_root() || waited >= std::chrono::milliseconds(8)) {
      continue;
    }
    ++judged;
    const auto made = [&](const std::string& call) {
      return std::any_of(calls.begin(), calls.end(),
                         [&](const auto& counted) { return counted.first == call; });
    };
    EXPECT_TRUE(made("MPI_Test")) << "rank 0 did not wait";
    EXPECT_FALSE(made("MPI_Iprobe")) << "round " << round;
  }
  if (world.is_root() && judged == 0) {
    GTEST_SKIP() << "every wait took 8 ms or more: a machine too busy to judge";
  }
}

TEST(ErrorTable, AnExceptionOfNoEpochrunClassArrivesAsError) {
  const auto world = Communicator::world();
  try {
    run_then_agree(world, "probe", [&] {
      if (world.rank() == 1) {
        throw std::out_of_range("index 7");
      }
    });
    ADD_FAILURE() << "the agreement raised nothing";
  } catch (const std::exception& caught) {
    EXPECT_EQ(typeid(caught), typeid(Error)) << "caught " << typeid(caught).name();
    EXPECT_EQ(std::string(caught.what()), "probe: rank 1: index 7");
  }
}

TEST(ErrorTable, ATaskGroupRethrowsEveryClassAsItself) {
  const auto world = Communicator::world();
  const std::string node = "trainer_" + std::to_string(world.rank());
  Workspace workspace;
  TaskContext context{workspace, world, node, 0, nullptr};
  for (const auto& error : every_error_class()) {
    SCOPED_TRACE(error.name);
    TaskGroup group("probe");
    group.add("fails", [&](TaskContext&) { error.raise("bad input"); });
    try {
      group.run(context);
      ADD_FAILURE() << "the group raised nothing";
    } catch (const std::exception& caught) {
      EXPECT_EQ(typeid(caught), error.type) << "caught " << typeid(caught).name();
      EXPECT_EQ(std::string(caught.what()),
                "task 'fails' of the probe group on " + node + ": bad input");
    }
  }
}

TEST(ErrorTable, EveryClassExitsWithItsCode) {
  for (const auto& error : every_error_class()) {
    try {
      error.raise("exit");
    } catch (const std::exception& caught) {
      EXPECT_EQ(exit_code_for(caught), error.exit_code) << error.name;
    }
  }
  EXPECT_EQ(exit_code_for(std::out_of_range("x")), ExitCode::kJobFailed);
}

TEST(ErrorTable, HasOneRowPerClassWithItsCodeAndItsOwnTag) {
  const auto cases = every_error_class();
  ASSERT_EQ(std::size(kErrorClasses), cases.size());
  std::set<char> tags;
  for (const auto& error : cases) {
    try {
      error.raise("row");
    } catch (const std::exception& caught) {
      const auto& row = error_class_of(caught);
      EXPECT_EQ(row.name, error.name);
      EXPECT_EQ(row.exit_code, error.exit_code) << error.name;
      EXPECT_EQ(&error_class_tagged(row.tag), &row) << error.name;
      tags.insert(row.tag);
    }
  }
  EXPECT_EQ(tags.size(), cases.size()) << "two classes share a tag";
}

TEST(ErrorTable, EachRowThrowsItsOwnClass) {
  // A subclass listed after its base would be taken for the base.
  for (const auto& row : kErrorClasses) {
    try {
      throw_as(row, "thrown");
    } catch (const std::exception& caught) {
      EXPECT_EQ(&error_class_of(caught), &row) << row.name;
      EXPECT_EQ(std::string(caught.what()), "thrown");
    }
  }
}

TEST(ErrorTable, EveryExitCodeOfAClassHasAMeaningForTheHelp) {
  for (const auto& row : kErrorClasses) {
    EXPECT_TRUE(std::any_of(std::begin(kExitCodeMeanings), std::end(kExitCodeMeanings),
                            [&](const auto& meaning) { return meaning.code == row.exit_code; }))
        << row.name;
  }
}

}  // namespace
}  // namespace epochrun::testing
