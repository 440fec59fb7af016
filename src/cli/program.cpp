// The epochrun program: the whole command line (run_main) over the jobs in jobs/, which
// register themselves when this program starts.
#include "epochrun/run_main.hpp"

int main(int argc, char** argv) {
  return epochrun::run_main(argc, argv);
}
