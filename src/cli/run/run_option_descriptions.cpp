#include "run/run_option_descriptions.hpp"

#include <type_traits>
#include <variant>

namespace epochrun::cli {

namespace po = boost::program_options;

po::options_description general_options(GeneralOptions& o) {
  po::options_description options(
      "epochrun run options (also valid as INI keys; the command line wins)");
  options.add_options()("help,h", "print this help (with --job: also the job's options)")(
      "job", po::value(&o.job), "the job to run (see 'epochrun list-jobs')")(
      "config", po::value(&o.config),
      "INI file with any of these options; job options go in a [<job>] section")(
      "checkpoint-dir", po::value(&o.checkpoint_dir)->default_value(o.checkpoint_dir),
      "directory of the checkpoints (created when missing)")(
      "async-checkpoint", po::bool_switch(&o.async_checkpoint),
      "write each checkpoint in the background while the next epoch runs (the state is copied "
      "at the epoch's end; the last checkpoint and one at a stop are synchronous)")(
      "async-max-staging-mib", po::value(&o.async_max_staging_mib),
      "with --async-checkpoint: a checkpoint whose copy would exceed M MiB on any rank is saved "
      "synchronously instead (default: no limit)")(
      "local-dir", po::value(&o.local_dir),
      "a node-local directory (e.g. /local/run1): each save lands there first, the job goes on, "
      "and the checkpoint is written to --checkpoint-dir in the background and committed once "
      "every rank's part is written and verified; a resume on the same hosts loads the "
      "node-local copies when every rank's is complete and verified")(
      "flush-every", po::value(&o.flush_every),
      "with --local-dir: every checkpoint is saved node-local, and only the run's first, every "
      "Nth after it, the last and one at a stop are flushed to --checkpoint-dir; the others are "
      "committed by a small manifest there and lost with their host (default 1: flush every "
      "checkpoint)")(
      "flush-interval", po::value(&o.flush_interval),
      "with --local-dir: also flush the first checkpoint S seconds or more after the last flush "
      "(alone: flush by time only)")(
      "local-keep", po::value(&o.local_keep),
      "with --local-dir: keep the node-local copies of the K newest saved epochs on each host "
      "(default 1)")(
      "local-redundancy", po::value(&o.local_redundancy),
      "with --local-dir: protect each node-local epoch's copies against the loss of a host: "
      "none, partner (each rank's copy also stored on a rank of another host) or xor[:N] (XOR "
      "parity over sets of N hosts, default 4, 1/(N-1) more space); a restart rebuilds a lost "
      "host's copies from them (default none)")(
      "xdmf", po::value(&o.xdmf),
      "FILE: keep an XDMF file describing every committed epoch's global arrays as a time "
      "series that ParaView and VisIt open (pointing into the checkpoint files, no copy), "
      "rewritten after every commit off the job's path")(
      "no-checkpoints", po::bool_switch(&o.no_checkpoints),
      "run without saving anything: no checkpoint, no directory, no lock (for comparisons)")(
      "resume-from-epoch", po::value(&o.resume),
      "N: load epoch N and continue at N+1; latest: the newest committed epoch, or from scratch "
      "when there is none")("num-epochs", po::value(&o.num_epochs),
                            "stop after this epoch number at the latest")(
      "upload-dir", po::value(&o.upload_dir),
      "copy the final committed checkpoint to this directory (or file://DIR)")(
      "summary-json", po::value(&o.summary_json), "write a JSON summary of the run to this file")(
      "log-level", po::value(&o.log_level)->default_value(o.log_level),
      "trace, debug, info, warn, error or off")(
      "keep-last", po::value(&o.keep_last),
      "keep only the K newest checkpoints (older ones go once a newer one is committed)")(
      "keep-every", po::value(&o.keep_every), "also keep every epoch divisible by N as a snapshot")(
      "checkpoint-every", po::value(&o.checkpoint_every),
      "checkpoint every Nth epoch (default 1; with only --checkpoint-interval: by time alone); "
      "auto (with --mtbf): by the Young/Daly interval from the checkpoint cost measured in the "
      "run; init, the last epoch and a preemption or time-limit stop are always checkpointed")(
      "mtbf", po::value(&o.mtbf),
      "HOURS: the mean time between failures of the whole allocation; the run prints, after its "
      "first checkpoint, the Young/Daly checkpoint interval that minimises the expected lost "
      "work from that checkpoint's measured cost")(
      "checkpoint-interval", po::value(&o.checkpoint_interval),
      "also checkpoint an epoch ending S seconds or more after the last committed checkpoint "
      "(0: off)")("delete-checkpoints-on-success", po::bool_switch(&o.delete_on_success),
                  "delete the checkpoints once the exit group has succeeded (backup-and-restore)")(
      "task-failure-timeout",
      po::value(&o.task_failure_timeout)->default_value(o.task_failure_timeout),
      "seconds a rank whose task failed waits for the other ranks to hear of it before it aborts "
      "the whole job (exit 1): they may be blocked in a collective call of the job")(
      "no-directory-lock", po::bool_switch(),
      "run without the checkpoint directory lock (for file systems without flock, or whose flock "
      "does not hold between hosts): no other run may use the directory meanwhile")(
      "array-io", po::value(&o.array_io)->default_value(o.array_io),
      "how a save writes global arrays: auto (each rank its band of whole rows with direct I/O "
      "on a local ext4 or XFS, one collective MPI-IO write otherwise), direct (each rank its "
      "band of whole rows with direct I/O on any file system), mpiio (always the collective "
      "MPI-IO write); blocks of a 2-D grid always take MPI-IO (recorded in every checkpoint)")(
      "mpi-io-hint", po::value(&o.mpi_io_hints)->composing(),
      "KEY=VALUE: an MPI-IO hint for the collective writes and reads of global arrays "
      "(romio_cb_write, romio_cb_read, cb_nodes, cb_buffer_size, striping_factor, "
      "striping_unit...; repeat the option for several; recorded in every checkpoint)")(
      "check-replicated", po::bool_switch(&o.check_replicated),
      "at every save, compare the ranks' replicated blobs and fail the save when they differ "
      "(a debugging aid: every rank hashes every replicated blob)")(
      "save-timeout", po::value(&o.save_timeout)->default_value(o.save_timeout),
      "seconds a rank waits for the other ranks at each step of a save or a load before it "
      "aborts the whole job (exit 1): a rank that takes longer is stuck")(
      "preempt-signals", po::value(&o.preempt_signals)->default_value(o.preempt_signals),
      "signals that stop the run after the epoch in progress with a checkpoint and exit code 75 "
      "(names without SIG, comma-separated; none: no signal is caught)")(
      "allow-config-change", po::value(&o.allow_config_change)->composing(),
      "resume although this run-defining job option (e.g. sgd_regression.seed) differs from the "
      "checkpoint's (repeatable)")(
      "time-budget", po::value(&o.time_budget),
      "seconds from the program start this run may take: it stops with a checkpoint and exit "
      "code 75 when the next epoch would not fit (under SLURM the job's end time also counts)")(
      "time-margin", po::value(&o.time_margin),
      "seconds to keep free before the time limit (default 60 under SLURM, 0 otherwise)");
  return options;
}

po::options_description job_options_description(const JobOptions& declared,
                                                const std::string& job) {
  po::options_description description("options of job " + job + " (INI section [" + job + "])");
  for (const auto& option : declared.all()) {
    const auto name = job + "." + option.key;
    std::visit(
        [&](auto* target) {
          auto* value = po::value(target);
          if constexpr (std::is_same_v<decltype(target), bool*>) {
            value->default_value(*target, *target ? "true" : "false");
          } else {
            value->default_value(*target);
          }
          description.add_options()(name.c_str(), value, option.help.c_str());
        },
        option.target);
  }
  return description;
}

}  // namespace epochrun::cli
