// What the ranks of a bounded agreement (first_error_within) do when it does not complete in
// time: find out which ranks never came, and tell every rank that did, so that each one's last
// line names the same stuck ranks. Costs nothing while agreements complete: no message is sent
// until a rank gives up. Every rank gives up only to end the job, so the messages of a roll call
// never meet a later agreement.
//
//   rank 0 gives up (its deadline passed, or another rank told it that it gave up): it asks
//   every rank "are you here?", waits a second for the answers, and sends its verdict ("ranks
//   5, 7 did not arrive within 600 s") to the ranks that answered;
//   another rank gives up: it tells rank 0, then keeps answering rank 0 and waits a few seconds
//   for its verdict; without one, rank 0 is the one that did not come.
#pragma once

#include <string>

#include "epochrun/communicator.hpp"

namespace epochrun {

class RollCall {
 public:
  // `seconds`: the agreement's timeout, as the verdict states it.
  RollCall(const Communicator& comm, std::string seconds);

  // Between the tests of a waiting rank. Rank 0: true when another rank gave up, so that rank
  // 0 calls the roll now. Other ranks: answers rank 0's roll call; throws AgreementTimeout with
  // rank 0's verdict when it comes.
  bool poll();

  // The wait is over without the agreement: throws AgreementTimeout naming the ranks that did
  // not come, after the roll call above.
  [[noreturn]] void give_up();

 private:
  [[noreturn]] void call_the_roll();
  [[noreturn]] void wait_for_the_verdict();

  const Communicator* comm_;
  std::string seconds_;
};

// "rank 5" or "ranks 5, 7, ..." (at most ten numbers, then how many more), for a verdict.
std::string name_ranks(const std::vector<int>& ranks);

}  // namespace epochrun
