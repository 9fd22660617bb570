// Helpers the fuzz targets share: a fixed-size wire struct made from whatever bytes the
// fuzzer offers (shorter inputs are zero-padded, so every field is reachable), and a check
// that stops the run when a parser broke its own contract.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace coll::fuzz {

// The first n bytes of data, zero-padded or truncated to want bytes.
inline std::vector<char> padded(const unsigned char* data, size_t n, size_t want) {
  std::vector<char> out(want, 0);
  std::memcpy(out.data(), data, n < want ? n : want);
  return out;
}

// Takes the input's first byte, which picks what the rest is (and parameters of it); false
// for an empty input.
inline bool takeSelector(const unsigned char** data, size_t* n, unsigned char* sel) {
  if (*n < 1) return false;
  *sel = **data;
  ++*data;
  --*n;
  return true;
}

// A property the parsers promise: a violation is a crash the fuzzer records.
inline void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz property violated: %s\n", what);
  std::abort();
}

}  // namespace coll::fuzz
