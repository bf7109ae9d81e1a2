#include "bench/core/collective_descriptor.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace cclbench {

CollectiveRegistry::CollectiveRegistry(std::vector<const CollectiveDescriptor*> descriptors)
    : descriptors_(std::move(descriptors)) {}

const CollectiveDescriptor& CollectiveRegistry::find(Collective collective) const {
  for (const CollectiveDescriptor* descriptor : descriptors_) {
    if (descriptor != nullptr && descriptor->kind == collective) return *descriptor;
  }
  throw std::invalid_argument("no descriptor registered for collective " + std::string(name_of(collective)));
}

}  // namespace cclbench
