#!/usr/bin/env bash
# The layer check (cmake/check_layers.cmake) passes on the tree and fails, naming the file, on
# a copy of it with an upward include: an internal one, a public one, and one between two
# sub-layers of the checkpoint layer.
# Usage: layering_test.sh SOURCE_DIR
set -euo pipefail
source_dir="$1"
work="$(mktemp -d /tmp/epochrun-layering.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail() {
  echo "layering_test: FAILED: $*" >&2
  exit 1
}
check() { cmake -DSOURCE_DIR="$1" -P "$source_dir/cmake/check_layers.cmake" >"$work/out" 2>&1; }

check "$source_dir" || { cat "$work/out"; fail "the tree itself has an upward include"; }

# expect_refused DESCRIPTION FILE LINE: a copy of the tree with LINE added to FILE is refused,
# with FILE named.
expect_refused() {
  local copy="$work/copy"
  rm -rf "$copy"
  mkdir -p "$copy"
  cp -r "$source_dir/src" "$source_dir/include" "$copy/"
  echo "$3" >>"$copy/$2"
  if check "$copy"; then
    fail "$1 was not refused"
  fi
  grep -q "$2" "$work/out" || { cat "$work/out"; fail "$1: the refusal does not name $2"; }
  echo "layering_test: refused as it should be: $1 ($(grep -m1 "$2" "$work/out" | sed 's/^ *//'))"
}
expect_refused "the platform layer including the checkpoint layer" src/platform/durable_file.cpp \
  '#include "checkpoint_saver.hpp"'
expect_refused "a base public header including a job-layer public header" \
  include/epochrun/errors.hpp '#include "epochrun/job.hpp"'
expect_refused "the job layer including the format layer" src/job/job.cpp \
  '#include "integrity_header.hpp"'
expect_refused "the checkpoint layer's node-local copies including its level" \
  src/checkpoint/local/local_copy.cpp '#include "local_level.hpp"'
expect_refused "the checkpoint layer's shared-file save including its saver" \
  src/checkpoint/shared_file/streaming_writer.cpp '#include "checkpoint_saver.hpp"'
echo "layering_test: passed"
