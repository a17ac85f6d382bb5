#include "weft/comm/hybrid.h"

#include <string>

#include "weft/comm/detail/op.h"

namespace weft::comm {

namespace {

class HybridGroup : public ProcessGroup {
 public:
  HybridGroup(std::shared_ptr<ProcessGroup> device_group, std::shared_ptr<ProcessGroup> host_group)
      : ProcessGroup(host_group->name(), host_group->rank(), host_group->size(),
                     host_group->world_ranks()),
        device_(std::move(device_group)),
        host_(std::move(host_group)),
        backend_(std::string(device_->backend()) + "+" + std::string(host_->backend())) {
    set_timeout(host_->timeout());
  }

  std::string_view backend() const override { return backend_; }
  Device device() const override { return device_->device(); }

 protected:
  std::shared_ptr<const Work::Impl> submit(detail::Op op) override {
    const bool device = on_device(op);
    // Each half numbers its own collectives without gaps, as if they had
    // been issued on it: a backend may rely on that (the local one pairs
    // consecutive collectives with alternating slots).
    if (is_collective(op.kind)) op.seq = device ? device_seq_++ : host_seq_++;
    return submit_to(device ? *device_ : *host_, std::move(op));
  }

  std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& lists, int /*color*/,
                                      int /*key*/, const std::string& name) override {
    // Both halves split alike (each a collective over its own ranks).
    std::shared_ptr<ProcessGroup> d = device_->new_subgroups_by_enumeration(lists, name);
    std::shared_ptr<ProcessGroup> h = host_->new_subgroups_by_enumeration(lists, name);
    if (!d || !h) return nullptr;
    return std::make_shared<HybridGroup>(std::move(d), std::move(h));
  }

  std::string unsupported(Device d) const override {
    if (d.is_cpu() || d == device_->device()) return {};
    return format("the {} group moves host memory and {} only", backend_, device_->device());
  }

 private:
  // Whether `op`'s tensors are on the device group's accelerator (check_devices
  // made sure they are all on one device).
  bool on_device(const detail::Op& op) const {
    const Tensor& first = !op.parts_in.empty() ? op.parts_in.front()
                          : op.in.defined()    ? op.in
                                               : op.out;
    return first.defined() && !first.device().is_cpu();
  }

  std::shared_ptr<ProcessGroup> device_, host_;
  std::string backend_;
  // Collectives given to each half (submit runs one call at a time).
  int64_t device_seq_ = 0, host_seq_ = 0;
};

}  // namespace

std::shared_ptr<ProcessGroup> hybrid_group(std::shared_ptr<ProcessGroup> device_group,
                                           std::shared_ptr<ProcessGroup> host_group) {
  WEFT_CHECK(device_group && host_group, "hybrid_group: both groups must be given");
  WEFT_CHECK(
      device_group->rank() == host_group->rank() && device_group->size() == host_group->size() &&
          device_group->world_ranks() == host_group->world_ranks(),
      "hybrid_group: group '{}' ({} backend, rank {} of {}) and group '{}' ({} backend, "
      "rank {} of {}) must hold the same ranks in the same order",
      device_group->name(), device_group->backend(), device_group->rank(), device_group->size(),
      host_group->name(), host_group->backend(), host_group->rank(), host_group->size());
  return std::make_shared<HybridGroup>(std::move(device_group), std::move(host_group));
}

}  // namespace weft::comm
