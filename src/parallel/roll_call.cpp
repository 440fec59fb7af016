#include "roll_call.hpp"

#include <mpi.h>

#include <chrono>
#include <thread>
#include <vector>

#include "agreement_timeout.hpp"
#include "mpi_check.hpp"

namespace epochrun {
namespace {

// Tags of the roll call's messages, apart from everything else on the library's communicator.
constexpr int kGaveUpTag = 7311;   // another rank to rank 0: I gave up
constexpr int kRollTag = 7312;     // rank 0 to every rank: are you here?
constexpr int kPresentTag = 7313;  // a rank to rank 0: here
constexpr int kVerdictTag = 7314;  // rank 0 to the ranks present: who did not come
constexpr int kHeardTag = 7315;    // a rank to rank 0: verdict received

// How long rank 0 waits for the answers to its roll call, and then for the ranks present to
// confirm its verdict. Ranks that are waiting answer within milliseconds.
constexpr auto kAnswerWindow = std::chrono::seconds(1);
// How long another rank waits for rank 0's verdict after it gave up: rank 0's two windows and
// a margin.
constexpr auto kVerdictWindow = std::chrono::seconds(4);
constexpr auto kPollPause = std::chrono::milliseconds(1);

// Sends an empty message with `tag` to `target` and forgets it: an empty message is delivered
// eagerly, and the sender is about to end the job.
void notify(const Communicator& comm, int target, int tag) {
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(nullptr, 0, MPI_CHAR, target, tag, comm.raw(), &request), "MPI_Isend");
  check_mpi(MPI_Request_free(&request), "MPI_Request_free");
}

// The source of a waiting message with `tag` from `source` (MPI_ANY_SOURCE for any), received,
// or -1 when none waits. `text` receives its characters.
int receive_if_waiting(const Communicator& comm, int source, int tag, std::string* text = nullptr) {
  int waiting = 0;
  MPI_Status status{};
  check_mpi(MPI_Iprobe(source, tag, comm.raw(), &waiting, &status), "MPI_Iprobe");
  if (!waiting) {
    return -1;
  }
  int length = 0;
  check_mpi(MPI_Get_count(&status, MPI_CHAR, &length), "MPI_Get_count");
  std::string received(static_cast<std::size_t>(length), '\0');
  check_mpi(MPI_Recv(received.data(), length, MPI_CHAR, status.MPI_SOURCE, tag, comm.raw(),
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
  if (text != nullptr) {
    *text = std::move(received);
  }
  return status.MPI_SOURCE;
}

}  // namespace

std::string name_ranks(const std::vector<int>& ranks) {
  constexpr std::size_t kNamed = 10;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kNamed; ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
  }
  if (ranks.size() > kNamed) {
    text += " and " + std::to_string(ranks.size() - kNamed) + " more";
  }
  return text;
}

RollCall::RollCall(const Communicator& comm, std::string seconds)
    : comm_(&comm), seconds_(std::move(seconds)) {}

bool RollCall::poll() {
  if (comm_->is_root()) {
    return receive_if_waiting(*comm_, MPI_ANY_SOURCE, kGaveUpTag) >= 0;
  }
  if (receive_if_waiting(*comm_, 0, kRollTag) >= 0) {
    notify(*comm_, 0, kPresentTag);
  }
  std::string verdict;
  if (receive_if_waiting(*comm_, 0, kVerdictTag, &verdict) >= 0) {
    notify(*comm_, 0, kHeardTag);
    throw AgreementTimeout(verdict);
  }
  return false;
}

void RollCall::give_up() {
  if (comm_->is_root()) {
    call_the_roll();
  }
  wait_for_the_verdict();
}

void RollCall::call_the_roll() {
  const int size = comm_->size();
  for (int rank = 1; rank < size; ++rank) {
    notify(*comm_, rank, kRollTag);
  }
  std::vector<bool> present(static_cast<std::size_t>(size), false);
  int answers = 0;
  const auto answered_by = std::chrono::steady_clock::now() + kAnswerWindow;
  while (answers < size - 1 && std::chrono::steady_clock::now() < answered_by) {
    const int source = receive_if_waiting(*comm_, MPI_ANY_SOURCE, kPresentTag);
    if (source > 0 && !present[static_cast<std::size_t>(source)]) {
      present[static_cast<std::size_t>(source)] = true;
      ++answers;
    } else if (source < 0) {
      std::this_thread::sleep_for(kPollPause);
    }
  }
  std::vector<int> absent;
  for (int rank = 1; rank < size; ++rank) {
    if (!present[static_cast<std::size_t>(rank)]) {
      absent.push_back(rank);
    }
  }
  const std::string verdict =
      absent.empty()
          ? "every rank arrived, but the agreement did not complete within " + seconds_ + " s"
          : name_ranks(absent) + " did not arrive within " + seconds_ + " s";
  std::vector<MPI_Request> sent;
  for (int rank = 1; rank < size; ++rank) {
    if (present[static_cast<std::size_t>(rank)]) {
      sent.push_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Isend(verdict.data(), to_count(verdict.size(), "MPI_Isend"), MPI_CHAR, rank,
                          kVerdictTag, comm_->raw(), &sent.back()),
                "MPI_Isend");
    }
  }
  // The ranks present log the verdict before the job ends: give them the window to confirm.
  int heard = 0;
  const auto heard_by = std::chrono::steady_clock::now() + kAnswerWindow;
  while (heard < answers && std::chrono::steady_clock::now() < heard_by) {
    if (receive_if_waiting(*comm_, MPI_ANY_SOURCE, kHeardTag) >= 0) {
      ++heard;
    } else {
      std::this_thread::sleep_for(kPollPause);
    }
  }
  for (auto& request : sent) {
    check_mpi(MPI_Request_free(&request), "MPI_Request_free");
  }
  throw AgreementTimeout(verdict);
}

void RollCall::wait_for_the_verdict() {
  notify(*comm_, 0, kGaveUpTag);
  const auto until = std::chrono::steady_clock::now() + kVerdictWindow;
  while (std::chrono::steady_clock::now() < until) {
    poll();  // throws rank 0's verdict
    std::this_thread::sleep_for(kPollPause);
  }
  throw AgreementTimeout("rank 0 did not answer within " + seconds_ + " s");
}

}  // namespace epochrun
