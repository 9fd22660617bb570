// PreMulSum ops (collRedOpCreatePreMulSum) as the engine runs them: a sum over inputs the
// library first multiplies by the scalar. The lowering happens when the operation is
// called; the scaling, which reads the scalar, when it runs (OpDesc::prepare), so a
// scalar of collScalarDevice residence changed before a group ends is the one used.
#pragma once

#include <cstddef>

#include "comm/comm.h"

namespace coll {

// Turns od (an op of comm whose `op` is a PreMulSum op) into a sum over a scaled copy of
// this rank's input (OpDesc::inputBytes); other ops are left alone. Host buffers: the copy
// comes from comm's scratch pool and is made by the Prod kernel; device buffers: a
// stream-ordered scratch buffer and a scaling kernel on the op's stream and device.
Status lowerPreMulSum(collComm* comm, OpDesc* od);

}  // namespace coll
