// Everything a job or an embedding program needs.
#pragma once

#include "epochrun/blob.hpp"
#include "epochrun/blob_file.hpp"
#include "epochrun/checkpoint_directory.hpp"
#include "epochrun/checkpoint_file.hpp"
#include "epochrun/communicator.hpp"
#include "epochrun/epoch_limiter.hpp"
#include "epochrun/errors.hpp"
#include "epochrun/job.hpp"
#include "epochrun/job_registry.hpp"
#include "epochrun/job_runner.hpp"
#include "epochrun/logging.hpp"
#include "epochrun/mpi_session.hpp"
#include "epochrun/run_history.hpp"
#include "epochrun/run_summary.hpp"
#include "epochrun/uploader.hpp"
#include "epochrun/workspace.hpp"
