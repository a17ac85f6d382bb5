// nn's parameters are the parallel layer's (parallel/parameter.h): a weight
// source hands a Parameter's value to the GEMMs and takes its gradient back.
#pragma once

#include "weft/parallel/parameter.h"

namespace weft::nn {

using parallel::common_rows;
using parallel::counted_part;
using parallel::held_part;
using parallel::joined_slice;
using parallel::make_parameter;
using parallel::Parameter;
using parallel::row_shard_of;
using parallel::shard_of;
using parallel::sharded_parameter;
using parallel::ShardSpec;
using parallel::split_spec;
using parallel::unpadded;

}  // namespace weft::nn
