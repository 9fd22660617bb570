#include "nccl/words.h"

#include <cctype>
#include <cstddef>
#include <cstdio>

namespace coll::nccl {

namespace {

bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// collX -> ncclX where X starts with a capital, COLL_X -> NCCL_X: whole words only, so
// "collective" and "collinfo" stay.
std::string renamed(const std::string& t) {
  std::string out;
  out.reserve(t.size());
  for (size_t i = 0; i < t.size();) {
    const bool start = i == 0 || !identChar(t[i - 1]);
    if (start && t.compare(i, 4, "coll") == 0 && i + 4 < t.size() &&
        std::isupper(static_cast<unsigned char>(t[i + 4]))) {
      out += "nccl";
      i += 4;
    } else if (start && t.compare(i, 5, "COLL_") == 0) {
      out += "NCCL_";
      i += 5;
    } else {
      out += t[i++];
    }
  }
  return out;
}

// "A / A" (the two APIs' names of one thing, made equal by renaming) as "A".
std::string deduplicated(std::string t) {
  for (size_t at = t.find(" / "); at != std::string::npos; at = t.find(" / ", at + 1)) {
    size_t begin = at;
    while (begin > 0 && identChar(t[begin - 1])) --begin;
    size_t end = at + 3;
    while (end < t.size() && identChar(t[end])) ++end;
    const size_t len = at - begin;
    if (len > 0 && end - (at + 3) == len && t.compare(begin, len, t, at + 3, len) == 0) t.erase(at, 3 + len);
  }
  return t;
}

// Without the "\n    at file:line" lines a failure collects on its way up.
std::string withoutLocations(const std::string& t) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, 8, "\n    at ") == 0) {
      const size_t eol = t.find('\n', i + 1);
      i = eol == std::string::npos ? t.size() : eol;
    } else {
      out += t[i++];
    }
  }
  return out;
}

}  // namespace

std::string ncclWords(const std::string& text, int rank, bool locations) {
  std::string t = deduplicated(renamed(locations ? text : withoutLocations(text)));
  if (rank >= 0 && !t.empty() && t.compare(0, 5, "rank ") != 0) {
    char head[32];  // snprintf, not std::to_string: its digit table would be exported
    std::snprintf(head, sizeof(head), "rank %d: ", rank);
    t = head + t;
  }
  return t;
}

}  // namespace coll::nccl
