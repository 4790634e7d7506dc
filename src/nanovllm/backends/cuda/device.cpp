// resolved_device (backends/backend.h): --device auto settled once, by the CUDA backend's probe.
#include "nanovllm/backends/backend.h"

namespace nanovllm {

DeviceChoice resolved_device(DeviceChoice device) {
  if (device != DeviceChoice::Auto) return device;
  return cuda_available() ? DeviceChoice::Cuda : DeviceChoice::Cpu;
}

}  // namespace nanovllm
