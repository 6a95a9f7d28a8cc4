#pragma once
// Internal: the on-disk pipeline cache file. Compiling SPIR-V to machine code is the slow part of
// creating a pipeline; the driver's VkPipelineCache blob is kept between runs, one file per device
// and driver, so a second process finds its pipelines already compiled.
//
// File layout: a tensorgrad header (magic, format version, payload size, FNV-1a hash of the payload)
// followed by the driver's blob. The hash catches truncated or corrupt files before the driver sees
// them; the blob's own header (vendor, device, pipelineCacheUUID) is checked against the device too.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/vk/device.h"

namespace tg::vk::detail {

// $XDG_CACHE_HOME/tensorgrad if XDG_CACHE_HOME is set and absolute, else $HOME/.cache/tensorgrad;
// empty if neither is known.
std::string default_pipeline_cache_dir();

// <dir>/pipelines-<vendor>-<device>-<driver version>-<pipelineCacheUUID>.bin, all in hex.
std::string pipeline_cache_path(const std::string& dir, const DeviceInfo& device);

struct LoadedPipelineCache {
  std::vector<std::byte> blob;  // the driver's data, to hand to vkCreatePipelineCache
  std::string ignored_reason;   // set when a file exists but was not accepted
};
// Reads and checks the file. A missing file gives an empty blob and no reason.
LoadedPipelineCache read_pipeline_cache(const std::string& path, const DeviceInfo& device);

// Writes atomically (a temporary file renamed over the old one), creating the directory; returns
// an error message, or nothing on success.
std::optional<std::string> write_pipeline_cache(const std::string& path, std::span<const std::byte> blob);

}  // namespace tg::vk::detail
