// The library's error texts in NCCL's words, for the drop-in's ncclGetLastError.
#pragma once

#include <string>

namespace coll::nccl {

// `text` as an NCCL caller reads it: the coll API's names as NCCL's (collAllReduce ->
// ncclAllReduce, collDataType_t -> ncclDataType_t, COLL_ALGO -> NCCL_ALGO; "NCCL_X /
// NCCL_X" once), on one line (the internal source locations a failure passed through
// are kept only when `locations`), with "rank R: " first where rank >= 0 and the text
// does not begin with a rank already.
std::string ncclWords(const std::string& text, int rank, bool locations);

}  // namespace coll::nccl
