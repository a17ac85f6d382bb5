#include "weft/parallel/overlap/bulk.h"

#include "weft/parallel/overlap/overlap.h"

namespace weft::parallel::overlap {

BulkBackward bulk_backward(bool configured, const OverlapChoice& dgrad,
                           const OverlapChoice& wgrad) {
  return {.dgrad = !configured || dgrad.method == OverlapMethod::bulk,
          .wgrad = !configured || wgrad.method == OverlapMethod::bulk};
}

void dgrad_beside_wgrad(const ExecContext& ec, const DgradBesideWgrad& call, const Tensor& dy,
                        const Tensor& w, const Tensor& dx, GemmWorkspace& ws,
                        const std::function<void(const ExecContext& gemm_context)>& wgrad) {
  const ExecContext busy = beside_comm(ec, call.comm_cores);
  const GemmCall dgrad_call{.schedule = call.schedule,
                            .group = call.group,
                            .options = call.options,
                            .async = call.bulk.dgrad,
                            .overlap = call.bulk.dgrad ? OverlapChoice{} : call.dgrad_overlap,
                            .name = call.name,
                            .quantized = call.quantized};
  comm::Work dgrad =
      scheduled_gemm(call.regather && call.bulk.wgrad ? busy : ec, dgrad_call, dy, w, dx, ws)
          .pending;
  const bool in_flight =
      call.bulk.dgrad && call.schedule != Schedule::plain && call.group && call.group->size() > 1;
  wgrad(in_flight ? busy : ec);
  dgrad.wait(ec);
}

}  // namespace weft::parallel::overlap
