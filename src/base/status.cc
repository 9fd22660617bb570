#include "base/status.h"

#include <cstring>

namespace coll {

Status& Status::addFrame(const char* file, int line) {
  // Keep only the path below src/ so traces stay readable.
  const char* p = std::strstr(file, "src/");
  if (!msg_) msg_ = std::make_unique<std::string>();
  *msg_ += "\n    at ";
  *msg_ += p ? p + 4 : file;
  *msg_ += ":";
  *msg_ += std::to_string(line);
  return *this;
}

const std::string& Status::noMessage() {
  static const std::string empty;
  return empty;
}

Status systemError(const std::string& what, int err) {
  return Status(Code::kSystem, what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace coll
