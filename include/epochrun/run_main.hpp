// Your own program with the whole epochrun command line over the jobs it registered:
//
//   int main(int argc, char** argv) {
//     register_my_jobs(epochrun::JobRegistry::instance());
//     return epochrun::run_main(argc, argv);
//   }
//
// `./myprog run --job NAME ...`, `list-jobs`, `inspect`, `bench`: the same options, config
// files, summary and exit codes (README "Exit codes") as the epochrun program, which is this
// very call over the jobs in epochrun's jobs/.
#pragma once

#include "epochrun/export.hpp"

namespace epochrun {

// Runs the command in argv[1] and returns the process exit code. Starts and ends MPI itself
// (call it before MPI_Init, at most once per process).
EPOCHRUN_API int run_main(int argc, char** argv);

}  // namespace epochrun
