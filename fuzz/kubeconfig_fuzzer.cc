// kube::ParseKubeconfig, MergeKubeconfigs and ResolveKubeconfig (what
// `--kubeconfig` and $KUBECONFIG go through), and the base64 they decode.
// Invariants: nothing throws (yaml-cpp's exceptions stay in the parser);
// every error has a message; each context either resolves to a server or
// is refused; base64 round-trips every byte string.

#include "fuzz/fuzz_check.h"
#include "operator/common/base64.h"
#include "operator/kube/config.h"

namespace {

using allocguard::fuzz::NoThrow;
namespace kube = allocguard::kube;

void Resolve(const kube::Kubeconfig& config, const std::string& context) {
  auto rest =
      NoThrow("ResolveKubeconfig", [&] { return kube::ResolveKubeconfig(config, context); });
  if (rest.ok()) {
    AG_FUZZ_CHECK(!rest->server.empty(), "context \"" + context + "\" resolved without a server");
  } else {
    AG_FUZZ_CHECK(!rest.status().message().empty(), "context \"" + context + "\"");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A directory that does not exist: relative paths resolve, files never read.
  auto config = NoThrow("ParseKubeconfig",
                        [&] { return kube::ParseKubeconfig(text, "/nonexistent-fuzz-dir"); });
  if (config.ok()) {
    kube::Kubeconfig merged = NoThrow("MergeKubeconfigs", [&] {
      return kube::MergeKubeconfigs({*config, *config});
    });
    AG_FUZZ_CHECK(merged.contexts.size() == config->contexts.size(), "merging a file with itself");
    Resolve(*config, "");  // current-context
    for (const auto& [name, context] : config->contexts) Resolve(*config, name);
  } else {
    AG_FUZZ_CHECK(!config.status().message().empty(), text);
  }
  const std::string encoded = allocguard::EncodeBase64(text);
  auto decoded = NoThrow("DecodeBase64", [&] { return allocguard::DecodeBase64(encoded); });
  AG_FUZZ_CHECK(decoded.ok() && *decoded == text, "base64 round trip of the input");
  (void)NoThrow("DecodeBase64", [&] { return allocguard::DecodeBase64(text); });
  return 0;
}
