// fak_selfcheck: reports the CPU features, the chosen kernel tier, and checks every supported
// tier's matmul against a double-precision reference and against its own M=1 path.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "fak/kernels/kernel_tier.h"
#include "kernels/dispatch.h"
#include "kernels/ref/ref_kernels.h"

int main() {
  using namespace fak;
  std::printf("fak self-check\n  cpu features : %s\n", CpuFeatureSummary().c_str());
  if (Status env = KernelTierEnvironmentStatus(); !env.ok()) std::printf("  warning      : %s\n", env.ToString().c_str());
  std::printf("  active tier  : %s\n", std::string(ActiveKernelTier()).c_str());

  const size_t m = 17, k = 300, n = 50;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(m * k), w(n * k);
  for (float& v : x) v = dist(rng);
  for (float& v : w) v = dist(rng);
  std::vector<double> ref = kernels::ref::MatMul(x.data(), w.data(), m, k, n);
  bool all_ok = true;
  for (kernels::Tier tier : kernels::SupportedTiers()) {
    const kernels::KernelTable& t = **kernels::TableFor(tier);
    std::vector<float> y(m * n), row(n);
    t.matmul(x.data(), k, w.data(), k, y.data(), n, m, k, 0, n);
    double max_err = 0;
    bool batch_independent = true;
    for (size_t i = 0; i < m; ++i) {
      t.matmul(x.data() + i * k, k, w.data(), k, row.data(), n, 1, k, 0, n);
      for (size_t j = 0; j < n; ++j) {
        max_err = std::max(max_err, std::abs(y[i * n + j] - ref[i * n + j]));
        batch_independent &= row[j] == y[i * n + j];
      }
    }
    bool ok = max_err < 1e-3 && batch_independent;
    all_ok &= ok;
    std::printf("  tier %-7s: matmul max|err| vs double = %.2e, batch-independent = %s  [%s]\n", t.name, max_err,
                batch_independent ? "yes" : "NO", ok ? "ok" : "FAIL");
  }
  std::printf("%s\n", all_ok ? "self-check passed" : "self-check FAILED");
  return all_ok ? 0 : 1;
}
