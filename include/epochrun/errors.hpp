// The exceptions epochrun throws, and the process exit codes.
//
// The exit codes are part of the user-facing contract (README "Exit codes"): batch scripts
// branch on them, so a code never changes meaning once published. Which code each class maps
// to is said once, in the library's table of error classes (with the tag that carries the class
// from one rank to the others).
#pragma once

#include <stdexcept>
#include <string>

#include "epochrun/export.hpp"

namespace epochrun {

enum class ExitCode : int {
  kSuccess = 0,
  kJobFailed = 1,        // a task threw, MPI or the job itself failed
  kUsageError = 2,       // bad flag, bad value, missing config file, unknown job
  kCheckpointError = 3,  // asked-for checkpoint missing, unreadable or mismatched
  kUploadFailed = 4,     // the job finished and checkpointed, but the upload failed
  // EX_TEMPFAIL: the run stopped before the job finished (a preemption signal, the time
  // limit); run it again with --resume-from-epoch latest to continue.
  kRequeue = 75,
};

// Maps any exception to the exit code the program should return: its epochrun class's code,
// kJobFailed for an exception of no epochrun class.
EPOCHRUN_API ExitCode exit_code_for(const std::exception& error);

// Base of every epochrun error; `what()` is one line meant for a human.
class EPOCHRUN_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  ExitCode exit_code() const { return exit_code_for(*this); }
};

// Invalid input from the user: flags, config values, job or blob names.
class EPOCHRUN_API UsageError : public Error {
 public:
  using Error::Error;
};

// A checkpoint cannot be used: it does not exist, it is damaged, or it belongs to another
// job or topology. Resuming must stop rather than continue from the wrong state.
class EPOCHRUN_API CheckpointError : public Error {
 public:
  using Error::Error;
};

// The requested epoch has no committed checkpoint.
class EPOCHRUN_API CheckpointNotFound : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// The file exists but its bytes are not what was committed (checksum, truncation, HDF5
// structure) -- the "latest" resume skips such epochs.
class EPOCHRUN_API CorruptCheckpoint : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// The checkpoint is intact but does not fit this run (job, rank count, format version).
class EPOCHRUN_API CheckpointMismatch : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// Writing a checkpoint failed. The runner logs it and goes on; it never escapes a run.
class EPOCHRUN_API SaveError : public Error {
 public:
  using Error::Error;
};

// An HDF5 call failed; the message carries HDF5's own error stack.
class EPOCHRUN_API Hdf5Error : public Error {
 public:
  using Error::Error;
};

// An MPI call failed.
class EPOCHRUN_API MpiError : public Error {
 public:
  using Error::Error;
};

}  // namespace epochrun
