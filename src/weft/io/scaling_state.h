// The quantized recipes' scaling state (parallel::ScalingRegistry) as
// checkpoints hold it, in each rank's rank<R>.json: the step counter of the
// random streams and, per tensor, its scale and amax history. Floats are
// stored as their f32 bit patterns, so a resume continues bitwise.
#pragma once

#include <string>

#include "weft/io/json.h"
#include "weft/parallel/scaling.h"

namespace weft::io {

Json scaling_json(const parallel::ScalingRegistry::Snapshot& s);
// Throws weft::Error naming `what` when `j` is not what scaling_json wrote.
parallel::ScalingRegistry::Snapshot scaling_from_json(const Json& j, const std::string& what);

}  // namespace weft::io
