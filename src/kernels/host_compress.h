// Host versions of the encodings of kernels/compress.h, run on every hop of a
// compressed collective: vectorised with AVX2 and F16C where the CPU has them (chosen once,
// at the first call), the scalar functions of compress.h elsewhere. Either way the result
// is bit-identical to the scalar functions for every input, infinities and NaN included.
// Pointers need no alignment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll {

// A group of n <= kCompressGroup floats -> its exponent and n fp16 words (== encodeFp16Group).
int8_t hostEncodeFp16Group(const float* x, size_t n, uint16_t* out);
// == decodeFp16Group.
void hostDecodeFp16Group(const uint16_t* in, size_t n, int8_t e, float* out);
// n floats <-> n bf16 words (== floatToBf16 / bf16ToFloat element by element), any n.
void hostEncodeBf16(const float* x, size_t n, uint16_t* out);
void hostDecodeBf16(const uint16_t* in, size_t n, float* out);

// A hop's sum in one pass (a reduce-scatter step of a compressed allreduce): v =
// decode(in) + src, times 1/nranks when avg; out = v encoded (fp16: n <= kCompressGroup,
// the exponent returned; bf16: any n, 0 returned); dst (may be null, or src) = out
// decoded. The same bits as decoding, reducing (host_reduce.h float sum/avg) and encoding
// one after another, except a NaN's payload where both inputs are NaN.
int8_t hostSumEncodeFp16Group(const uint16_t* in, int8_t ein, const float* src, size_t n, bool avg, int nranks,
                              uint16_t* out, float* dst);
void hostSumEncodeBf16(const uint16_t* in, const float* src, size_t n, bool avg, int nranks, uint16_t* out, float* dst);

// Which implementation this CPU uses: "avx2+f16c" or "portable" (for tests and logs).
const char* hostCompressVariant();

}  // namespace coll
