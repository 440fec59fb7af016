/* The least a collective MPI-IO save of heat_diffusion's field can cost at P ranks (a PR x PC
 * grid of 64 x 128 f64 blocks, 64 KiB per rank): create, set a subarray view, write_all, sync,
 * close, gather, rename by rank 0, broadcast -- against the hand-made commit of the same bytes
 * (each rank pwrite + fsync of its 64 KiB into its own range, gather, rename, broadcast).
 * Build: mpicc -O2 -o collective_floor scripts/collective_floor.c
 * Run:   mpirun --oversubscribe -np 96 ./collective_floor DIR ROUNDS (OMPI_MCA_io=romio321 as epochrun).
 * Prints the median over ROUNDS of the slowest rank's seconds for each, alternated. */
#include <mpi.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int cmp(const void* a, const void* b) { double x = *(double*)a, y = *(double*)b; return x < y ? -1 : x > y; }
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* dir = argv[1]; int rounds = atoi(argv[2]);
  int dims[2] = {0, 0}; MPI_Dims_create(size, 2, dims);
  const int br = 64, bc = 128; int gs[2] = {dims[0] * br, dims[1] * bc}, ls[2] = {br, bc};
  int st[2] = {(rank / dims[1]) * br, (rank % dims[1]) * bc};
  MPI_Datatype sub; MPI_Type_create_subarray(2, gs, ls, st, MPI_ORDER_C, MPI_DOUBLE, &sub); MPI_Type_commit(&sub);
  double* block = malloc(br * bc * sizeof(double)); for (int i = 0; i < br * bc; ++i) block[i] = rank + i;
  double* t_coll = malloc(rounds * sizeof(double)); double* t_hand = malloc(rounds * sizeof(double));
  char tmp[512], fin[512];
  for (int r = 0; r < 2 * rounds; ++r) {
    int coll = (r % 4 == 0 || r % 4 == 3);  /* ABBA order */
    snprintf(tmp, sizeof tmp, "%s/r%d.tmp", dir, r); snprintf(fin, sizeof fin, "%s/r%d.h5", dir, r);
    MPI_Barrier(MPI_COMM_WORLD); double t0 = MPI_Wtime(); int ok = 1;
    if (coll) {
      MPI_File f; MPI_File_open(MPI_COMM_WORLD, tmp, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f);
      MPI_File_set_view(f, 0, MPI_DOUBLE, sub, "native", MPI_INFO_NULL);
      MPI_File_write_all(f, block, br * bc, MPI_DOUBLE, MPI_STATUS_IGNORE);
      MPI_File_sync(f); MPI_File_close(&f);
    } else {
      if (rank == 0) { int fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC, 0644); close(fd); }
      MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
      int fd = open(tmp, O_WRONLY); pwrite(fd, block, br * bc * 8, (off_t)rank * br * bc * 8); fsync(fd); close(fd);
    }
    int* all = rank == 0 ? malloc(size * sizeof(int)) : NULL;
    MPI_Gather(&ok, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) { rename(tmp, fin); int d = open(dir, O_RDONLY); fsync(d); close(d); free(all); }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0, slowest; MPI_Reduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) { (coll ? t_coll : t_hand)[r / 2] = slowest; unlink(fin); }
  }
  if (rank == 0) {
    qsort(t_coll, rounds, sizeof(double), cmp); qsort(t_hand, rounds, sizeof(double), cmp);
    printf("%d ranks (%dx%d grid): collective MPI-IO save %.4f s, hand-made commit %.4f s, ratio %.2f\n", size, dims[0], dims[1],
           t_coll[rounds / 2], t_hand[rounds / 2], t_coll[rounds / 2] / t_hand[rounds / 2]);
  }
  MPI_Finalize(); return 0;
}
