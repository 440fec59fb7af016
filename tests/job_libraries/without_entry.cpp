// A shared library that is not a job library: it has no epochrun entry point.
extern "C" __attribute__((visibility("default"))) int not_a_job_library() {
  return 0;
}
