// The kmeans program: the whole epochrun command line over the kmeans job.
//   mpiexec -n 3 ./kmeans run --job kmeans --checkpoint-dir ck --summary-json summary.json
#include <epochrun/run_main.hpp>

#include "kmeans_job.hpp"

int main(int argc, char** argv) {
  kmeans::register_job(epochrun::JobRegistry::instance());
  return epochrun::run_main(argc, argv);
}
