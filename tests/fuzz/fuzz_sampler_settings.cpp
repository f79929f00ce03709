// Sampler-settings JSON (presets, the workbench's sampling panel, session
// files, request "sampling" objects): sampler_settings_from_json. Settings it
// accepts must write back to JSON that reads back to the same JSON.
#include <string_view>

#include "fuzz_support.h"
#include "sampling/sampler_settings_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto settings = gb::sampler_settings_from_json(text, "fuzz input");
  if (!settings.ok()) return 0;
  const std::string json = gb::sampler_settings_to_json(settings.value());
  auto again = gb::sampler_settings_from_json(json, "rewritten settings");
  if (!again.ok()) gbfuzz::fuzz_fail("settings written by sampler_settings_to_json do not read back: " + again.error().message);
  if (gb::sampler_settings_to_json(again.value()) != json) gbfuzz::fuzz_fail("sampler settings JSON does not round-trip: " + json);
  return 0;
}
