// Host versions of the wire encodings of kernels/compress.h, run on every hop of a
// compressed collective: vectorised with AVX2 and F16C where the CPU has them (chosen once,
// at the first call), the scalar functions of compress.h elsewhere. Either way the result
// is bit-identical to the scalar functions for every input, infinities and NaN included.
// Pointers need no alignment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll {

// A block of n <= kCompressBlock floats -> its exponent and n fp16 words (== encodeFp16Block).
int8_t hostEncodeFp16Block(const float* x, size_t n, uint16_t* out);
// == decodeFp16Block.
void hostDecodeFp16Block(const uint16_t* in, size_t n, int8_t e, float* out);
// n floats <-> n bf16 words (== floatToBf16 / bf16ToFloat element by element), any n.
void hostEncodeBf16(const float* x, size_t n, uint16_t* out);
void hostDecodeBf16(const uint16_t* in, size_t n, float* out);

// Which implementation this CPU uses: "avx2+f16c" or "portable" (for tests and logs).
const char* hostCompressVariant();

}  // namespace coll
