// A group whose GPU tensors travel over one backend and whose host tensors
// over another, with the same ranks: what a training job on GPUs under mpirun
// needs. Its gradients, loss and gradient norm live on the GPU (nccl), while
// checkpoints, stop signals, evaluation sums and the like are host values
// (mpi). Each operation goes, as this group numbered it, to the device group
// when its tensors are on the device group's GPU and to the host group
// otherwise (a barrier: the host group); a split splits both.
#pragma once

#include <memory>

#include "weft/comm/process_group.h"

namespace weft::comm {

// device_group and host_group hold the same ranks in the same order (checked);
// the result is named as host_group and takes its timeout. backend() is
// "<device backend>+<host backend>".
std::shared_ptr<ProcessGroup> hybrid_group(std::shared_ptr<ProcessGroup> device_group,
                                           std::shared_ptr<ProcessGroup> host_group);

}  // namespace weft::comm
