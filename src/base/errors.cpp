#include "epochrun/errors.hpp"

#include "error_table.hpp"

namespace epochrun {

const ErrorClass& error_class_of(const std::exception& error) {
  for (const auto& row : kErrorClasses) {
    if (row.is_instance(error)) {
      return row;
    }
  }
  return plain_error_class();
}

const ErrorClass& error_class_tagged(char tag) {
  for (const auto& row : kErrorClasses) {
    if (row.tag == tag) {
      return row;
    }
  }
  return plain_error_class();
}

void throw_as(const ErrorClass& error_class, const std::string& message) {
  error_class.raise(message);
  throw Error(message);  // not reached: every row's raise throws
}

ExitCode exit_code_for(const std::exception& error) {
  return error_class_of(error).exit_code;
}

}  // namespace epochrun
