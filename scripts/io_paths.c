/* How epochrun's save path was chosen (docs/benchmarks.md, "The I/O path"): N processes each
 * write SIZE bytes and fsync, in several ways, in rounds that alternate the order of the
 * variants; prints each variant's median seconds and its median per-round ratio to the first
 * variant given.
 *
 *   cc -O2 -o io_paths scripts/io_paths.c && ./io_paths DIR PIECE_KIB VARIANT...
 *
 * Variants: 0 one file per process (the bench's write limit); 1 one shared file, each process
 * at its own offset; 2 as 1 with the whole file reserved first (fallocate KEEP_SIZE, as a save
 * does); 3 as 2 with O_DIRECT; 4 one file per process with O_DIRECT; 5 as 1 with a plain
 * fallocate; 6 as 2 with writeback started every 8 MiB (sync_file_range, as a save does);
 * 7 as 0 with that writeback. 3 processes x 256 MiB, 9 rounds. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 3
#define SZ (256UL << 20)
#define ROUNDS 9
#define WRITEBACK (8UL << 20)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static char *buf;
static size_t piece;

static int own_file(int v) { return v == 0 || v == 4 || v == 7; }

static double run(int v, const char *dir) {
  char shared[4096];
  snprintf(shared, sizeof shared, "%s/shared", dir);
  if (!own_file(v)) {
    int fd = open(shared, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (v == 2 || v == 3 || v == 6) fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, N * SZ + 4096);
    if (v == 5) fallocate(fd, 0, 0, N * SZ + 4096);
    close(fd);
  }
  int go[2], done[2];
  if (pipe(go) || pipe(done)) exit(1);
  for (int r = 0; r < N; r++) {
    if (fork() == 0) {
      char c, own[4096];
      if (read(go[0], &c, 1) != 1) _exit(1);
      snprintf(own, sizeof own, "%s/own%d", dir, r);
      int flags = O_WRONLY | ((v == 3 || v == 4) ? O_DIRECT : 0);
      int fd = own_file(v) ? open(own, flags | O_CREAT | O_TRUNC, 0644) : open(shared, flags);
      if (fd < 0) { perror("open"); _exit(1); }
      off_t base = own_file(v) ? 0 : 4096 + r * SZ;
      for (size_t at = 0; at < SZ; at += piece) {
        if (pwrite(fd, buf + at, piece, base + at) != (ssize_t)piece) { perror("pwrite"); _exit(1); }
        if ((v == 6 || v == 7) && (at + piece) % WRITEBACK == 0)
          sync_file_range(fd, base + at + piece - WRITEBACK, WRITEBACK, SYNC_FILE_RANGE_WRITE);
      }
      fsync(fd);
      close(fd);
      if (write(done[1], "x", 1) != 1) _exit(1);
      _exit(0);
    }
  }
  double t0 = now();
  if (write(go[1], "xxx", N) != N) exit(1);
  for (int r = 0; r < N; r++) {
    char c;
    if (read(done[0], &c, 1) != 1) exit(1);
  }
  double t = now() - t0;
  while (wait(NULL) > 0) {}
  close(go[0]); close(go[1]); close(done[0]); close(done[1]);
  unlink(shared);
  for (int r = 0; r < N; r++) {
    char own[4096];
    snprintf(own, sizeof own, "%s/own%d", dir, r);
    unlink(own);
  }
  return t;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s DIR PIECE_KIB VARIANT...\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  int variants = argc - 3;
  piece = strtoul(argv[2], NULL, 10) << 10;
  if (variants > 8 || piece == 0 || SZ % piece != 0 || posix_memalign((void **)&buf, 4096, SZ)) {
    fprintf(stderr, "at most 8 variants; PIECE_KIB must divide 262144\n");
    return 2;
  }
  for (size_t i = 0; i < SZ; i++) buf[i] = (char)rand();
  double t[8][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    for (int k = 0; k < variants; k++) {
      int kk = (r % 2) ? variants - 1 - k : k;
      t[kk][r] = run(atoi(argv[3 + kk]), dir);
      sleep(1);
    }
  }
  for (int k = 0; k < variants; k++) {
    double s[ROUNDS], ratio[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
      s[r] = t[k][r];
      ratio[r] = t[k][r] / t[0][r];
    }
    qsort(s, ROUNDS, sizeof(double), compare);
    qsort(ratio, ROUNDS, sizeof(double), compare);
    printf("variant %s: median %.3f s (min %.3f, max %.3f), ratio to variant %s %.3f\n", argv[3 + k],
           s[ROUNDS / 2], s[0], s[ROUNDS - 1], argv[3], ratio[ROUNDS / 2]);
  }
  return 0;
}
