#include "checkpoint_judge.hpp"

namespace epochrun {

JudgedCheckpoint judge_checkpoint(int fd, const std::string& what) {
  JudgedCheckpoint judged;
  // The metadata hash reads the metadata only (kilobytes, whatever the data): checked on every
  // path, the fast one included.
  judged.integrity = verify_checkpoint_file(fd, what);
  const auto& integrity = judged.integrity;
  // Reading HDF5's metadata would only confirm what the record says when the record was written
  // beside exactly the metadata that has just hashed to the header's value: the writer makes
  // both from one description, and the record carries that hash under its own checksum. A file
  // whose metadata changed since (and whose header was sealed again) is read with HDF5.
  if (!integrity.layout_record.empty() &&
      integrity.record_metadata_xxh64 == integrity.metadata_xxh64) {
    judged.format_version = kFormatVersion3;
    judged.v3 = read_checkpoint_layout_from_record(fd, integrity);
    return judged;
  }
  judged.v3 = read_checkpoint_layout_if_v3(fd, integrity, judged.format_version);
  if (!judged.v3) {
    judged.older = read_checkpoint_layout(fd, integrity);
  }
  return judged;
}

}  // namespace epochrun
