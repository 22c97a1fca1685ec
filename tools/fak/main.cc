// fak — the command-line face of the library: run and chat with a model, inspect and benchmark
// it, verify deletion certificates, show manifests and check a directory blob store.
#include <cstdio>
#include <span>
#include <string_view>

#include "fak/kernels/kernel_tier.h"
#include "fak/core/version.h"
#include "tools/fak/cli.h"

namespace {

constexpr std::string_view kUsage =
    "usage: fak COMMAND [ARGS] [--help]\n"
    "\n"
    "commands:\n"
    "  run MODEL --prompt TEXT      generate a continuation of TEXT\n"
    "  chat MODEL                   interactive chat through the planner (reuse, screening, receipts)\n"
    "  inspect MODEL                model configuration, or a GGUF/safetensors file's metadata and tensors\n"
    "  bench MODEL                  quick prefill and decode tokens/s\n"
#if FAK_WITH_SERVER
    "  serve MODEL                  OpenAI-compatible HTTP server with Prometheus metrics\n"
#endif
    "  verify CERT --journal J --key K\n"
    "                               check a deletion certificate against its journal and issuer key\n"
    "  manifest show FILE           validate a KV manifest and print it as canonical JSON\n"
    "  store fsck DIR               verify every blob of a directory blob store\n"
    "  version                      library version, kernel build and kernel tier\n"
    "\n"
    "`fak COMMAND --help` describes each command. Exit status: 0 success, 1 failure, 2 usage error.\n"
    "The kernel tier can be pinned with FAK_KERNEL_TIER=scalar|avx2|avx512_skx|avx512 (x86-64)\n"
    "or scalar|neon|neon_dotprod (aarch64).\n";

int Version() {
  std::printf("fak %.*s (%.*s), kernel tier %.*s\n", int(fak::LibraryVersion().size()), fak::LibraryVersion().data(),
              int(fak::KernelBuild().size()), fak::KernelBuild().data(), int(fak::ActiveKernelTier().size()),
              fak::ActiveKernelTier().data());
  return fak::cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fak::cli;
  if (argc < 2) {
    std::fputs(kUsage.data(), stderr);
    return kExitUsage;
  }
  const std::string_view command = argv[1];
  const std::span<char* const> rest(argv + 2, static_cast<size_t>(argc - 2));
  if (command == "--help" || command == "-h" || command == "help") return ShowHelp(kUsage);
  if (command == "--version" || command == "version") return Version();
  if (fak::Status tier = fak::KernelTierEnvironmentStatus(); !tier.ok()) return Fail(command, tier);
  if (command == "run") return RunCommand(rest);
  if (command == "chat") return ChatCommand(rest);
  if (command == "inspect") return InspectCommand(rest);
  if (command == "bench") return BenchCommand(rest);
#if FAK_WITH_SERVER
  if (command == "serve") return ServeCommand(rest);
#endif
  if (command == "verify") return VerifyCommand(rest);
  if (command == "manifest") return ManifestCommand(rest);
  if (command == "store") return StoreCommand(rest);
  std::fprintf(stderr, "fak: unknown command '%.*s'\n\n%s", int(command.size()), command.data(), kUsage.data());
  return kExitUsage;
}
